"""Turns a grid of cell texts into a GitHub Markdown table that a reader and a chunker can use.

Parsers are responsible for repeating merged cells into every position they cover; this module
only cleans cells, drops empty rows and columns, and renders.
"""

from __future__ import annotations

import re

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


def render_table(
    rows: list[list[str | None]], header_rows: int = 1, row_pages: list[int] | None = None
) -> tuple[str, list[int]] | None:
    """GitHub Markdown for a table whose first `header_rows` rows are headings.

    Several header rows (a spanning group heading over sub-headings) are folded into one header
    row by joining the distinct texts of each column, so every body row still reads as
    `column name: value` on its own. Returns the Markdown and the page of each of its lines, or
    None when no cell holds text.
    """
    grid, pages = normalize_grid(rows, row_pages)
    grid = collapse_repeated_columns(grid)
    if not grid:
        return None
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
