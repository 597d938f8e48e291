"""Search hits and chunks as a person reads them in a terminal.

A hit is a block: one line saying where it is (rank, title, section, page, short id), then
its passage below, wrapped to the terminal's width. A long chunk is shown around the lines
that match the query best, not only from its start, so the part that made it a hit is on
screen; what is left out is marked with "…". Markdown tables are drawn as tables, under
their header.

Everything a document supplied goes into `Text` objects as plain text after `printable`, so
it is never read as Rich markup and never obeyed as a terminal control.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rich import box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from lorehouse.display import cut_right, pages_label, printable
from lorehouse.text import chunk_body, is_data_row, plain_text, table_cells, unwrap_soft_breaks

if TYPE_CHECKING:
    from lorehouse.search.hits import SearchHit

#: Words of a hit's passage shown by default: about five lines at 100 columns.
PASSAGE_WORDS = 60
#: A paragraph longer than this many words is shown sentence by sentence around its match.
SPLIT_PARAGRAPH_WORDS = 30
#: Columns a passage is indented under its hit's line.
INDENT = 4
ELLIPSIS = "…"
MATCH_STYLE = "bold"

_WORD = re.compile(r"\w+")
_TABLE_SEPARATOR = re.compile(r"^\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")
_HEADING = re.compile(r"^#{1,6}\s+")
_NUMBER = re.compile(r"^[-+(]?[$€£¥]?[\d.,]+%?\)?$")
#: A sentence ends at ., ! or ? before a space and a capital, digit or opening mark.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[A-Z0-9])")


@dataclass
class _Unit:
    """The smallest piece a passage is cut into: a line, a sentence of a long paragraph, or
    one row of a table."""

    text: str
    line: int  # which line (or table) of the body it belongs to
    words: int
    cells: list[str] | None = None  # a table row's cells


@dataclass
class _Line:
    """A line of the body: text (a paragraph, list item or heading) or a whole table."""

    indent: int = 0
    heading: bool = False
    header: list[str] | None = None  # a table's column names, when it has them
    units: list[int] = field(default_factory=list)


class Matcher:
    """Which words of a text are the query's, compared as keyword search compares them
    (lowercase, accents folded, stemmed), the question's own words ("how", "my") left out."""

    def __init__(self, query: str) -> None:
        from lorehouse.search.bm25 import Analyzer

        self._analyzer = Analyzer()
        terms = self._analyzer.terms(query)
        self.terms = frozenset(terms) - self._analyzer.question_terms or frozenset(terms)
        #: Terms of the words the query names things with: capitalised after its first word,
        #: or holding a digit.
        named = [
            word.group()
            for index, word in enumerate(_WORD.finditer(query))
            if any(c.isdigit() for c in word.group()) or (index and word.group()[0].isupper())
        ]
        self.names = frozenset(t for w in named for t in self._analyzer.terms(w)) & self.terms

    def score(self, text: str) -> tuple[int, int, int]:
        """(the query's names in `text`, distinct query terms, their occurrences): a line
        matches better the more of the query it holds, and the things the question names
        ("Lisbon", "2027", "SGD") count first, so a table's Lisbon row outranks a row that
        repeats "limit" twice."""
        found = [term for term in self._analyzer.terms(text) if term in self.terms]
        distinct = set(found)
        return len(distinct & self.names), len(distinct), len(found)

    def highlight(self, text: Text) -> Text:
        """`text` with the query's words in bold."""
        for word in _WORD.finditer(text.plain):
            if set(self._analyzer.terms(word.group())) & self.terms:
                text.stylize(MATCH_STYLE, word.start(), word.end())
        return text


