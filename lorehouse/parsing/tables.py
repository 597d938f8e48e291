"""Turns a grid of cell texts into a GitHub Markdown table that a reader and a chunker can use.

Parsers are responsible for repeating merged cells into every position they cover; this module
only cleans cells, drops empty rows and columns, and renders.
"""

from __future__ import annotations

import re

from lorehouse.text import is_data_row

_WHITESPACE = re.compile(r"\s+")


def clean_cell(value: object) -> str:
    """A cell's text on one line, with pipes escaped so they cannot split the row."""
    if value is None:
        return ""
    text = _WHITESPACE.sub(" ", str(value)).strip()
    return text.replace("\\", "\\\\").replace("|", "\\|")


def normalize_grid(
    rows: list[list[str | None]], row_pages: list[int] | None = None
) -> tuple[list[list[str]], list[int]]:
    """A rectangular grid with empty rows and empty columns removed, and each kept row's page."""
    pages = row_pages if row_pages is not None else [1] * len(rows)
    kept = [
        (row, page)
        for row, page in zip(([clean_cell(c) for c in r] for r in rows), pages, strict=True)
        if any(row)
    ]
    if not kept:
        return [], []
    width = max(len(row) for row, _ in kept)
    padded = [row + [""] * (width - len(row)) for row, _ in kept]
    keep = [col for col in range(width) if any(row[col] for row in padded)]
    return [[row[col] for col in keep] for row in padded], [page for _, page in kept]


#: A cell holding a currency sign alone: financial statements set "$" in a column of its own
#: before the amount of a total row ("Net Revenue | $ | 86,392").
_CURRENCY_SIGN = re.compile(r"^[$€£¥]$|^(?:US|C|A)\$$")
#: A cell closing the amount on its left: a negative amount's parenthesis, a percent sign
#: ("(33,543,351 | )", "12.5 | %").
_CLOSING_SIGN = re.compile(r"^\)?%?$")


def collapse_repeated_columns(grid: list[list[str]]) -> list[list[str]]:
    """Merge a column into its left neighbour where it only repeats it.

    Layout engines split one logical column into several physical ones (a currency sign and
    its amount, or a cell merged across grid columns); after merged cells are repeated, such a
    column carries no information and only widens every chunk that holds the table. A column
    merges when, in every row, it equals its left neighbour, or the neighbour is empty, or the
    neighbour is a currency sign alone, which then reads as the amount's prefix ("$86,392");
    and a column holding only closing signs (")", "%") joins the amounts on its left.
    Before currency signs were read this way, a financial statement's amounts were each shown
    twice ("Cost of sales | 40,576 | 40,576"), because its total rows kept the columns apart.
    """
    if not grid:
        return grid
    columns = [list(column) for column in zip(*grid, strict=True)]
    merged = [columns[0]]
    for column in columns[1:]:
        left = merged[-1]
        if all(_CLOSING_SIGN.match(cell) for cell in column):
            merged[-1] = [f"{before}{cell}" for before, cell in zip(left, column, strict=True)]
        elif all(
            cell == before or not before or (bool(cell) and _CURRENCY_SIGN.match(before))
            for before, cell in zip(left, column, strict=True)
        ):
            merged[-1] = [
                f"{before}{cell}" if cell and _CURRENCY_SIGN.match(before) else cell
                for before, cell in zip(left, column, strict=True)
            ]
        else:
            merged.append(column)
    return [list(row) for row in zip(*merged, strict=True)]


#: One column label of a statement's header line: a year, a date ("June 30, 2023"), a range
#: of years ("2028-2032") or the change between years.
_COLUMN_LABEL = re.compile(
    r"(?:^|\s)((?:(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)[a-z]*\.? \d{1,2}, )?"
    r"(?:19|20)\d{2}(?:[-–](?:19|20)?\d{2})?|Change)$"
)
_YEAR = re.compile(r"(?:19|20)\d{2}")


