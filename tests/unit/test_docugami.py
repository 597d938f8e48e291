"""Docugami's SEC 10-Q questions as golden cases whose evidence is whole filings."""

from __future__ import annotations

from pathlib import Path

import pytest

from evals.golden_files import load_golden
from evals.golden_set import GoldenSetError
from evals.key_facts import score_key_facts
from evals.metrics import Evidence, RetrievedChunk, excerpt_found
from tests.conftest import SHARED_CORPUS

QNA = SHARED_CORPUS / "docugami-sec-10q" / "qna_data.csv"
HEADER = "\ufeffQuestion,Source Docs,Question Type,Source Chunk Type,Answer\n"


@pytest.mark.corpus
def test_docugami_questions_become_cases_with_their_filings_as_evidence() -> None:
    cases = load_golden(QNA)
    assert len(cases) == 195
    first = cases[0]
    assert first.question == "How has Apple's total net sales changed over time?"
    assert first.type == "multi_doc"
    assert [item.file for item in first.evidence] == [
        "2022 Q3 AAPL.pdf",
        "2023 Q1 AAPL.pdf",
        "2023 Q2 AAPL.pdf",
        "2023 Q3 AAPL.pdf",
    ]
    assert "SOURCE" not in first.answer and "AAPL.pdf" not in first.answer
    assert "$82,959 million" in first.answer
    assert {case.type for case in cases} == {"multi_doc", "table", "lookup"}


def test_a_source_note_is_not_a_fact_the_answer_must_state(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "2023 Q1 AAPL.pdf").write_bytes(b"%PDF-1.4")
    csv = tmp_path / "qna.csv"
    csv.write_text(
        HEADER + '"What were net sales?",*2023 Q1 AAPL*,Single-Doc Single-Chunk RAG,Table,'
        '"Net sales were $117,154 million (SOURCE: 2023 Q1 AAPL.pdf).\n\nSOURCE(S): 2023 Q1 '
        'AAPL.pdf"\n',
        encoding="utf-8",
    )
    (case,) = load_golden(csv)
    assert case.type == "table" and case.retrievable
    assert score_key_facts(case.answer, "Net sales were $117,154 million.").share == 1.0


def test_a_filing_is_found_by_any_of_its_passages() -> None:
    evidence = Evidence("2023 Q1 AAPL.pdf", "")
    elsewhere = RetrievedChunk("c1", "2023 Q1 MSFT.pdf", 0, "Net revenue rose.")
    found = RetrievedChunk("c2", "2023 Q1 AAPL.pdf", 7, "Net sales were $117,154 million.")
    assert not excerpt_found(evidence, [elsewhere])
    assert excerpt_found(evidence, [elsewhere, found])


def test_a_pattern_matching_no_filing_is_named(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "2023 Q1 AAPL.pdf").write_bytes(b"%PDF-1.4")
    csv = tmp_path / "qna.csv"
    csv.write_text(HEADER + '"Q?",*TSLA*,Multi-Doc RAG,Text,"A."\n', encoding="utf-8")
    with pytest.raises(GoldenSetError, match=r"qna\.csv:2: not a Docugami case: .*TSLA"):
        load_golden(csv)
