"""Thumbs up and down on answers: stored with what the answer said and cited, refused for
chunks the caller may not see, bounded per key, and exported as golden-set candidates that
name their sender, for a reviewer to complete."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner, Result

from api.main import create_app
from cli.main import app as cli
from evals.check_golden import check_golden
from lorehouse.api_keys import add_key
from lorehouse.settings import BUNDLED_SAMPLE_CORPUS, Settings, get_settings
from lorehouse.stores.duckdb_store import DuckDBStore, FeedbackQuota

LEAVE = "How many weeks of parental leave do primary caregivers get?"


@pytest.fixture
def data_dir(materialized_sample: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(materialized_sample, tmp_path / "data"))


@pytest.fixture
def keys(tmp_path: Path) -> dict[str, object]:
    path = tmp_path / "keys.yaml"
    return {
        "file": path,
        "public": {"X-API-Key": add_key(path, "reader", [])},
        "security": {"X-API-Key": add_key(path, "security-team", ["security"])},
    }


@pytest.fixture
def api(data_dir: Path, keys: dict[str, object]) -> Iterator[TestClient]:
    with TestClient(create_app(Settings(data_dir=data_dir, api_keys_file=keys["file"]))) as c:
        yield c


def _verdict(answer: dict, rating: str, comment: str | None = None) -> dict:
    return {
        "answer_id": answer["answer_id"],
        "rating": rating,
        "comment": comment,
        "question": answer["question"],
        "answer": answer["answer"],
        "citations": [c["chunk_id"] for c in answer["citations"]],
    }


def test_a_verdict_is_stored_with_the_answer_and_its_cited_files(
    api: TestClient, keys: dict, data_dir: Path
) -> None:
    answer = api.post("/v1/ask", json={"question": LEAVE}, headers=keys["public"]).json()
    assert answer["answer_id"] and answer["citations"]
    stored = api.post(
        "/v1/feedback", json=_verdict(answer, "down", "It is 20 weeks."), headers=keys["public"]
    )
    assert stored.status_code == 201, stored.text

    rows = DuckDBStore(data_dir / "lorehouse.duckdb").feedback()
    assert len(rows) == 1
    row = rows.iloc[0]
    assert (row["answer_id"], row["caller"], row["rating"]) == (
        answer["answer_id"],
        "reader",
        "down",
    )
    assert list(row["cited_chunk_ids"]) == [c["chunk_id"] for c in answer["citations"]]
    assert list(row["cited_files"]) == [c["rel_path"] for c in answer["citations"]]


def test_a_verdict_citing_a_chunk_the_caller_may_not_see_is_refused(
    api: TestClient, keys: dict, data_dir: Path
) -> None:
    restricted = api.post(
        "/v1/search",
        json={"query": "incident severity levels", "filters": {"file_types": ["docx"]}},
        headers=keys["security"],
    ).json()["hits"]
    secret = next(h for h in restricted if h["rel_path"].startswith("security/"))
    answer = {"answer_id": "a" * 32, "question": "q?", "answer": "a", "citations": [secret]}
    refused = api.post("/v1/feedback", json=_verdict(answer, "up"), headers=keys["public"])
    assert refused.status_code == 404
    assert secret["chunk_id"] in refused.json()["detail"]
    assert api.post("/v1/feedback", json=_verdict(answer, "up")).status_code == 401
    assert DuckDBStore(data_dir / "lorehouse.duckdb").feedback().empty


def test_verdicts_become_candidates_that_pass_the_golden_check_once_filled_in(
    api: TestClient, keys: dict, data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    answer = api.post("/v1/ask", json={"question": LEAVE}, headers=keys["public"]).json()
    api.post("/v1/feedback", json=_verdict(answer, "up"), headers=keys["public"])
    candidates, _ = _export_feedback(data_dir, tmp_path, monkeypatch)

    [case] = [json.loads(line) for line in candidates.read_text().splitlines()]
    assert case["question"] == LEAVE and case["answer"] == answer["answer"]
    assert case["evidence"][0]["file"] == answer["citations"][0]["rel_path"]
    # Not a golden case until a reviewer copies the evidence from the file.
    assert check_golden(candidates, BUNDLED_SAMPLE_CORPUS)
    excerpt = "Primary caregivers: **20 weeks** at full pay."
    case["evidence"] = [{"file": "hr/parental-leave-faq.md", "excerpt": excerpt}]
    candidates.write_text(json.dumps(case) + "\n")
    assert check_golden(candidates, BUNDLED_SAMPLE_CORPUS) == []


def _unsourced(answer_id: str, comment: str | None = None) -> dict:
    """A verdict on an answer that cited nothing: what the quota and size tests send."""
    return {
        "answer_id": answer_id,
        "rating": "down",
        "comment": comment,
        "question": LEAVE,
        "answer": "Twelve weeks.",
        "citations": [],
    }


def test_a_key_past_its_verdict_quota_gets_429_while_another_key_still_succeeds(
    data_dir: Path, keys: dict
) -> None:
    settings = Settings(data_dir=data_dir, api_keys_file=keys["file"], api_feedback_per_key=3)
    with TestClient(create_app(settings)) as api:
        for n in range(3):
            sent = api.post("/v1/feedback", json=_unsourced(f"{n:032x}"), headers=keys["public"])
            assert sent.status_code == 201, sent.text
        refused = api.post("/v1/feedback", json=_unsourced("f" * 32), headers=keys["public"])
        other = api.post("/v1/feedback", json=_unsourced("e" * 32), headers=keys["security"])

    assert refused.status_code == 429
    # The three verdicts leave the hour-long window in about an hour.
    assert 3500 < int(refused.headers["Retry-After"]) <= 3600
    assert "3 verdicts" in refused.json()["detail"]
    assert other.status_code == 201, other.text
    callers = Counter(DuckDBStore(data_dir / "lorehouse.duckdb").feedback()["caller"])
    assert callers == {"reader": 3, "security-team": 1}


def test_verdicts_older_than_the_window_leave_the_quota(tmp_path: Path) -> None:
    store = DuckDBStore(tmp_path / "lorehouse.duckdb")
    quota = FeedbackQuota(verdicts=2, window=timedelta(hours=1))
    now = datetime.now(UTC)

    def verdict(caller: str, given_at: datetime) -> dict[str, object]:
        sent = _unsourced("a" * 32)
        del sent["citations"]
        return {
            **sent,
            "given_at": given_at,
            "caller": caller,
            "cited_chunk_ids": [],
            "cited_files": [],
        }

    assert store.add_feedback(verdict("reader", now - timedelta(minutes=90)), quota) is None
    assert store.add_feedback(verdict("reader", now - timedelta(minutes=50)), quota) is None
    # One of the two is outside the hour: room for one more.
    assert store.add_feedback(verdict("reader", now - timedelta(minutes=10)), quota) is None
    retry_at = store.add_feedback(verdict("reader", now), quota)
    # Taken again when the verdict of 50 minutes ago leaves the window.
    assert retry_at == now + timedelta(minutes=10)
    assert store.add_feedback(verdict("security-team", now), quota) is None
    assert len(store.feedback()) == 4


def test_an_oversized_comment_is_refused_naming_the_field(
    api: TestClient, keys: dict, data_dir: Path
) -> None:
    refused = api.post(
        "/v1/feedback", json=_unsourced("a" * 32, "x" * 1001), headers=keys["public"]
    )
    assert refused.status_code == 422
    [error] = refused.json()["detail"]
    assert error["loc"] == ["body", "comment"]
    assert error["msg"] == "String should have at most 1000 characters"
    blank = api.post("/v1/feedback", json=_unsourced("   "), headers=keys["public"])
    assert blank.status_code == 422
    assert blank.json()["detail"][0]["loc"] == ["body", "answer_id"]
    long_id = api.post("/v1/feedback", json=_unsourced("a" * 65), headers=keys["public"])
    assert long_id.json()["detail"][0]["msg"] == "String should have at most 64 characters"
    assert DuckDBStore(data_dir / "lorehouse.duckdb").feedback().empty


def test_exported_candidates_name_the_key_that_sent_each_verdict(
    api: TestClient, keys: dict, data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, answer_id in (("public", "1" * 32), ("security", "2" * 32)):
        sent = api.post("/v1/feedback", json=_unsourced(answer_id, "Twenty."), headers=keys[name])
        assert sent.status_code == 201, sent.text
    candidates, result = _export_feedback(data_dir, tmp_path, monkeypatch)

    exported = candidates.read_text()
    ids = [json.loads(line)["id"] for line in exported.splitlines()]
    assert ids == ["feedback-reader-111111111111", "feedback-security-team-222222222222"]
    assert "sent by" in result.output and "security-team" in result.output
    # The key's name, never the key.
    for name in ("public", "security"):
        secret = keys[name]["X-API-Key"]
        assert secret not in exported and secret not in result.output


def _export_feedback(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, Result]:
    """`lorehouse eval feedback --out` over `data_dir`: the candidates file and the run."""
    monkeypatch.setenv("LOREHOUSE_DATA_DIR", str(data_dir))
    monkeypatch.setenv("COLUMNS", "200")  # the sender column, unwrapped
    get_settings.cache_clear()
    candidates = tmp_path / "candidates.jsonl"
    try:
        result = CliRunner().invoke(cli, ["eval", "feedback", "--out", str(candidates)])
    finally:
        get_settings.cache_clear()
    assert result.exit_code == 0, result.output
    return candidates, result
