"""The golden sets stay valid against their corpora, and the checker catches bad cases."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from evals.check_golden import CASE_TYPES, check_golden, main
from evals.golden_files import load_golden
from lorehouse.settings import REPO_ROOT
from tests.conftest import DOCS_CORPUS, SHARED_CORPUS

HANDBOOK = SHARED_CORPUS / "handbook-sourcegraph"
GOLDEN = REPO_ROOT / "evals" / "golden" / "handbook_dev.jsonl"
#: Written from facts the dev set does not ask about; never used to choose a setting.
TEST_GOLDEN = REPO_ROOT / "evals" / "golden" / "handbook_test.jsonl"
#: A one-page PDF of the public corpus (parses in about a second).
MEMO_PDF = "pdf/fake-memo.pdf"
MEMO_SENTENCE = "A total of 3 trucks were used for 15 hours."


@pytest.mark.corpus
@pytest.mark.skipif(not HANDBOOK.is_dir(), reason=f"handbook corpus not found at {HANDBOOK}")
@pytest.mark.parametrize("golden", [GOLDEN, TEST_GOLDEN], ids=["dev", "test"])
def test_handbook_golden_set_is_verbatim_and_covers_every_type(golden: Path) -> None:
    assert check_golden(golden, HANDBOOK) == []
    cases = load_golden(golden)
    assert len(cases) >= 40
    counts = Counter(case.type for case in cases)
    assert set(counts) == set(CASE_TYPES), counts


GERMAN_CORPUS = Path("/usr/share")
GERMAN_GOLDEN = REPO_ROOT / "evals" / "golden" / "german_dev.jsonl"
GERMAN_BOOK = GERMAN_CORPUS / "developers-reference" / "de" / "developers-reference.pdf"


@pytest.mark.corpus
@pytest.mark.skipif(not GERMAN_BOOK.is_file(), reason="Debian's German manuals not installed")
def test_german_golden_set_is_verbatim_with_questions_in_both_languages() -> None:
    assert check_golden(GERMAN_GOLDEN, GERMAN_CORPUS) == []
    cases = load_golden(GERMAN_GOLDEN)
    by_language = Counter(case.language for case in cases)
    assert by_language["de"] >= 40 and by_language["en"] >= 40, by_language
    assert {case.type for case in cases} >= {"lookup", "paraphrase", "multi_doc", "unanswerable"}


def test_handbook_test_set_shares_no_case_with_the_dev_set() -> None:
    """A test question that is also a dev question would report what was tuned as held out."""
    dev, test = load_golden(GOLDEN), load_golden(TEST_GOLDEN)
    assert not {c.id for c in dev} & {c.id for c in test}
    assert not {c.question for c in dev} & {c.question for c in test}
    dev_excerpts = {e.excerpt for c in dev for e in c.evidence}
    shared = [c.id for c in test if any(e.excerpt in dev_excerpts for e in c.evidence)]
    assert shared == [], f"test cases citing a dev excerpt: {shared}"


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
    assert "'../outside.md' is not a readable file" in problems
    assert "'trivia' is not one of" in problems
    assert "unexpected keys ['notes']" in problems
    assert "invalid JSON" in problems


def _pdf_case(case_id: str, excerpt: str, **extra: object) -> dict:
    return {
        "id": case_id,
        "question": "How many trucks were used?",
        "evidence": [{"file": MEMO_PDF, "excerpt": excerpt, **extra}],
        "answer": "Three.",
        "type": "lookup",
    }


@pytest.mark.corpus
def test_a_binary_file_is_checked_against_its_parsed_markdown(tmp_path: Path) -> None:
    """A PDF is not read as text: its excerpt must be in Lorehouse's parse of it, on its page."""
    golden = _write_jsonl(
        tmp_path / "pdf.jsonl",
        [
            _pdf_case("p-1", MEMO_SENTENCE, page=1),
            _pdf_case("p-2", "A total of 4 trucks were used for 15 hours."),
            _pdf_case("p-3", MEMO_SENTENCE, page=2),
            _pdf_case("p-4", MEMO_SENTENCE, page=0),
        ],
    )
    problems = check_golden(golden, DOCS_CORPUS)
    assert len(problems) == 3, problems
    assert f"not verbatim in {MEMO_PDF} (parsed Markdown)" in problems[0]
    assert ":2 (p-2)" in problems[0]
    assert "not on page 2" in problems[1] and "found on page 1" in problems[1]
    assert ":4 (p-4)" in problems[2] and "`page` must be a positive integer" in problems[2]


def test_an_html_excerpt_may_be_quoted_from_the_parsed_page(
    tmp_path: Path, tiny_corpus: Path
) -> None:
    """Text split by inline tags is accepted as the reader sees it, i.e. as Lorehouse parses it."""
    (tiny_corpus / "policy" / "leave.html").write_text(
        '<html><body><p>Employees receive <a href="/days">20 days</a> of paid leave per '
        "calendar year.</p></body></html>",
        encoding="utf-8",
    )
    case = _case("t-1", "Employees receive 20 days of paid leave per calendar year.")
    case["evidence"][0]["file"] = "policy/leave.html"
    wrong = _case("t-2", "Employees receive 25 days of paid leave per calendar year.")
    wrong["evidence"][0]["file"] = "policy/leave.html"
    problems = check_golden(_write_jsonl(tmp_path / "html.jsonl", [case, wrong]), tiny_corpus)
    assert len(problems) == 1, problems
    assert ":2 (t-2)" in problems[0] and "neither raw nor parsed" in problems[0]