def _split_labels(line: str) -> tuple[str, list[str]]:
    """A line's trailing column labels and the text before them.

    Labels are all dates or all years: in "Years ended December 31, 2022 2021" the date
    belongs to the caption, and the columns are 2022 and 2021.
    """
    rest, labels = line.strip(), []
    while match := _COLUMN_LABEL.search(rest):
        labels.insert(0, match.group(1))
        rest = rest[: match.start()].rstrip()
    if len(labels) > 1 and " " in labels[0] and " " not in labels[1]:
        caption_end, year = labels[0].rsplit(" ", 1)
        rest, labels[0] = f"{rest} {caption_end}".strip(), year
    return rest, labels


def column_labels_above(
    lines: list[str], rows: list[list[str | None]]
) -> tuple[int, str, list[str]] | None:
    """The column labels a statement prints on the lines above its grid.

    A statement's grid often starts with its first amounts ("Net Revenue | $86,392 | ..."),
    its years set above it ("Years ended December 31, 2022 2021 2020"), sometimes one text
    line per year. When the `lines` above the grid (nearest last) end with as many years or
    dates as the grid has value columns, those are the grid's column names: without them
    every amount reads without its year. Returns the index of the line the labels start on,
    what that line holds before them ("Years ended December 31,"), and the labels; None when
    the lines do not fit. A single label is taken only from a line that holds nothing else,
    so a sentence ending in a year keeps it.
    """
    grid = collapse_repeated_columns(normalize_grid(rows)[0])
    if not grid or len(grid[0]) < 2 or not is_data_row(grid[0]):
        return None
    labels: list[str] = []
    first, rest = len(lines), ""
    while first > 0:
        before, found = _split_labels(lines[first - 1])
        if not found:
            break
        first, rest, labels = first - 1, before, found + labels
        if rest:
            break
    fits = len(labels) == len(grid[0]) - 1 and (len(labels) > 1 or not rest)
    if not fits or not any(_YEAR.search(label) for label in labels):
        return None
    return first, rest, labels


def render_table(
    rows: list[list[str | None]],
    header_rows: int = 1,
    row_pages: list[int] | None = None,
    column_labels: list[str] | None = None,
) -> tuple[str, list[int]] | None:
    """GitHub Markdown for a table whose first `header_rows` rows are headings.

    Several header rows (a spanning group heading over sub-headings) are folded into one header
    row by joining the distinct texts of each column, so every body row still reads as
    `column name: value` on its own. A table whose first row is data (a label and amounts) has
    no header row: it gets `column_labels` (found above the grid) over its value columns, or a
    blank header, so the chunker does not repeat a row of amounts atop every chunk as if it
    named the columns. Returns the Markdown and the page of each of its lines, or None when no
    cell holds text.
    """
    grid, pages = normalize_grid(rows, row_pages)
    grid = collapse_repeated_columns(grid)
    if not grid:
        return None
    caption = ""
    if column_labels is None and len(grid) > 1 and grid[0][0] and not any(grid[0][1:]):
        # The line above the grid taken into it as a header of one cell ("Years ended
        # December 31, 2022 2021 | | "): its years name the columns all the same.
        found = column_labels_above([grid[0][0]], grid[1:])
        if found is not None:
            _, caption, column_labels = found
            grid, pages = grid[1:], pages[1:]
    if is_data_row(grid[0]):
        width = len(grid[0])
        labels = column_labels if column_labels and len(column_labels) == width - 1 else None
        header = [caption, *labels] if labels else [""] * width
        lines = [_row_line(header), _row_line(["---"] * width)]
        lines.extend(_row_line(row) for row in grid)
        return "\n".join(lines), [pages[0], pages[0], *pages]
    header_rows = max(1, min(header_rows, len(grid)))
    header: list[str] = []
    for col in range(len(grid[0])):
        texts: list[str] = []
        for row in grid[:header_rows]:
            if row[col] and row[col] not in texts:
                texts.append(row[col])
        header.append(" / ".join(texts))
    lines = [_row_line(header), _row_line(["---"] * len(header))]
    lines.extend(_row_line(row) for row in grid[header_rows:])
    line_pages = [pages[0], pages[0], *pages[header_rows:]]
    return "\n".join(lines), line_pages


def _row_line(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"
