"""Chunk text as a reader sees it outside a Markdown renderer: plain words, without the
breadcrumb the chunk text starts with, cut at a word with a visible mark."""

from __future__ import annotations

import re
import textwrap

from lorehouse.chunking import chunk_body

_MARKDOWN = re.compile(r"[*_`#>|]+|\[|\]\([^)]*\)")
#: Formats whose chunks have real page (or slide, or sheet) numbers.
PAGED_SUFFIXES = (".pdf", ".pptx", ".xlsx")


def plain_text(markdown: str) -> str:
    """The words of a Markdown text, emphasis, code marks, headings and link targets removed."""
    return " ".join(_MARKDOWN.sub(" ", markdown).split())


def passage(text_chat: str, heading_path: list[str], width: int) -> str:
    """A chunk's own words (its breadcrumb line left out), at most `width` characters."""
    body = plain_text(chunk_body(text_chat, heading_path))
    return textwrap.shorten(body, width, placeholder=" …")


def cut_right(text: str, width: int) -> str:
    """`text`, or its first `width` characters ending in "..." when longer."""
    return text if len(text) <= width else text[: width - 3].rstrip() + "..."


def pages_label(rel_path: str, page_start: int | None, page_end: int | None) -> str:
    """ "p. 5" or "pp. 3-4" for paged formats; nothing for the others (one page each)."""
    if page_start is None or not rel_path.lower().endswith(PAGED_SUFFIXES):
        return ""
    if page_end is not None and page_end != page_start:
        return f"pp. {page_start}-{page_end}"
    return f"p. {page_start}"