def hit_heading(
    rank: int,
    title: str,
    heading_path: Sequence[str],
    page: str,
    short_id: str,
    width: int,
) -> Text:
    """The line a hit starts with: rank, title, section, page and short id. A section that
    does not fit beside the title goes on a line of its own below it, whole (wrapped if it
    must be): the section path is where a reader learns what the passage is about, so it is
    never cut; only a title longer than the line is shortened."""
    section = list(heading_path[1:] if heading_path[:1] == [title] else heading_path)
    where = " > ".join(section)
    number = f"{rank:>2}. "
    fixed = len(number) + sum(2 + len(part) for part in (page, short_id) if part)
    beside = bool(where) and fixed + len(title) + 2 + len(where) <= width
    spare = width - fixed - (2 + len(where) if beside else 0)
    if len(title) > spare:
        title = cut_right(title, max(spare, 16))
    line = Text()
    line.append(number + printable(title), style="bold")
    if beside:
        line.append("  " + printable(where), style="cyan")
    if page:
        line.append("  " + page)
    line.append("  " + short_id, style="dim")
    if where and not beside:
        line.append("\n" + " " * INDENT + printable(where), style="cyan")
    return line


def hit_block(
    hit: SearchHit,
    matcher: Matcher | None,
    width: int,
    short_id: int,
    words: int | None = PASSAGE_WORDS,
    scores: Sequence[str] = (),
) -> RenderableType:
    """A search hit as a block: its heading line, then its passage (`words` words around
    the best match; all of it with None) indented under it; with `scores`, a line of each
    stage's score between them."""
    heading = hit_heading(
        hit.rank,
        hit.title or hit.rel_path,
        hit.heading_path,
        pages_label(hit.rel_path, hit.page_start, hit.page_end),
        hit.chunk_id[:short_id],
        width,
    )
    parts: list[RenderableType] = [heading]
    if scores:
        line = "  ".join(
            f"{stage} {hit.scores[stage]:.3f}" for stage in scores if stage in hit.scores
        )
        parts.append(Indented(Text(line, style="dim")))
    parts.append(Indented(passage_view(hit.text_chat, hit.heading_path, matcher, words)))
    return Group(*parts)


class Indented:
    """`renderable` wrapped to the width left after `indent` columns, and indented by them;
    lines are not padded out to the width (no trailing spaces in a pipe or a copy)."""

    def __init__(self, renderable: RenderableType, indent: int = INDENT) -> None:
        self.renderable = renderable
        self.indent = indent

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = max(options.max_width - self.indent, 20)
        lines = console.render_lines(self.renderable, options.update_width(width), pad=False)
        for line in lines:
            while line and not line[-1].control and not line[-1].text.strip():
                line.pop()
            if line:
                last = line[-1]
                line[-1] = Segment(last.text.rstrip(), last.style, last.control)
                yield Segment(" " * self.indent)
                yield from line
            yield Segment.line()


def passage_view(
    text_chat: str,
    heading_path: Sequence[str],
    matcher: Matcher | None = None,
    words: int | None = PASSAGE_WORDS,
    plain: bool = True,
) -> RenderableType:
    """A chunk's body (its breadcrumb line left out) for the terminal: with `words`, only
    about that many words around the lines `matcher` scores best, the gaps marked "…";
    tables drawn as tables. `plain` shows the words a reader sees (emphasis, link targets
    and code marks removed); otherwise each line as the document wrote it."""
    lines, units = _parse(chunk_body(text_chat, heading_path), plain, words is not None)
    if not units:
        return Text("")
    chosen = _choose(units, matcher, words)
    return _render(lines, units, chosen, matcher)


