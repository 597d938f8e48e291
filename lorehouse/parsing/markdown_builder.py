"""Builds Markdown block by block while recording which page each character came from."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from lorehouse.models import PageSpan
from lorehouse.parsing.tables import render_table

_WHITESPACE = re.compile(r"\s+")
_CONTROL_CHARS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u200b\ufeff]")


def clean_inline(text: str) -> str:
    """One line of reader-visible text: control characters gone, runs of whitespace folded."""
    return _WHITESPACE.sub(" ", _CONTROL_CHARS.sub("", text)).strip()


@dataclass
class _Block:
    text: str
    page: int
    label: str | None
    is_list_item: bool
    line_pages: list[int] | None = None


@dataclass
class MarkdownBuilder:
    """Collects headings, paragraphs, lists and tables in reading order.

    Every parser emits through this one builder so that all formats share the same Markdown
    dialect (ATX headings, `-`/`1.` lists indented by two spaces per level, GitHub tables) and
    the same page map construction.
    """

    blocks: list[_Block] = field(default_factory=list)

    def heading(self, level: int, text: str, page: int = 1, label: str | None = None) -> None:
        cleaned = clean_inline(text)
        if cleaned:
            level = min(max(level, 1), 6)
            self._add(f"{'#' * level} {cleaned}", page, label)

    def paragraph(self, text: str, page: int = 1, label: str | None = None) -> None:
        cleaned = clean_inline(text)
        if cleaned:
            self._add(cleaned, page, label)

    def list_item(
        self,
        text: str,
        depth: int = 0,
        ordered: bool = False,
        number: int = 1,
        page: int = 1,
        label: str | None = None,
    ) -> None:
        cleaned = clean_inline(text)
        if not cleaned:
            return
        marker = f"{number}." if ordered else "-"
        # Three spaces per level nest under both "- " and "1. " parents in CommonMark.
        indent = "   " * depth
        self._add(f"{indent}{marker} {cleaned}", page, label, is_list_item=True)

    def table(
        self,
        rows: list[list[str | None]],
        page: int = 1,
        label: str | None = None,
        row_pages: list[int] | None = None,
        header_rows: int = 1,
        column_labels: list[str] | None = None,
    ) -> None:
        """A table; `row_pages` gives each row's page when the table runs across pages, and
        `column_labels` the names of a headerless table's value columns, found outside it."""
        rendered = render_table(
            rows, header_rows=header_rows, row_pages=row_pages, column_labels=column_labels
        )
        if rendered is None:
            return
        text, line_pages = rendered
        block = _Block(text=text, page=page, label=label, is_list_item=False)
        if row_pages is not None:
            block.page = line_pages[0]
            if len(set(line_pages)) > 1:
                block.line_pages = line_pages
        self.blocks.append(block)

    def code(self, text: str, language: str = "", page: int = 1, label: str | None = None) -> None:
        body = text.strip("\n")
        if body.strip():
            fence = "````" if "```" in body else "```"
            self._add(f"{fence}{language}\n{body}\n{fence}", page, label)

    def raw(self, markdown: str, page: int = 1, label: str | None = None) -> None:
        """Already-formed Markdown (e.g. a Markdown source file) kept as it is."""
        if markdown.strip():
            self._add(markdown.strip("\n"), page, label)

    def build(self) -> tuple[str, list[PageSpan]]:
        """The document's Markdown and a page map covering every character of it."""
        parts: list[str] = []
        spans: list[PageSpan] = []
        offset = 0
        for index, block in enumerate(self.blocks):
            if index:
                previous = self.blocks[index - 1]
                separator = "\n" if previous.is_list_item and block.is_list_item else "\n\n"
                parts.append(separator)
                offset += len(separator)
            parts.append(block.text)
            pieces = [(block.text, block.page)]
            if block.line_pages:
                lines = block.text.split("\n")
                pieces = [
                    (line + ("\n" if i < len(lines) - 1 else ""), pg)
                    for i, (line, pg) in enumerate(zip(lines, block.line_pages, strict=True))
                ]
            for text, page in pieces:
                start = offset
                offset += len(text)
                if spans and spans[-1].page == page and spans[-1].label == block.label:
                    spans[-1].end = offset
                else:
                    if spans:
                        spans[-1].end = start  # a separator belongs to the page before it
                    spans.append(PageSpan(page=page, start=start, end=offset, label=block.label))
        markdown = "".join(parts)
        if markdown:
            markdown += "\n"
            spans[-1].end = len(markdown)
        return markdown, spans

    def _add(self, text: str, page: int, label: str | None, is_list_item: bool = False) -> None:
        self.blocks.append(_Block(text=text, page=page, label=label, is_list_item=is_list_item))


def page_of_offset(page_map: list[PageSpan], offset: int) -> int | None:
    """The page holding a character offset, for citing where a passage came from."""
    for span in page_map:
        if span.start <= offset < span.end:
            return span.page
    return None
