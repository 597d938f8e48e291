"""The Markdown builder: one dialect for every parser, and a page map that cites correctly."""

from __future__ import annotations

import itertools

import pytest

from lorehouse.parsing.markdown_builder import MarkdownBuilder, page_of_offset
from lorehouse.parsing.tables import column_labels_above, render_table


def test_page_map_covers_every_character_and_cites_the_right_page() -> None:
    builder = MarkdownBuilder()
    builder.heading(1, "Leave", page=1)
    builder.paragraph("Annual leave is 25 days.", page=1)
    builder.paragraph("Parental leave is 20 weeks.", page=2)
    markdown, page_map = builder.build()
    assert page_map[0].start == 0 and page_map[-1].end == len(markdown)
    assert all(a.end == b.start for a, b in itertools.pairwise(page_map))
    assert page_of_offset(page_map, markdown.index("Parental")) == 2
    assert page_of_offset(page_map, markdown.index("Annual")) == 1


def test_a_table_running_over_two_pages_cites_each_row_on_its_own_page() -> None:
    builder = MarkdownBuilder()
    rows = [["City", "Hotel"], ["Lisbon", "180"], ["Toronto", "275"]]
    builder.table(rows, row_pages=[3, 3, 4])
    markdown, page_map = builder.build()
    assert page_of_offset(page_map, markdown.index("Lisbon")) == 3
    assert page_of_offset(page_map, markdown.index("Toronto")) == 4


def test_lists_keep_nesting_and_numbering() -> None:
    builder = MarkdownBuilder()
    builder.list_item("Prepare", ordered=True, number=1)
    builder.list_item("Book travel", depth=1)
    builder.list_item("Submit", ordered=True, number=2)
    markdown, _ = builder.build()
    assert markdown == "1. Prepare\n   - Book travel\n2. Submit\n"


def test_table_rendering_escapes_pipes_and_drops_empty_rows_and_columns() -> None:
    text, _ = render_table([["Name", "", "Note"], ["a|b", "", "x\ny"], ["", "", ""]])
    assert text.splitlines() == ["| Name | Note |", "| --- | --- |", "| a\\|b | x y |"]


def test_two_header_rows_fold_into_one_header() -> None:
    text, _ = render_table([["Hotel", "Hotel"], ["EUR", "CAD"], ["180", "275"]], header_rows=2)
    assert text.splitlines()[0] == "| Hotel / EUR | Hotel / CAD |"


# The layout engine sets "$" in a column of its own on total rows, and the amount of every
# other row spans both columns and was repeated into each; closing signs get columns too.
STATEMENT_WITH_CURRENCY_COLUMNS = [
    ["", "2022", "2022", "2021", "2021"],
    ["Net Revenue", "$", "86,392", "$", "79,474"],
    ["Cost of sales", "40,576", "40,576", "37,075", "37,075"],
    ["Gain on the Juice Transaction", "(3,321)", "(3,321)", "—", "—"],
]
BALANCE_WITH_CLOSING_SIGN_COLUMNS = [
    ["", "2023", "", "2022", ""],
    ["Accumulated deficit", "(33,543,351", ")", "(35,655,163", ")"],
    ["Additional paid-in capital", "16,380,597", "", "10,798,536", ""],
    ["Gross margin", "61.2", "%", "58.9", "%"],
]


@pytest.mark.parametrize(
    ("statement", "expected"),
    [
        (
            STATEMENT_WITH_CURRENCY_COLUMNS,
            [
                "|  | 2022 | 2021 |",
                "| --- | --- | --- |",
                "| Net Revenue | $86,392 | $79,474 |",
                "| Cost of sales | 40,576 | 37,075 |",
                "| Gain on the Juice Transaction | (3,321) | — |",
            ],
        ),
        (
            BALANCE_WITH_CLOSING_SIGN_COLUMNS,
            [
                "|  | 2023 | 2022 |",
                "| --- | --- | --- |",
                "| Accumulated deficit | (33,543,351) | (35,655,163) |",
                "| Additional paid-in capital | 16,380,597 | 10,798,536 |",
                "| Gross margin | 61.2% | 58.9% |",
            ],
        ),
    ],
    ids=["currency-sign-columns", "closing-sign-columns"],
)
def test_a_financial_statement_shows_each_amount_once_with_its_signs(
    statement: list[list[str | None]], expected: list[str]
) -> None:
    text, _ = render_table(statement)
    assert text.splitlines() == expected


def test_columns_that_only_take_turns_are_not_merged() -> None:
    ledger = [["Item", "Debit", "Credit"], ["Laptop", "1,200", ""], ["Refund", "", "300"]]
    text, _ = render_table(ledger)
    assert text.splitlines()[0] == "| Item | Debit | Credit |"
    assert "| Refund |  | 300 |" in text.splitlines()


def test_a_table_whose_first_row_holds_amounts_keeps_that_row_as_data() -> None:
    # The statement's years were printed outside the grid: no row of it names the columns.
    text, _ = render_table(
        [["Net Revenue", "$86,392", "$79,474"], ["Cost of sales", "40,576", "37,075"]]
    )
    assert text.splitlines() == [
        "|  |  |  |",
        "| --- | --- | --- |",
        "| Net Revenue | $86,392 | $79,474 |",
        "| Cost of sales | 40,576 | 37,075 |",
    ]


STATEMENT_WITHOUT_YEARS = [
    ["Net Revenue", "$86,392", "$79,474"],
    ["Cost of sales", "40,576", "37,075"],
]


@pytest.mark.parametrize(
    ("lines_above", "expected"),
    [
        (["Consolidated Statement of Income", "2022 2021"], (1, "", ["2022", "2021"])),
        (["Years ended December 31, 2022 2021"], (0, "Years ended December 31,", ["2022", "2021"])),
        (["($ in millions)", "2022", "2021"], (1, "", ["2022", "2021"])),
        (["June 30, 2023 June 30, 2022"], (0, "", ["June 30, 2023", "June 30, 2022"])),
        (["2023 2022 2021"], None),  # three years over two value columns
        (["Revenue grew in 2022"], None),  # a sentence ending in a year keeps it
    ],
    ids=["own-line", "after-caption", "one-line-each", "dates", "count-differs", "sentence"],
)
def test_the_years_above_a_statement_name_its_columns_only_when_they_fit(
    lines_above: list[str], expected: tuple[int, str, list[str]] | None
) -> None:
    assert column_labels_above(lines_above, STATEMENT_WITHOUT_YEARS) == expected


def test_years_taken_into_the_grid_as_a_one_cell_header_still_name_the_columns() -> None:
    grid = [["Years ended December 31, 2022 2021", "", ""], *STATEMENT_WITHOUT_YEARS]
    text, _ = render_table(grid)
    assert text.splitlines()[:3] == [
        "| Years ended December 31, | 2022 | 2021 |",
        "| --- | --- | --- |",
        "| Net Revenue | $86,392 | $79,474 |",
    ]
