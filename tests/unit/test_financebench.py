"""FinanceBench questions as golden cases, and their evidence found in a parsed filing."""

from __future__ import annotations

from pathlib import Path

import pytest

from evals.golden_files import load_golden
from evals.golden_set import GoldenSetError
from evals.metrics import Evidence, RetrievedChunk, excerpt_found
from lorehouse.chunking import Chunker
from lorehouse.embedding.minilm import default_token_counter
from tests.conftest import SHARED_CORPUS, parsed_markdown

FINANCEBENCH = SHARED_CORPUS / "financebench"
SUBSET = FINANCEBENCH / "financebench_open_source.local_pdfs_subset.jsonl"
ULTA = "ULTABEAUTY_2023Q4_EARNINGS.pdf"


@pytest.mark.corpus
def test_financebench_lines_become_golden_cases_with_pages() -> None:
    cases = load_golden(SUBSET)
    assert len(cases) == 27
    first = cases[0]
    assert first.id == "financebench_id_00799"
    assert first.answer.startswith("The quick ratio has slightly improved")
    (evidence,) = first.evidence
    assert evidence.file == "AMCOR_2023_10K.pdf"
    assert evidence.page == 52  # FinanceBench counts pages from 0
    assert evidence.excerpt.startswith("Amcor plc and Subsidiaries\nConsolidated Balance Sheets")
    assert {c.type for c in cases} == {"lookup", "table"}  # metric questions read tables
    assert len(load_golden(FINANCEBENCH / "financebench_open_source.jsonl")) == 150


def test_a_broken_financebench_line_is_named(tmp_path: Path) -> None:
    path = tmp_path / "fb.jsonl"
    path.write_text('{"financebench_id": "x", "question": "Q?"}\n')
    with pytest.raises(GoldenSetError, match=r"fb\.jsonl:1: not a FinanceBench case"):
        load_golden(path)


@pytest.mark.corpus
def test_financebench_evidence_is_found_in_the_parsed_filing_despite_pdf_line_breaks() -> None:
    document = parsed_markdown(FINANCEBENCH / "pdfs" / ULTA)
    chunks = Chunker(256, default_token_counter().count).chunk(document)
    retrieved = [
        RetrievedChunk(chunk.chunk_id, f"pdfs/{ULTA}", chunk.position, chunk.text_chat)
        for chunk in chunks
    ]
    cases = [c for c in load_golden(SUBSET) if c.evidence[0].file == ULTA]
    assert len(cases) == 4
    for case in cases:
        for evidence in case.evidence_items():
            assert "\n" in evidence.excerpt  # raw extraction, line breaks and all
            assert excerpt_found(evidence, retrieved), case.id
    # the same text credited to another filing does not count
    other = Evidence("BOEING_2022_10K.pdf", cases[0].evidence[0].excerpt)
    assert not excerpt_found(other, retrieved)
    # and another filing's evidence is not in this one
    boeing = next(c for c in load_golden(SUBSET) if c.evidence[0].file.startswith("BOEING"))
    stranger = Evidence(ULTA, boeing.evidence[0].excerpt)
    assert not excerpt_found(stranger, retrieved)
