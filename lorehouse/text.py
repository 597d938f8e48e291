"""How Lorehouse reads Markdown text: plain words, sentences, a chunk's body without its
breadcrumb, and whether a table row is data. Chunking, parsing and answering all read text
this way, so a sentence an answer marks is the sentence the chunker counted."""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from urllib.parse import urlparse

from segtok.segmenter import split_multi

BREADCRUMB_SEPARATOR = " > "

_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]+)\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_AUTOLINK = re.compile(r"<(https?://[^>\s]+)>")
_BARE_URL = re.compile(r"(?<![(\w])https?://[^\s)<>|]+")
# Underscores mark emphasis only at a word's edge, as in CommonMark: inside a word they belong
# to it ("QIBM_DB_SECADM", "cite_note", "my_file.py"), which read "QIBMDBSECADM" before.
_EMPHASIS = re.compile(
    r"(?<!\\)(\*\*|\*|~~)(?=\S)(.+?)(?<=\S)(?<!\\)\1"
    r"|(?<![\w\\])(__|_)(?=\S)(.+?)(?<=\S)\3(?!\w)"
)
# A backslash escape reads as its character, as a Markdown renderer shows it: exports write
# "QIBM\_DB\_SECADM" and "\*USE" for what the page says.
_ESCAPED = re.compile(r"\\([!-/:-@\[-`{-~])")
_INLINE_CODE = re.compile(r"`+([^`]+)`+")
_HEADING = re.compile(r"(?m)^#{1,6}\s+")
_SEPARATOR_ROW = re.compile(r"^\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")
_FENCE = re.compile(r"(?m)^(```|~~~).*$\n?")
_LIST_MARKER = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])\s+")
#: A fragment shorter than this ("See below.", "Renewals") says nothing on its own.
MIN_SENTENCE_WORDS = 3
#: A line that starts a block of its own (a blank line, heading, table row, list item, fence,
#: HTML, callout) rather than continuing the paragraph above it.
_BLOCK_START = re.compile(rf"{_LIST_MARKER.pattern}|^\s*(?:$|#|\||```|~~~|<|\[!)")
_QUOTE_MARKER = re.compile(r"^\s*>\s?")


def chunk_body(text_chat: str, heading_path: Sequence[str]) -> str:
    """A chunk's own Markdown: its `text_chat` without the breadcrumb line put before it.

    A chunk before its document's first heading (most PDF pages, text files) has no
    breadcrumb, so its first line is its own text and must be kept: cutting the first line
    unconditionally lost the opening paragraph of many of the passages extractive answers
    read on the docs dev set ("We have 36 full-time employees, ..."). A breadcrumb shortened
    to its nearest headings still counts as one.
    """
    first, separator, rest = text_chat.partition("\n\n")
    if separator and heading_path:
        path = [heading.strip() for heading in heading_path]
        breadcrumbs = {BREADCRUMB_SEPARATOR.join(path[keep:]) for keep in range(len(path))}
        if first.strip() in breadcrumbs:
            return rest
    return text_chat


def unwrap_soft_breaks(markdown: str) -> str:
    """Markdown with each paragraph on one line: a line break inside a paragraph is a space.

    Handbooks are often hard-wrapped at 80 columns, and a sentence split line by line comes
    out as fragments ("products, please reach out to security@... and we will assess
    whether"). CommonMark reads such a break as a space; so does this, inside block quotes
    too, while list items, table rows, headings and blank lines still end where they did.
    """
    lines: list[str] = []
    continues = False  # the last line is paragraph text the next line may continue
    last_quoted = False
    for raw in markdown.splitlines():
        quoted = bool(_QUOTE_MARKER.match(raw))
        line = _QUOTE_MARKER.sub("", raw) if quoted else raw
        if continues and quoted == last_quoted and not _BLOCK_START.match(line):
            lines[-1] = f"{lines[-1].rstrip()} {line.strip()}"
        else:
            lines.append(raw)
        continues = bool(line.strip()) and not line.lstrip().startswith(("#", "|", "```", "~~~"))
        last_quoted = quoted
    return "\n".join(lines)


def sentences(plain: str) -> list[str]:
    """The sentences of plain text, line by line, list markers dropped.

    Lines are split separately because a list item or a table row ends where its line does,
    whether or not it ends with a full stop; fragments under MIN_SENTENCE_WORDS words are left
    out.
    """
    found: list[str] = []
    for line in plain.splitlines():
        line = _LIST_MARKER.sub("", line).strip()
        found += [s.strip() for s in split_multi(line) if len(s.split()) >= MIN_SENTENCE_WORDS]
    return found


def plain_text(markdown: str) -> str:
    """Markdown without its styling, for embedding: the words a reader sees, URLs as hosts.

    Long URLs are mostly noise tokens to an embedding model; the host keeps what carries
    meaning ("see docs.python.org").
    """
    text = _FENCE.sub("", markdown)
    text = _IMAGE.sub(r"\1", text)
    text = _LINK.sub(lambda m: f"{m.group(1)} ({_host(m.group(2))})", text)
    text = _AUTOLINK.sub(lambda m: _host(m.group(1)), text)
    text = _BARE_URL.sub(lambda m: _host(m.group(0)), text)
    text = _INLINE_CODE.sub(r"\1", text)
    for _ in range(2):  # nested emphasis (***bold italic***)
        text = _EMPHASIS.sub(lambda m: m.group(2) or m.group(4), text)
    text = _HEADING.sub("", text)
    text = _ESCAPED.sub(r"\1", text)
    # Entities read as their characters: "AT&amp;T" is AT&T, a row of "&nbsp;" is blank.
    text = html.unescape(text).replace("\u00a0", " ")
    lines = [plain_table_line(line) for line in text.splitlines()]
    return "\n".join(line for line in lines if line.strip()).strip()


def plain_inline(text: str) -> str:
    return " ".join(plain_text(text).split())


def plain_table_line(line: str) -> str:
    stripped = line.strip()
    if not stripped.startswith("|"):
        return line
    if _SEPARATOR_ROW.match(stripped):
        return ""
    return " | ".join(table_cells(stripped))


def table_cells(row: str) -> list[str]:
    """The cells of one GitHub table row (escaped pipes stay inside their cell)."""
    body = row.strip()
    body = body[1:] if body.startswith("|") else body
    body = body[:-1] if body.endswith("|") and not body.endswith("\\|") else body
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", body)]


def _host(url: str) -> str:
    host = urlparse(url).netloc
    return host.removeprefix("www.") or url


#: A cell holding an amount as a statement prints it: a sign, separator, decimal point,
#: parenthesis or percent beside its digits ("$86,392", "(3,321)", "6.45", "12%"); a year or
#: a plain count ("2022", "3") may name a column.
_AMOUNT = re.compile(
    r"^[$€£¥]?\(?[$€£¥]?\d{1,3}(?:,\d{3})+(?:\.\d+)?\)?%?$|^[$€£¥(]?\d*\.\d+\)?%?$"
    r"|^(?:[$€£¥]\d+|\(\d+\)|\d+%)$"
)


def is_data_row(cells: list[str]) -> bool:
    """Whether a table's first row is data (a label and amounts), not column names.

    A financial statement's years often sit above its grid, printed as a line of their own,
    so the grid's first row is already "Net Revenue | $86,392 | $79,474".
    """
    values = [cell for cell in cells[1:] if cell.strip("—–-")]  # a dash stands for nil
    return bool(values) and all(_AMOUNT.match(cell) for cell in values)
