"""What a newcomer reads from the CLI: search hits with readable sections, pages and ids to
follow up with, answers whose sources are named, a data folder found from anywhere, and what
readers and documents wrote printed as written, never as markup or terminal controls."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.main import app as cli
from lorehouse.settings import default_data_dir, get_settings
from lorehouse.stores.duckdb_store import DuckDBStore

LEAVE = "How many weeks of parental leave do primary caregivers get?"


@pytest.fixture
def in_sample(materialized_sample: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("LOREHOUSE_DATA_DIR", str(materialized_sample))
    monkeypatch.setenv("COLUMNS", "220")
    get_settings.cache_clear()
    yield materialized_sample
    get_settings.cache_clear()


def _run(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_search_shows_clean_text_sections_pages_and_ids_to_follow_up(in_sample: Path) -> None:
    shown = _run("search", "work from another country", "--file-type", "pdf", "--top-k", "3")
    assert "p. 3" in shown  # a page, not "3-3"
    assert "**" not in shown and "0.03" not in shown  # no raw Markdown, no raw RRF scores
    assert "Employee Handbook > " not in shown  # the breadcrumb is not repeated in the text
    hits = json.loads(
        _run("search", "work from another country", "--file-type", "pdf", "--top-k", "3", "--json")
    )["hits"]
    first_id = hits[0]["chunk_id"][:10]
    assert first_id in shown
    full = _run("show", first_id)
    assert "employee-handbook.pdf" in full and "20 working days" in full

    explained = _run("search", "parental leave weeks", "--explain", "--top-k", "2")
    assert "bm25" in explained and "vector" in explained and "rrf" in explained

    wrong = CliRunner().invoke(cli, ["search", "leave", "--mode", "fuzzy"])
    assert wrong.exit_code == 2 and "vector" in wrong.output and "hybrid" in wrong.output


def test_ask_names_its_sources_and_says_once_how_to_add_an_llm(in_sample: Path) -> None:
    shown = _run("ask", LEAVE, "--trace")
    assert "Parental Leave FAQ (hr/parental-leave-faq.md)" in shown
    sources = next(line for line in shown.splitlines() if line.startswith("sources:"))
    assert "(" in sources and "/" in sources  # titles and paths, not ids
    assert shown.count("LOREHOUSE_LLM_MODEL") == 1
    shown_help = _run("ask", "--help")
    assert "LOREHOUSE_LLM_MODEL" in shown_help
    # Flags read as flags: "--trace  Show each step", not "--trace <bool>".
    assert "--trace" in shown_help and "<bool>" not in shown_help


def test_the_data_folder_is_found_from_any_folder_of_a_project(
    materialized_sample: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "project"
    (project / "docs" / "deep").mkdir(parents=True)
    (project / ".lorehouse").symlink_to(materialized_sample)
    assert default_data_dir(project / "docs" / "deep") == project / ".lorehouse"

    monkeypatch.delenv("LOREHOUSE_DATA_DIR", raising=False)
    monkeypatch.chdir(project / "docs" / "deep")
    get_settings.cache_clear()
    try:
        assert "20 weeks" in _run("ask", LEAVE)
        monkeypatch.chdir(tmp_path)
        monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "user-data"))
        get_settings.cache_clear()
        missing = CliRunner().invoke(cli, ["search", "leave"])
    finally:
        get_settings.cache_clear()
    assert missing.exit_code == 1
    # The message names the folder it looked in (the terminal may wrap the path anywhere).
    assert str(tmp_path / "user-data" / "lorehouse") in "".join(missing.output.split())
    assert "LOREHOUSE_DATA_DIR" in missing.output


def test_a_question_holding_markup_is_asked_and_printed_as_written(in_sample: Path) -> None:
    shown = _run("ask", "[/x] How many weeks of [bold]parental leave[/bold] do carers get?")
    assert "Q: [/x] How many weeks of [bold]parental leave[/bold] do carers get?" in shown
    assert "Parental Leave FAQ (hr/parental-leave-faq.md)" in shown


def test_feedback_comments_are_printed_as_text_never_as_markup_or_terminal_controls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    DuckDBStore(tmp_path / "lorehouse.duckdb").add_feedback(
        {
            "answer_id": "c" * 32,
            "given_at": datetime.now(UTC),
            "caller": "reader",
            "rating": "down",
            "comment": "20 weeks[/red] \x1b]0;pwned\x07\x1b[2J\rdone",
            "question": "How long is [bold]leave[/bold]?",
            "answer": "Twelve weeks.",
            "cited_chunk_ids": [],
            "cited_files": [],
        }
    )
    monkeypatch.setenv("LOREHOUSE_DATA_DIR", str(tmp_path))
    get_settings.cache_clear()
    try:
        shown = _run("eval", "feedback", "--out", str(tmp_path / "candidates.jsonl"))
    finally:
        get_settings.cache_clear()
    # The markup is shown, the controls written out: no ESC, bell or carriage return left
    # to retitle the terminal, clear it, or overwrite the line.
    assert "How long is [bold]leave[/bold]?" in shown
    assert "20 weeks[/red] \\x1b]0;pwned\\x07\\x1b[2J\\x0ddone" in shown
    assert not {"\x1b", "\x07", "\r"} & set(shown)
    # The candidate keeps the correction as the reader wrote it.
    [case] = [json.loads(line) for line in (tmp_path / "candidates.jsonl").read_text().splitlines()]
    assert case["answer"] == "20 weeks[/red] \x1b]0;pwned\x07\x1b[2J\rdone"