def _parse(body: str, plain: bool, split: bool) -> tuple[list[_Line], list[_Unit]]:
    """The body's lines and the units they are cut into, in order."""
    lines: list[_Line] = []
    units: list[_Unit] = []
    table: _Line | None = None

    def add(text: str, cells: list[str] | None = None) -> None:
        lines[-1].units.append(len(units))
        units.append(_Unit(text, len(lines) - 1, _count(text), cells))

    def close_table() -> None:
        # A table of only a header row still says something: its header is its one row.
        if table is not None and table.header is not None and not table.units:
            cells, table.header = table.header, None
            add(" ".join(cells), cells)

    def inline(text: str) -> str:
        return " ".join(plain_text(text).split()) if plain else text.strip()

    raws = unwrap_soft_breaks(body).splitlines()
    for number, raw in enumerate(raws):
        stripped = raw.strip()
        if stripped.startswith("|"):
            if _TABLE_SEPARATOR.match(stripped):
                continue
            cells = [inline(cell) for cell in table_cells(stripped)]
            if table is None:
                table = _Line()
                lines.append(table)
                # The row above the |---| line names the columns, unless it reads as data
                # (a label and amounts, which a statement's grid starts with).
                following = raws[number + 1].strip() if number + 1 < len(raws) else ""
                if _TABLE_SEPARATOR.match(following) and not is_data_row(cells):
                    table.header = cells
                    continue
            add(" ".join(cells), cells)
            continue
        close_table()
        table = None
        if not stripped:
            continue
        text = inline(stripped)  # plain text drops a heading's "#" marks too
        if not text:
            continue
        heading = bool(_HEADING.match(stripped))
        lines.append(_Line(indent=len(raw) - len(raw.lstrip()), heading=heading))
        pieces = [text]
        if split and _count(text) > SPLIT_PARAGRAPH_WORDS:
            pieces = [piece for piece in _SENTENCE_END.split(text) if piece]
        for piece in pieces:
            add(piece)
    close_table()
    return lines, units


def _count(text: str) -> int:
    return len(text.split())


def _choose(units: list[_Unit], matcher: Matcher | None, words: int | None) -> list[bool]:
    """Which units to show: all when they fit in `words`; else the best-matching unit and
    its neighbours, taken after and before in turn, while they fit."""
    if words is None or sum(unit.words for unit in units) <= words:
        return [True] * len(units)
    best = 0
    if matcher is not None:
        scores = [matcher.score(unit.text) for unit in units]
        best = max(range(len(units)), key=lambda i: (scores[i], -i))
    chosen = [False] * len(units)
    chosen[best] = True
    used = units[best].words
    after, before = best + 1, best - 1
    while after < len(units) or before >= 0:
        grew = False
        for side in ("after", "before"):
            index = after if side == "after" else before
            if not 0 <= index < len(units) or used + units[index].words > words:
                continue
            chosen[index] = True
            used += units[index].words
            grew = True
            if side == "after":
                after += 1
            else:
                before -= 1
        if not grew:
            break
    return chosen


def _render(
    lines: list[_Line], units: list[_Unit], chosen: list[bool], matcher: Matcher | None
) -> RenderableType:
    """The chosen units, line by line: "…" on a line of its own for lines left out, within
    a line for sentences left out; the query's words in bold."""
    parts: list[RenderableType] = []
    skipped = False  # a whole line left out since the last one shown
    for line in lines:
        if not any(chosen[i] for i in line.units):
            skipped = True
            continue
        if skipped:
            parts.append(Text(ELLIPSIS, style="dim"))
        skipped = False
        if any(units[i].cells is not None for i in line.units):
            parts.append(_table(line, units, chosen, matcher))
            continue
        text = Text(" " * line.indent, style="bold" if line.heading else "")
        if not chosen[line.units[0]]:
            text.append(ELLIPSIS + " ", style="dim")
        gap = ""  # what goes before the next sentence shown: nothing, a space or "…"
        for index in line.units:
            if not chosen[index]:
                gap = f" {ELLIPSIS} " if gap else gap
                continue
            text.append(gap, style="dim")
            text.append(printable(units[index].text))
            gap = " "
        if not chosen[line.units[-1]]:
            text.append(" " + ELLIPSIS, style="dim")
        parts.append(matcher.highlight(text) if matcher else text)
    if skipped and parts:
        parts.append(Text(ELLIPSIS, style="dim"))
    return Group(*parts)


