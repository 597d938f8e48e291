"""What a newcomer reads from the CLI: search hits with readable sections, pages and ids to
follow up with, answers whose sources are named, a data folder found from anywhere, and what
readers and documents wrote printed as written, never as markup or terminal controls."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.main import app as cli
from lorehouse.settings import REPO_ROOT, default_data_dir, get_settings
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
    assert sources == "sources: all documents"  # offline no source is chosen: all are searched
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
    monkeypatch.setenv("COLUMNS", "220")  # each field on one line of the table
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


def test_a_search_hit_shows_its_matching_lines_wrapped_to_the_terminal(
    materialized_sample: Path,
) -> None:
    # As a person runs it, piped: COLUMNS sets the width. The on-call pay is the last line of
    # a long chunk, beyond the first 160 characters the hits used to show.
    env = {**os.environ, "LOREHOUSE_DATA_DIR": str(materialized_sample), "COLUMNS": "100"}
    run = subprocess.run(
        [str(Path(sys.executable).parent / "lorehouse"), "search", "on-call pay per week"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    lines = run.stdout.splitlines()
    assert all(len(line) <= 100 and line == line.rstrip() for line in lines)
    # Each hit a block: "rank. title  section  short id" on one line, its passage below.
    start = next(i for i, line in enumerate(lines) if "1. Rotation" in line)
    assert re.match(
        r" ?\d\. On-call Runbook: Platform Engineering  1\. Rotation  [0-9a-f]{10}$", lines[start]
    )
    block = lines[start + 1 : [*lines, ""].index("", start)]
    assert all(line.startswith("    ") for line in block)
    assert "On-call pay is EUR 250, CAD 360 or SGD 370 per week" in " ".join(
        " ".join(block).split()
    )
    assert block[0].strip() == "…"  # the lines before the match are left out, and say so


@pytest.mark.parametrize("width", [100, 60])
def test_a_table_passage_prints_under_its_header(
    in_sample: Path, monkeypatch: pytest.MonkeyPatch, width: int
) -> None:
    monkeypatch.setenv("COLUMNS", str(width))
    shown = _run("search", "consultant salary band in Lisbon", "-g", "hr", "--top-k", "2")
    assert "|" not in shown and "---" not in shown  # no Markdown table syntax
    if width == 100:  # a table: its header, then rows whose cells line up under it
        header = next(line for line in shown.splitlines() if re.match(r" +Level +Title ", line))
        row = next(line for line in shown.splitlines() if re.match(r" +L3 +Consultant ", line))
        assert header.index("Title") == row.index("Consultant")
        assert re.search(r"40000 +52000 +88000 +110000 +78000 +100000$", row)
    else:  # too narrow for eight columns: each row with its columns' names
        assert "Level: L3 · Title: Consultant · Lisbon min (EUR): 40000" in " ".join(shown.split())


def test_show_prints_the_breadcrumb_once_and_tables_as_tables(in_sample: Path) -> None:
    hits = json.loads(_run("search", "salary bands", "-g", "hr", "--json"))["hits"]
    table = next(hit for hit in hits if hit["is_table"])
    shown = _run("show", table["chunk_id"][:10], "-g", "hr")
    assert shown.count("Salary bands 2026") == 1
    assert re.search(r"^Level +Title ", shown, re.MULTILINE) and "| --- |" not in shown


def test_command_list_shows_each_command_in_a_whole_sentence(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    for group in ([], ["eval"], ["keys"]):
        listed = _run(*group, "--help").split("Commands:")[1]
        assert listed.strip() and "..." not in listed
        for line in listed.strip().splitlines():
            assert line.rstrip().endswith("."), line


def test_keys_create_says_serve_reads_the_keys_file_it_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys_file = tmp_path / "keys dir" / "keys.yaml"
    monkeypatch.delenv("LOREHOUSE_API_KEYS_FILE", raising=False)
    created = CliRunner().invoke(cli, ["keys", "create", "ops", "--file", str(keys_file)])
    assert created.exit_code == 0, created.output
    assert created.stdout.strip().startswith("lh_")  # the key alone on stdout, for scripts
    told = " ".join(created.stderr.split())
    assert str(keys_file) in told
    assert f"export LOREHOUSE_API_KEYS_FILE='{keys_file}'" in told
    # Already configured: it says the server reads that file when it starts.
    monkeypatch.setenv("LOREHOUSE_API_KEYS_FILE", str(keys_file))
    get_settings.cache_clear()
    try:
        again = CliRunner().invoke(cli, ["keys", "create", "ci"])
    finally:
        get_settings.cache_clear()
    assert again.exit_code == 0, again.output
    told = " ".join(again.stderr.split())
    assert "LOREHOUSE_API_KEYS_FILE" in told and "restart a running server" in told


def _refused(*args: str) -> str:
    """A command given bad input: a usage or input error of one or two lines, no traceback."""
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code in (1, 2), (result.exit_code, result.output)
    assert not isinstance(result.exception, Exception) or isinstance(
        result.exception, SystemExit
    ), result.exception
    assert "Traceback" not in result.output and "errors.pydantic.dev" not in result.output
    return " ".join(result.output.split())


def test_bad_input_to_each_command_is_refused_in_a_line_naming_what_is_allowed(
    in_sample: Path, tmp_path: Path
) -> None:
    keys_file = str(tmp_path / "keys.yaml")
    assert "name: " in _refused("keys", "create", "", "--file", keys_file)
    assert "key's name" in _refused("keys", "create", "a\nb", "--file", keys_file)
    assert "access group" in _refused("keys", "create", "ops", "-g", "", "--file", keys_file)
    assert not Path(keys_file).exists()  # nothing half-written

    said = _refused("docs", "--status", "bogus")
    assert "parsed, failed, pending" in said
    assert "parsed" in _run("docs", "--status", "PARSED")  # any case
    said = _refused("search", "leave", "--file-type", "exe")
    assert "pdf" in said and "epub" in said
    assert "p. " in _run("search", "leave", "--file-type", "PDF", "--top-k", "1")

    assert "100,000 characters; at most 2,000" in _refused("ask", "x" * 100_000)
    assert "at most 2,000" in _refused("search", "x" * 2001)
    assert "is empty" in _refused("ask", "   ")
    said = _refused("show", "a" * 100_000)
    assert len(said) < 200
    for reach in ("p03...p01", "p00...", "p09"):
        said = _refused("materialize", "--partitions", reach)
        assert "names no partition range of the 4 index partitions (p00 to p03)" in said

    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    for kind in ("retrieval", "answers"):
        assert "holds no cases" in _refused("eval", kind, "--golden", str(empty))
    wrong = tmp_path / "wrong.jsonl"
    wrong.write_text('{"question": 5}\n')
    said = _refused("eval", "answers", "--golden", str(wrong))
    assert ":1: " in said and "question: Input should be a valid string" in said
    said = _refused("eval", "feedback", "--out", str(tmp_path / "missing" / "fb.jsonl"))
    assert "No folder" in said and "missing" in said


def test_a_bad_setting_is_named_in_a_line_before_any_command_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LOREHOUSE_INDEX_PARTITIONS", "abc")
    monkeypatch.setenv("LOREHOUSE_WORKERS", "0")
    get_settings.cache_clear()
    try:
        said = _refused("docs")
    finally:
        get_settings.cache_clear()
    assert "LOREHOUSE_INDEX_PARTITIONS='abc': Input should be a valid integer" in said
    assert "LOREHOUSE_WORKERS='0': Input should be greater than or equal to 1" in said
    # Not the settings model's extra line for a default derived from a bad value.
    assert "default factory" not in said and "api_search_threads" not in said
