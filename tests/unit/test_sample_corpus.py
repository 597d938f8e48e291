"""The bundled sample corpus parses with the structure its documents were written with."""

from __future__ import annotations

from pathlib import Path

from lorehouse.parsing.markdown_builder import page_of_offset
from tests.conftest import parsed_markdown


def test_handbook_pdf_outline_tables_and_page_furniture(sample_corpus: Path) -> None:
    document = parsed_markdown(sample_corpus / "handbook/employee-handbook.pdf")
    lines = document.markdown.splitlines()
    assert "# 3 Leave" in lines
    assert "## 3.2 Parental Leave" in lines
    assert "### 3.1.1 Entitlement by Office" in lines
    # Running header and "Page N of M" footer are gone; a word split across lines is whole.
    assert "Employee Handbook" not in document.markdown.replace("# ", "").split("\n", 3)[-1]
    assert "Page 3 of" not in document.markdown
    assert "responsibilities" in document.markdown
    # The holiday table runs over two pages with its header repeated: it comes out as one table.
    assert lines.count("| Date | Holiday | Lisbon | Toronto | Singapore |") == 1
    last_row = next(line for line in reversed(lines) if line.startswith("| ") and "2026" in line)
    first_row = next(line for line in lines if line.startswith("| Thu 1 Jan 2026"))
    assert page_of_offset(document.page_map, document.markdown.index(first_row)) == 8
    assert page_of_offset(document.page_map, document.markdown.index(last_row)) == 9
    parental = document.markdown.index("## 3.2 Parental Leave")
    assert page_of_offset(document.page_map, parental) == 5


def test_budget_workbook_drops_empty_rows_and_columns(sample_corpus: Path) -> None:
    document = parsed_markdown(sample_corpus / "finance/budget-2026.xlsx")
    assert [span.label for span in document.page_map] == [
        "Department budgets",
        "Per diem rates",
        "Approvers",
    ]
    for line in document.markdown.splitlines():
        if line.startswith("| "):
            assert "|  |  |" not in line


def test_slides_keep_bullet_levels_and_notes(sample_corpus: Path) -> None:
    markdown = parsed_markdown(sample_corpus / "handbook/benefits-overview.pptx").markdown
    assert any(line.startswith("   - ") for line in markdown.splitlines())
    assert "Speaker notes:" in markdown


def test_html_policy_drops_page_chrome_and_expands_merged_cells(sample_corpus: Path) -> None:
    markdown = parsed_markdown(sample_corpus / "it/acceptable-use-policy.html").markdown
    assert "<script" not in markdown and "function" not in markdown
    assert any(line.startswith("#### ") for line in markdown.splitlines())
    assert markdown.count("| --- |") >= 1
