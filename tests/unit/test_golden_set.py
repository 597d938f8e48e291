"""The handbook golden set stays valid against its corpus, and the checker catches bad cases."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from evals.check_golden import CASE_TYPES, check_golden, main
from evals.golden_set import load_golden
from lorehouse.settings import REPO_ROOT
from tests.conftest import SHARED_CORPUS

HANDBOOK = SHARED_CORPUS / "handbook-sourcegraph"
GOLDEN = REPO_ROOT / "evals" / "golden" / "handbook_dev.jsonl"


@pytest.mark.corpus
@pytest.mark.skipif(not HANDBOOK.is_dir(), reason=f"handbook corpus not found at {HANDBOOK}")
def test_handbook_golden_set_is_verbatim_and_covers_every_type() -> None:
    assert check_golden(GOLDEN, HANDBOOK) == []
    cases = load_golden(GOLDEN)
    assert len(cases) >= 40
    counts = Counter(case.type for case in cases)
    assert set(counts) == set(CASE_TYPES), counts


def _write_jsonl(path: Path, cases: list[dict]) -> Path:
    path.write_text("".join(json.dumps(c) + "\n" for c in cases), encoding="utf-8")
    return path


def _case(case_id: str, excerpt: str, case_type: str = "lookup") -> dict:
    return {
        "id": case_id,
        "question": "How many days of leave do I get?",
        "evidence": [{"file": "policy/leave.md", "excerpt": excerpt}],
        "answer": "Twenty days a year.",
        "type": case_type,
    }


@pytest.fixture
def tiny_corpus(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    (root / "policy").mkdir(parents=True)
    (root / "policy" / "leave.md").write_text(
        "# Leave\n\nEmployees receive **20 days** of paid leave per calendar year.\n",
        encoding="utf-8",
    )
    return root


def test_a_valid_tiny_set_has_no_problems(tmp_path: Path, tiny_corpus: Path) -> None:
    golden = _write_jsonl(
        tmp_path / "ok.jsonl",
        [_case("t-1", "Employees receive **20 days** of paid leave per calendar year.")],
    )
    assert check_golden(golden, tiny_corpus) == []
    assert main([str(golden), "--corpus-root", str(tiny_corpus)]) == 0


def test_a_non_verbatim_excerpt_and_a_duplicate_id_are_reported(
    tmp_path: Path, tiny_corpus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    verbatim = "Employees receive **20 days** of paid leave per calendar year."
    markup_dropped = "Employees receive 20 days of paid leave per calendar year."
    golden = _write_jsonl(
        tmp_path / "bad.jsonl",
        [_case("t-1", verbatim), _case("t-1", verbatim), _case("t-2", markup_dropped)],
    )
    problems = check_golden(golden, tiny_corpus)
    assert len(problems) == 2, problems
    assert "duplicate id" in problems[0] and ":2 (t-1)" in problems[0]
    assert "not verbatim in policy/leave.md" in problems[1] and ":3 (t-2)" in problems[1]
    assert main([str(golden), "--corpus-root", str(tiny_corpus)]) == 1
    assert "duplicate id" in capsys.readouterr().err


def test_structure_problems_are_reported(tmp_path: Path, tiny_corpus: Path) -> None:
    excerpt = "Employees receive **20 days** of paid leave per calendar year."
    unanswerable_with_evidence = _case("t-1", excerpt, "unanswerable")
    missing_file = _case("t-2", excerpt)
    (tiny_corpus.parent / "outside.md").write_text(excerpt, encoding="utf-8")
    missing_file["evidence"][0]["file"] = "../outside.md"  # exists, but outside the root
    unknown_type = {**_case("t-3", excerpt, "trivia"), "notes": "x"}
    golden = tmp_path / "mixed.jsonl"
    lines = [json.dumps(c) for c in (unanswerable_with_evidence, missing_file, unknown_type)]
    golden.write_text("\n".join([*lines, "{not json"]) + "\n", encoding="utf-8")
    problems = "\n".join(check_golden(golden, tiny_corpus))
    assert "unanswerable case must have no evidence" in problems
    assert "'../outside.md' is not a readable UTF-8 file" in problems
    assert "'trivia' is not one of" in problems
    assert "unexpected keys ['notes']" in problems
    assert "invalid JSON" in problems
