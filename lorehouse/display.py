"""Text as a terminal shows it: chunk text as plain words, without the breadcrumb the chunk
text starts with, cut at a word with a visible mark; and anything that came from a document
or a caller made safe to print."""

from __future__ import annotations

import re
import textwrap

from rich.markup import escape

from lorehouse.text import chunk_body

#: C0 and C1 control characters and DEL, except tab and newline: the bytes of terminal escape
#: sequences, carriage returns that overwrite a line, bells.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """`text` with every control character but tab and newline written out (ESC as `\\x1b`).

    A document's path, title or words, a reader's comment or a model's answer may hold escape
    sequences that would retitle the window, clear the screen or rewrite what was printed
    before; written out, the operator sees them instead of obeying them.
    """
    return _CONTROL.sub(lambda found: f"\\x{ord(found.group()):02x}", text)


def shown(value: object) -> str:
    """`value` as a string to put in Rich markup or a table cell, printed as it is.

    Control characters are written out (`printable`) and square brackets escaped, so a
    comment saying `[/red]` or a file named `notes [/x].md` is shown, not read as markup
    (where a stray closing tag is an error that ends the command).
    """
    return escape(printable(str(value)))


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
