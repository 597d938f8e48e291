"""XLSX -> Markdown with openpyxl: one section per sheet, each block of cells a table.

openpyxl is used directly because it gives merged ranges (repeated into every cell they cover)
and cached formula values; empty rows and columns are dropped and blocks separated by blank
rows or columns become separate tables, as a reader sees them. Except where the blank only
spaces one table out, as people lay sheets out: a spacer column between columns whose rows
line up, or a blank row before more rows of the table above (they start with no header of
their own). Split there, the rows after the blank would be read under their own first row as
a header, and the columns after the spacer without the row's name.
"""

from __future__ import annotations

import io
import zipfile
from datetime import date, datetime, time
from importlib.metadata import version

import openpyxl
from openpyxl.utils.exceptions import InvalidFileException
from openpyxl.worksheet.worksheet import Worksheet

from lorehouse.errors import ParseError
from lorehouse.models import FailureReason
from lorehouse.parsing.markdown_builder import MarkdownBuilder
from lorehouse.parsing.office import check_office_package
from lorehouse.parsing.registry import ParseOptions, ParseOutput, register_parser

Grid = list[list[str]]


@register_parser(file_type="xlsx", name="openpyxl", version=f"4+openpyxl{version('openpyxl')}")
def parse_xlsx(data: bytes, rel_path: str, options: ParseOptions) -> ParseOutput:
    """Markdown for a workbook; the page map points at sheets (sheet number and name)."""
    check_office_package(data, "xlsx")
    try:
        workbook = openpyxl.load_workbook(io.BytesIO(data), data_only=True, read_only=False)
    except (KeyError, ValueError, TypeError, InvalidFileException, zipfile.BadZipFile) as error:
        raise ParseError(FailureReason.CORRUPT, f"openpyxl cannot open it: {error}") from error
    builder = MarkdownBuilder()
    warnings: list[str] = []
    for number, sheet in enumerate(workbook.worksheets, start=1):
        grid = _sheet_grid(sheet)
        if not any(any(row) for row in grid):
            continue
        if sheet.sheet_state != "visible":
            warnings.append(f"sheet {sheet.title!r} is hidden; included")
        builder.heading(1, sheet.title, page=number, label=sheet.title)
        for block in _blocks(grid):
            _emit_block(block, builder, number, sheet.title)
    title = workbook.properties.title or None
    return ParseOutput(builder=builder, warnings=warnings, title=title)


def _sheet_grid(sheet: Worksheet) -> Grid:
    grid = [[_format(cell.value, cell.number_format) for cell in row] for row in sheet.iter_rows()]
    for merged in sheet.merged_cells.ranges:
        value = grid[merged.min_row - 1][merged.min_col - 1] if grid else ""
        for r in range(merged.min_row - 1, min(merged.max_row, len(grid))):
            for c in range(merged.min_col - 1, min(merged.max_col, len(grid[r]))):
                grid[r][c] = value
    return grid


def _format(value: object, number_format: str) -> str:
    """A cell as the reader sees it: whole numbers without '.0', percentages as percentages."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, datetime):
        return value.date().isoformat() if value.time() == time(0) else value.isoformat(" ")
    if isinstance(value, date | time):
        return value.isoformat()
    if isinstance(value, int | float):
        if "%" in (number_format or ""):
            return f"{value * 100:.10g}%"
        if isinstance(value, float) and value.is_integer():
            return str(int(value))
        return f"{value:.10g}" if isinstance(value, float) else str(value)
    return str(value).strip()


def _blocks(grid: Grid) -> list[Grid]:
    """Rectangles of cells separated by fully empty rows, then by fully empty columns; a
    spacer column or a blank row inside one table does not separate it."""
    blocks: list[Grid] = []
    for band in _split(grid):
        columns = list(zip(*band, strict=True))
        pieces = [
            [list(r) for r in zip(*column_band, strict=True)]
            for column_band in _split([list(c) for c in columns])
        ]
        for block in _across_spacers(pieces):
            block = [row for row in block if any(row)]
            if not block:
                continue
            if blocks and _continues(blocks[-1], block):
                blocks[-1].extend(block)
            else:
                blocks.append(block)
    return blocks


def _across_spacers(pieces: list[Grid]) -> list[Grid]:
    """Side-by-side pieces of one band joined where their rows line up: the same rows hold
    cells in both, so an empty column only spaced one table's columns out. Two tables side
    by side rarely fill exactly the same rows, and if they do, each row stays one record."""
    joined: list[Grid] = []
    for piece in pieces:
        if joined and _filled_rows(joined[-1]) == _filled_rows(piece):
            joined[-1] = [left + right for left, right in zip(joined[-1], piece, strict=True)]
        else:
            joined.append(piece)
    return joined


def _filled_rows(block: Grid) -> list[bool]:
    return [any(row) for row in block]


def _continues(table: Grid, block: Grid) -> bool:
    """Whether `block`, after a blank row, holds more rows of `table`: as many columns, under
    a header row of labels, and a first row that is a record (it holds a number), not a
    header of its own."""
    return (
        len(table) > 1
        and len(block[0]) == len(table[0])
        and _is_header(table[0])
        and not _is_header(block[0])
    )


def _is_header(row: list[str]) -> bool:
    return _filled(row) > 1 and not any(_is_number(cell) for cell in row)


def _is_number(cell: str) -> bool:
    try:
        float(cell.replace(",", "").removesuffix("%"))
    except ValueError:
        return False
    return True


def _split(rows: Grid) -> list[Grid]:
    bands: list[Grid] = []
    current: Grid = []
    for row in rows:
        if any(row):
            current.append(row)
        elif current:
            bands.append(current)
            current = []
    if current:
        bands.append(current)
    width = max((len(r) for r in rows), default=0)
    return [[row + [""] * (width - len(row)) for row in band] for band in bands]


def _emit_block(block: Grid, builder: MarkdownBuilder, page: int, label: str) -> None:
    """A row holding one cell above a wider block is its title (a paragraph), not a table row."""
    width = max(len(row) for row in block)
    while len(block) > 1 and width > 1 and _filled(block[0]) == 1:
        builder.paragraph(_first(block[0]), page=page, label=label)
        block = block[1:]
    if len(block) == 1 and _filled(block[0]) == 1:
        builder.paragraph(_first(block[0]), page=page, label=label)
        return
    builder.table(block, page=page, label=label)


def _filled(row: list[str]) -> int:
    """Distinct values in a row: a title merged across the row repeats in every cell."""
    return len({cell for cell in row if cell})


def _first(row: list[str]) -> str:
    return next(cell for cell in row if cell)
