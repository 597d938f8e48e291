"""Thumbs up and down on answers: stored with what the answer said and cited, refused for
chunks the caller may not see, and exported as golden-set candidates a reviewer completes."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from api.main import create_app
from cli.main import app as cli
from evals.check_golden import check_golden
from lorehouse.api_keys import add_key
from lorehouse.settings import BUNDLED_SAMPLE_CORPUS, Settings, get_settings
from lorehouse.stores.duckdb_store import DuckDBStore

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
    monkeypatch.setenv("LOREHOUSE_DATA_DIR", str(data_dir))
    get_settings.cache_clear()
    candidates = tmp_path / "candidates.jsonl"
    try:
        result = CliRunner().invoke(cli, ["eval", "feedback", "--out", str(candidates)])
    finally:
        get_settings.cache_clear()
    assert result.exit_code == 0, result.output

    [case] = [json.loads(line) for line in candidates.read_text().splitlines()]
    assert case["question"] == LEAVE and case["answer"] == answer["answer"]
    assert case["evidence"][0]["file"] == answer["citations"][0]["rel_path"]
    # Not a golden case until a reviewer copies the evidence from the file.
    assert check_golden(candidates, BUNDLED_SAMPLE_CORPUS)
    excerpt = "Primary caregivers: **20 weeks** at full pay."
    case["evidence"] = [{"file": "hr/parental-leave-faq.md", "excerpt": excerpt}]
    candidates.write_text(json.dumps(case) + "\n")
    assert check_golden(candidates, BUNDLED_SAMPLE_CORPUS) == []