#: Columns between two table columns: a space, the (blank) divider, a space.
COLUMN_GAP = 3


class _FittedTable:
    """A table's rows under its header, its columns as wide as their cells or, when the
    width is short, narrowed toward their longest word; where even that does not fit, its
    rows one after another, each cell after its column's name ("Level: L3 · Title: ...")."""

    def __init__(
        self, header: list[Text] | None, rows: list[list[Text]], numeric: list[bool]
    ) -> None:
        self.header = header
        self.rows = rows
        self.numeric = numeric

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        columns = list(zip(*self.rows, strict=True))
        names = self.header or [Text("")] * len(columns)
        # Each column at least as wide as its longest word; then its cells unwrapped; then
        # its name unwrapped too, as far as the room goes.
        low = [
            max(cell_len(word) for cell in (name, *cells) for word in cell.plain.split() or [""])
            for name, cells in zip(names, columns, strict=True)
        ]
        middle = [
            max(width, *(cell.cell_len for cell in cells))
            for width, cells in zip(low, columns, strict=True)
        ]
        high = [max(width, name.cell_len) for width, name in zip(middle, names, strict=True)]
        room = options.max_width - COLUMN_GAP * (len(columns) - 1)
        if sum(low) > room:
            yield Group(*(self._record(row) for row in self.rows))
            return
        widths: list[int | None] = [None] * len(columns)
        if sum(high) > room:
            start, end = (middle, high) if sum(middle) <= room else (low, middle)
            spare = room - sum(start)
            wanted = [b - a for a, b in zip(start, end, strict=True)]
            total = sum(wanted) or 1
            widths = [a + spare * want // total for a, want in zip(start, wanted, strict=True)]
        table = Table(
            box=box.SIMPLE_HEAD,
            show_header=self.header is not None,
            show_edge=False,
            pad_edge=False,
            header_style="bold",
        )
        for column, width in enumerate(widths):
            table.add_column(
                self.header[column] if self.header else "",
                justify="right" if self.numeric[column] else "left",
                width=width,
            )
        for row in self.rows:
            table.add_row(*row)
        yield table

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement(1, options.max_width)

    def _record(self, row: list[Text]) -> Text:
        """One row as a line: each cell after its column's name, "·" between them."""
        record = Text()
        for column, cell in enumerate(row):
            if not cell.plain:
                continue
            if record:
                record.append(" · ", style="dim")
            if self.header and self.header[column].plain:
                record.append(self.header[column].plain + ": ", style="bold dim")
            record.append_text(cell)
        return record


def _table(
    line: _Line, units: list[_Unit], chosen: list[bool], matcher: Matcher | None
) -> _FittedTable:
    """A Markdown table's chosen rows under its header, a row of "…" where rows are left
    out; numbers aligned right."""
    cells = [units[i].cells or [] for i in line.units if chosen[i]]
    columns = max(len(row) for row in [*cells, line.header or []])

    def padded(row: list[str]) -> list[Text]:
        texts = [Text(printable(cell)) for cell in row] + [Text("")] * (columns - len(row))
        return [matcher.highlight(text) for text in texts] if matcher else texts

    numeric = []
    for column in range(columns):
        values = [row[column] for row in cells if column < len(row) and row[column]]
        numeric.append(bool(values) and all(_NUMBER.match(value) for value in values))
    gap = [Text(ELLIPSIS, style="dim")] + [Text("")] * (columns - 1)
    rows: list[list[Text]] = []
    previous_shown = True
    for index in line.units:
        if chosen[index]:
            if not previous_shown:
                rows.append(gap)
            rows.append(padded(units[index].cells or []))
        previous_shown = chosen[index]
    if not previous_shown:
        rows.append(gap)
    header = [Text(printable(name)) for name in line.header] if line.header else None
    if header:
        header += [Text("")] * (columns - len(header))
    return _FittedTable(header, rows, numeric)
