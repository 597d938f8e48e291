"""The PDF parser on PDFs drawn here: what a reader of a filing would otherwise trip over."""

from __future__ import annotations

import pymupdf

from lorehouse.parsing.pdf import parse_pdf
from lorehouse.parsing.registry import ParseOptions


def _markdown(document: pymupdf.Document) -> str:
    markdown, _ = parse_pdf(document.tobytes(), "drawn.pdf", ParseOptions()).builder.build()
    return markdown


def _pages_with_text(count: int, header_on: set[int]) -> pymupdf.Document:
    """`count` pages, each a paragraph and its page number set right below it (mid-page, as
    a filing's short pages print it), the first `header_on` pages topped by a link line."""
    document = pymupdf.open()
    for index in range(count):
        page = document.new_page()
        if index in header_on:
            page.insert_text((72, 20), "Table of Contents", fontsize=9)
        page.insert_text((72, 120), f"Paragraph {index} states fact {index * 7}.", fontsize=11)
        page.insert_text((300, 300), str(index + 3), fontsize=9)  # printed numbers start at 3
    return document


def test_page_numbers_printed_below_the_text_are_not_text() -> None:
    markdown = _markdown(_pages_with_text(6, header_on=set()))
    assert "Paragraph 5 states fact 35." in markdown
    assert not any(line.strip().isdigit() for line in markdown.splitlines())


def test_a_running_header_on_part_of_a_long_document_is_furniture() -> None:
    # 40 pages, the link line on 12 of them: fewer than half, as in a 10-K with exhibits.
    markdown = _markdown(_pages_with_text(40, header_on=set(range(12))))
    assert "Table of Contents" not in markdown
    assert "Paragraph 11 states fact 77." in markdown


def test_a_pdf_statement_reads_its_years_above_the_grid_as_column_names() -> None:
    document = pymupdf.open()
    page = document.new_page()
    page.insert_text((72, 72), "Consolidated Statement of Income (in millions)", fontsize=11)
    page.insert_text((72, 84), "Years ended December 31, 2022 2021", fontsize=10)
    rows = [("Net Revenue", "$86,392", "$79,474"), ("Cost of sales", "40,576", "37,075")]
    columns, top, height = (72, 300, 400, 500), 110, 20
    for number, row in enumerate(rows):
        y = top + number * height
        for x, cell in zip(columns, row, strict=False):
            page.insert_text((x + 4, y + 14), cell, fontsize=10)
    for number in range(len(rows) + 1):
        page.draw_line((columns[0], top + number * height), (columns[-1], top + number * height))
    for x in columns:
        page.draw_line((x, top), (x, top + len(rows) * height))
    markdown = _markdown(document)
    assert "|  | 2022 | 2021 |" in markdown
    assert "| Net Revenue | $86,392 | $79,474 |" in markdown
    assert "Years ended December 31,\n" in markdown  # the caption stays, without the years
