"""Scanned PDFs: left as `no_text_layer` by default, read table by table when OCR is enabled."""

from __future__ import annotations

from pathlib import Path

import pytest

from lorehouse.models import DocumentFailure, FailureReason, FileType, ParsedDocument
from lorehouse.parsing import ParseOptions, parser_version_of
from tests.conftest import DOCS_CORPUS, parse_path, parsed_markdown

pytestmark = pytest.mark.corpus

OCR = ParseOptions(ocr_languages="eng")
SCANS = DOCS_CORPUS / "pdf"


def test_scanned_table_is_left_alone_without_ocr() -> None:
    outcome = parse_path(SCANS / "single_table.pdf")
    assert isinstance(outcome, DocumentFailure)
    assert outcome.reason is FailureReason.NO_TEXT_LAYER
    assert "OCR" in outcome.detail


def test_scanned_table_rows_come_out_as_markdown_rows() -> None:
    parsed = parsed_markdown(SCANS / "single_table.pdf", OCR)
    lines = parsed.markdown.splitlines()
    header = "| Processing | total chunks | mean chunks per document (std) | tables mean (std) |"
    assert lines.count(header) == 1
    assert lines[lines.index(header) + 1] == "| --- | --- | --- | --- |"
    # The three "Base" rows share one ruled band in the scan; each must still be its own row.
    assert "| Base 256 | 32,051 | 400.64 (242.04) | N/A |" in lines
    assert "| Chipper | 20,843 | 260.57 (145.80) | 96.20 (57.53) |" in lines
    assert parsed.parser_version.endswith("+ocr-eng@300")
    assert "page 1 read by OCR (eng)" in parsed.warnings


def test_scanned_merged_header_cells_repeat_and_lone_digits_are_read() -> None:
    lines = parsed_markdown(SCANS / "table-multi-row-column-cells.pdf", OCR).markdown.splitlines()
    # "Results" spans two columns and the first four header cells span two rows.
    assert (
        "| Disability Category | Participants | Ballots Completed | Ballots Incomplete/ Terminated"
        " | Results | Results |"
    ) in lines
    assert (
        "| Disability Category | Participants | Ballots Completed | Ballots Incomplete/ Terminated"
        " | Accuracy | Time to complete |"
    ) in lines
    # Single-digit cells are what whole-page recognition drops; they must be there.
    assert "| Dexterity | 5 | 4 | 1 | 98.3%, n=4 | 1672.1 sec, n=4 |" in lines
    assert "| Mobility | 3 | 3 | 0 | 95.4%, n=3 | 1416 sec, n=3 |" in lines


def test_scanned_prose_is_read_as_paragraphs_without_invented_headings() -> None:
    markdown = parsed_markdown(SCANS / "edge-cases" / "loremipsum-flat.pdf", OCR).markdown
    assert markdown.startswith("Lorem ipsum dolor sit amet, consectetur adipiscing elit.")
    assert not any(line.startswith("#") for line in markdown.splitlines())


def test_turning_ocr_on_reparses_pdfs_only() -> None:
    assert parser_version_of(FileType.PDF, OCR) != parser_version_of(FileType.PDF, ParseOptions())
    assert parser_version_of(FileType.DOCX, OCR) == parser_version_of(FileType.DOCX, ParseOptions())


def test_missing_tesseract_is_a_clear_failure(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    outcome = parse_path(SCANS / "single_table.pdf", OCR)
    assert isinstance(outcome, DocumentFailure)
    assert outcome.reason is FailureReason.NO_TEXT_LAYER
    assert "tesseract command was not found" in outcome.detail


def test_text_pdfs_are_unchanged_by_ocr() -> None:
    path = DOCS_CORPUS / "pdf" / "2305.03393v1-pg9.pdf"
    plain = parsed_markdown(path)
    with_ocr = parsed_markdown(path, OCR)
    assert isinstance(with_ocr, ParsedDocument)
    assert with_ocr.markdown == plain.markdown
