"""A PDF page as a picture with a chunk's text highlighted: what a reader checks a citation
against, rendered at request time with PyMuPDF (the PDF parser's own library)."""

from __future__ import annotations

import re

import pymupdf

#: Rendering scale: 1.5 is 108 dpi, legible in a side panel without megabyte images.
PAGE_ZOOM = 1.5
#: Phrases searched for on the page: long enough to be specific, short enough to survive
#: line breaks and hyphenation, which split longer ones.
_PHRASE_WORDS = 6
_MARKDOWN = re.compile(r"[*_`#>|]+|\[|\]\([^)]*\)")


def highlight_phrases(chunk_text: str) -> list[str]:
    """The chunk's text as short runs of words, with Markdown marks removed."""
    words = _MARKDOWN.sub(" ", chunk_text).split()
    return [
        " ".join(words[start : start + _PHRASE_WORDS])
        for start in range(0, len(words), _PHRASE_WORDS)
        if len(words[start : start + _PHRASE_WORDS]) >= 3
    ]


def render_page(pdf: bytes, page_number: int, chunk_text: str) -> tuple[bytes, int]:
    """(PNG of 1-based `page_number`, phrases highlighted on it); ValueError when the file has
    no such page or is not a PDF."""
    try:
        document = pymupdf.open(stream=pdf, filetype="pdf")
    except (pymupdf.FileDataError, RuntimeError) as error:
        raise ValueError(f"not a readable PDF: {error}") from error
    with document:
        if not 1 <= page_number <= document.page_count:
            raise ValueError(f"the file has no page {page_number}")
        page = document[page_number - 1]
        found = 0
        for phrase in highlight_phrases(chunk_text):
            quads = page.search_for(phrase, quads=True)
            if quads:
                page.add_highlight_annot(quads)
                found += 1
        picture = page.get_pixmap(matrix=pymupdf.Matrix(PAGE_ZOOM, PAGE_ZOOM), annots=True)
        return picture.tobytes("png"), found
