"""Spreadsheets as people lay them out: a table spaced out by a blank column or a blank row
stays one table, while separate tables stay apart."""

from __future__ import annotations

import io

import openpyxl

from lorehouse.parsing.registry import ParseOptions
from lorehouse.parsing.xlsx import parse_xlsx


def _markdown(rows: list[list[object]], merge: str | None = None) -> str:
    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.title = "Budgets"
    for row in rows:
        sheet.append(row)
    if merge:
        sheet.merge_cells(merge)
    data = io.BytesIO()
    workbook.save(data)
    return parse_xlsx(data.getvalue(), "budgets.xlsx", ParseOptions()).builder.build()[0]


def _lines(markdown: str) -> list[str]:
    return [line for line in markdown.splitlines() if line.startswith("|")]


def test_a_spacer_column_and_a_blank_row_leave_one_table_under_one_header() -> None:
    markdown = _markdown(
        [
            ["Department budgets FY2026", None, None, None, None],
            [],
            ["Department", "Head", "Personnel", None, "Total"],
            ["Data Science", "Aisha Rahman", 3900, None, 4618],
            ["Client Services", "Olivia Grant", 1080, None, 1357],
            [],
            ["Finance", "Rajiv Menon", 720, None, 825],
            ["Total", None, 5700, None, 6800],
        ],
        merge="A1:E1",
    )
    # The merged title is a line of text, not a one-cell table.
    assert "\nDepartment budgets FY2026\n" in markdown
    assert _lines(markdown) == [
        "| Department | Head | Personnel | Total |",
        "| --- | --- | --- | --- |",
        "| Data Science | Aisha Rahman | 3900 | 4618 |",
        "| Client Services | Olivia Grant | 1080 | 1357 |",
        "| Finance | Rajiv Menon | 720 | 825 |",
        "| Total |  | 5700 | 6800 |",
    ]


def test_separate_tables_stay_apart() -> None:
    markdown = _markdown(
        [
            ["City", "Per diem", None, "Code", "Owner"],
            ["Lisbon", 50, None, "FIN", "Finance"],
            ["Porto", 45],
            [],
            ["Threshold", "Approver"],
            ["Up to EUR 500", "Line manager"],
        ]
    )
    lines = _lines(markdown)
    # Rows that do not line up: two tables side by side.
    assert "| City | Per diem |" in lines and "| Code | Owner |" in lines
    # A block with a header row of its own after the blank row: a table of its own.
    assert "| Threshold | Approver |" in lines
    assert lines[lines.index("| Threshold | Approver |") + 1] == "| --- | --- |"
