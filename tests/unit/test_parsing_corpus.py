"""Parsers on real public documents: tables, headings, pages, edge cases.

Each assertion is something a reader of the Markdown would notice: a header cell and a body
row of a table come out as one Markdown table row each, heading levels follow the document's
outline, and a sentence cites the page it is printed on.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lorehouse.models import DocumentFailure, FailureReason
from lorehouse.parsing.markdown_builder import page_of_offset
from tests.conftest import DOCS_CORPUS, parse_path, parsed_markdown

pytestmark = pytest.mark.corpus


def _lines(markdown: str) -> list[str]:
    return markdown.splitlines()


def _heading_levels(markdown: str) -> dict[str, int]:
    levels = {}
    for line in _lines(markdown):
        match = re.match(r"^(#{1,6}) (.+)$", line)
        if match:
            levels[match.group(2)] = len(match.group(1))
    return levels


# -- edge cases end where a user would expect ------------------------------------------------

EDGE_CASE_OUTCOMES = {
    "pdf/edge-cases/password.pdf": FailureReason.ENCRYPTED,
    "pdf/edge-cases/2206.01062_pg3.pdf": FailureReason.ENCRYPTED,
    "pdf/edge-cases/loremipsum-flat.pdf": FailureReason.NO_TEXT_LAYER,
    "pdf/edge-cases/MEDRPT-2024-PAT-3847_medical_report_scan.pdf": FailureReason.NO_TEXT_LAYER,
    "xlsx/edge-cases/password_protected.xlsx": FailureReason.ENCRYPTED,
    "xlsx/edge-cases/empty.xlsx": FailureReason.EMPTY,
    "docx/edge-cases/Strict.docx": FailureReason.UNSUPPORTED_TYPE,
    # Scans without a text layer: a table is visible but there is no text to extract.
    "pdf/single_table.pdf": FailureReason.NO_TEXT_LAYER,
    "pdf/table-multi-row-column-cells.pdf": FailureReason.NO_TEXT_LAYER,
}

EDGE_CASE_PARSED = {
    "pdf/edge-cases/copy-protected.pdf": "",  # AES-128, empty user password
    "pdf/edge-cases/failure-after-repair.pdf": "",
    "pdf/edge-cases/pdf-bad-color-space.pdf": "",
    "pdf/edge-cases/layout-parser-paper-with-empty-pages.pdf": "LayoutParser",
    "pdf/edge-cases/pdf-with-ocr-text.pdf": "",
    "pdf/edge-cases/rotated-page-90.pdf": "",
    "docx/edge-cases/grid_offset_error.docx": "",
    "docx/edge-cases/teams_chat.docx": "",
    "pptx/edge-cases/fake-power-point-malformed.pptx": "",
    "pptx/edge-cases/powerpoint_bad_text.pptx": "",
    "xlsx/edge-cases/xlsx_06_edge_cases_.xlsx": "",
    "html/edge-cases/fake-html-cp1252.html": "Der Preis betrug 15,50 €",
    "md/edge-cases/umlauts-non-utf8.md": "können",
}


@pytest.mark.parametrize(("rel_path", "reason"), sorted(EDGE_CASE_OUTCOMES.items()))
def test_unreadable_files_fail_with_a_countable_reason(
    rel_path: str, reason: FailureReason
) -> None:
    outcome = parse_path(DOCS_CORPUS / rel_path)
    assert isinstance(outcome, DocumentFailure), f"{rel_path} unexpectedly parsed"
    assert outcome.reason == reason, outcome.detail
    assert outcome.detail


@pytest.mark.parametrize(("rel_path", "expected_text"), sorted(EDGE_CASE_PARSED.items()))
def test_awkward_but_readable_files_parse(rel_path: str, expected_text: str) -> None:
    document = parsed_markdown(DOCS_CORPUS / rel_path)
    assert document.markdown.strip()
    assert expected_text in document.markdown


def test_encrypted_pdf_with_an_empty_password_yields_its_text() -> None:
    document = parsed_markdown(DOCS_CORPUS / "pdf/edge-cases/copy-protected.pdf")
    assert len(document.markdown) > 2000


# -- tables --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rel_path", "header_row", "body_row"),
    [
        (
            "docx/docx-tables.docx",
            "| Header Col 1 | Header Col 2 |",
            "| Lorem ipsum | A link example |",
        ),
        (
            # Vertically and horizontally merged cells repeat into every position they cover.
            "docx/word_tables.docx",
            "| Header 0.0 | Header 0.1 | Header 0.2 |",
            "| Cell 2.0 | Merged Cell 1.1 2.1 | Cell 2.2 |",
        ),
        (
            "docx/word_tables.docx",
            "| Header 0.0 | Header 0.1 | Header 0.2 |",
            "| Cell 1.0 | Merged Cell 1.1 1.2 | Merged Cell 1.1 1.2 |",
        ),
        (
            "pdf/2305.03393v1-pg9.pdf",
            "| # enc-layers | # dec-layers | Language | TEDs | TEDs | TEDs | mAP (0.75) | "
            "Inference time (secs) |",
            "| 6 | 6 | OTSL HTML | 0.965 0.969 | 0.934 0.927 | 0.955 0.955 | 0.88 0.857 | "
            "2.73 5.39 |",
        ),
        (
            "pdf/SPARSE-2024-INV-1234_borderless_table.pdf",
            "| Product Code | Location | Expected | Actual | Variance | Status |",
            "| SKU-9201 |  | 780 | 778 |  | OK |",
        ),
        (
            "html/example-10k-1p.html",
            "| Title of each class | Trading symbol | Name of exchange on which registered |",
            "| Common stock | GLXZ | OTCQB marketplace |",
        ),
        (
            # rowspan cells repeat down the rows they span
            "html/html_rich_table_cells.html",
            "| Name | Habitat | Comment |",
            "| Mallard | Ponds, lakes, rivers | Quack |",
        ),
        ("xlsx/test.xlsx", "| Alpha | Beta | Gamma | Delta |", "| 89 | 82 | 100 | 12 |"),
        (
            "xlsx/xlsx_05_table_with_title.xlsx",
            "| Year | Freshwater Ducks |",
            "| 2019 | 120 |",
        ),
        (
            # merged header cells over the two class groups
            "pptx/powerpoint_sample.pptx",
            "|  | Class1 | Class1 | Class1 | Class2 | Class2 | Class2 |",
            "| R1 | True | False |  | False | True | True |",
        ),
    ],
)
def test_table_rows_come_out_as_one_markdown_row_each(
    rel_path: str, header_row: str, body_row: str
) -> None:
    lines = _lines(parsed_markdown(DOCS_CORPUS / rel_path).markdown)
    assert header_row in lines
    assert body_row in lines
    header_at = lines.index(header_row)
    assert lines[header_at + 1].startswith("| --- |"), "the header row is the table's header"


def test_spreadsheet_sheets_become_sections_with_empty_cells_dropped() -> None:
    document = parsed_markdown(DOCS_CORPUS / "xlsx/test.xlsx")
    headings = _heading_levels(document.markdown)
    assert headings["Sheet1"] == 1
    assert [span.label for span in document.page_map] == [
        "Sheet1",
        "09060124-b5e7-4717-9d07-3c046eb",
    ]
    assert "|  |  |" not in document.markdown


def test_chart_data_is_kept_as_a_table() -> None:
    markdown = parsed_markdown(DOCS_CORPUS / "pptx/pptx_chart.pptx").markdown
    assert "| 2021 | 150 | 110 |" in _lines(markdown)


# -- headings ------------------------------------------------------------------------------


def test_numbered_pdf_outline_levels_become_heading_levels() -> None:
    levels = _heading_levels(parsed_markdown(DOCS_CORPUS / "pdf/redp5110_sampled.pdf").markdown)
    assert levels["1.1 Security fundamentals"] == 2
    assert levels["2.2 Separation of duties"] == 2
    assert levels["1.3.1 Existing row and column control"] == 3
    assert levels["3.6.6 Activating RCAC"] == 3


def test_docx_heading_styles_keep_their_levels_below_the_title() -> None:
    expected = (DOCS_CORPUS / "expected/docling/unit_test_headers.docx.md").read_text()
    produced = parsed_markdown(DOCS_CORPUS / "docx/unit_test_headers.docx").markdown
    assert _heading_levels(produced) == _heading_levels(expected)
    assert [line for line in _lines(produced) if line.startswith("#")] == [
        line for line in _lines(expected) if line.startswith("#")
    ]


def test_html_heading_levels_are_kept() -> None:
    levels = _heading_levels(parsed_markdown(DOCS_CORPUS / "html/wiki_duck.html").markdown)
    assert levels["Duck"] == 1
    assert levels["Etymology"] == 2


def test_pptx_slides_are_sections_titled_by_the_slide_title() -> None:
    document = parsed_markdown(DOCS_CORPUS / "pptx/powerpoint_sample.pptx")
    levels = _heading_levels(document.markdown)
    assert levels["Test Table Slide"] == 1
    assert levels["Second slide title"] == 1
    assert {span.page for span in document.page_map} == {1, 2, 3}


# -- pages, lists, page furniture ------------------------------------------------------------


@pytest.mark.parametrize(
    ("rel_path", "sentence", "page"),
    [
        ("pdf/multi_page.pdf", "Education: Word processors became a cornerstone of education", 4),
        ("pdf/multi_page.pdf", "The origins of word processing can be traced back", 1),
        (
            "pdf/redp5110_sampled.pdf",
            "QIBM_DB_SECADM also is responsible for administering RCAC",
            9,
        ),
    ],
)
def test_a_sentence_maps_to_the_page_it_is_printed_on(
    rel_path: str, sentence: str, page: int
) -> None:
    document = parsed_markdown(DOCS_CORPUS / rel_path)
    offset = document.markdown.find(sentence)
    assert offset >= 0, f"sentence not found in {rel_path}"
    assert page_of_offset(document.page_map, offset) == page


def test_pdf_bullets_become_list_items() -> None:
    markdown = parsed_markdown(DOCS_CORPUS / "pdf/list-item-example.pdf").markdown
    assert "- What are product types?" in _lines(markdown)


def test_docx_list_styles_keep_nesting_and_numbering(sample_corpus: Path) -> None:
    lines = _lines(parsed_markdown(sample_corpus / "handbook/travel-and-expenses.docx").markdown)
    assert "- Flights" in lines
    assert "   - Including changes, cancellations and seat upgrades paid by the company" in lines
    assert "2. Add a cost estimate using the limits in section 3 for the destination city." in lines


def test_html_scripts_and_navigation_are_not_text() -> None:
    markdown = parsed_markdown(DOCS_CORPUS / "html/example-with-scripts.html").markdown
    assert "function(" not in markdown and "<script" not in markdown
