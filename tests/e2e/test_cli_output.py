"""What a newcomer reads from the CLI: search hits with readable sections, pages and ids to
follow up with, answers whose sources are named, a data folder found from anywhere, and what
readers and documents wrote printed as written, never as markup or terminal controls."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.main import app as cli
from lorehouse.settings import REPO_ROOT, default_data_dir, get_settings, unknown_variables
from lorehouse.stores.duckdb_store import DuckDBStore
from lorehouse.wiring import Lorehouse

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


def test_an_answer_asserting_no_lead_says_so_first_then_shows_the_passages(
    in_sample: Path,
) -> None:
    # The FAQ's own question is asserted; the same asked of primary caregivers, by default,
    # is not sure enough of its lead and shows the passages.
    asserted = _run("ask", "How many weeks of parental leave do I get?").splitlines()
    assert asserted[1].startswith("A (extractive): Primary caregivers: 20 weeks at full pay.")

    shown = _run("ask", LEAVE)
    lines = shown.splitlines()
    # The first line says nothing is asserted; no "A:" line a reader would take for the answer.
    assert lines[1] == "Not stated directly; the closest passages: (extractive)"
    assert not [line for line in lines if line.startswith("A ")]
    # Then the passages, as for a lead: each source, then what it says.
    assert lines[3].startswith("  [1] Employee Handbook (handbook/employee-handbook.pdf)")
    assert "The primary caregiver receives 20 weeks of parental leave" in shown
    assert "[2] Parental Leave FAQ (hr/parental-leave-faq.md)" in shown
    answer = json.loads(_run("ask", LEAVE, "--json"))
    assert (answer["answerable"], answer["asserted"]) == (True, False)


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
    assert "LOREHOUSE_API_KEYS_FILE" in told and "accepts the key within a second" in told


def _refused(*args: str, exit_code: int | None = None) -> str:
    """A command given bad input: a usage or input error of one or two lines, no traceback
    (exiting with `exit_code` where one is given)."""
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code in ((exit_code,) if exit_code else (1, 2)), (
        result.exit_code,
        result.output,
    )
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


def test_an_unknown_setting_is_named_with_the_closest_one_before_any_command_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Read by nothing, so the sample corpus would be indexed instead of the folder meant.
    monkeypatch.setenv("LOREHOUSE_SOURCE_URL", str(tmp_path))
    monkeypatch.setenv("LOREHOUSE_COLOUR", "blue")
    said = _refused("docs", exit_code=2)
    assert "LOREHOUSE_SOURCE_URL is not a setting; did you mean LOREHOUSE_SOURCE_URI?" in said
    assert "LOREHOUSE_COLOUR is not a setting; docs/configuration.md lists the settings" in said
    # In a .env file as well, which the settings read too.
    monkeypatch.delenv("LOREHOUSE_SOURCE_URL")
    monkeypatch.delenv("LOREHOUSE_COLOUR")
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text("LOREHOUSE_EMBED_MODE=openai/text-embedding-3-small\n")
    said = _refused("search", "leave", exit_code=2)
    assert (
        "LOREHOUSE_EMBED_MODE (in .env) is not a setting; did you mean LOREHOUSE_EMBED_MODEL?"
        in (said)
    )
    # The variables the test suite reads by name are no mistake, nor is its own environment.
    (tmp_path / ".env").unlink()
    monkeypatch.setenv("LOREHOUSE_TEST_SOMETHING", "1")
    monkeypatch.setenv("LOREHOUSE_SCREENSHOT_DIR", str(tmp_path))
    monkeypatch.setenv("LOREHOUSE_DATA_DIR", str(tmp_path))
    get_settings.cache_clear()
    try:
        listed = CliRunner().invoke(cli, ["docs"])
    finally:
        get_settings.cache_clear()
    assert listed.exit_code == 1 and "lorehouse materialize" in listed.output  # no store yet
    assert "not a setting" not in listed.output
    assert unknown_variables(os.environ, REPO_ROOT / ".env") == []


def _lorehouse(*args: str, **env: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """The installed command run as a person runs it, with an ephemeral Dagster instance;
    what it printed, and the seconds it took."""
    environment = {**os.environ, "COLUMNS": "100", **env}
    environment.pop("DAGSTER_HOME", None)
    started = time.monotonic()
    run = subprocess.run(
        [str(Path(sys.executable).parent / "lorehouse"), *args],
        cwd=REPO_ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return run, time.monotonic() - started


def test_a_missing_source_folder_is_one_line_naming_the_setting(tmp_path: Path) -> None:
    run, _ = _lorehouse(
        "materialize",
        LOREHOUSE_SOURCE_URI=str(tmp_path / "no-such-folder"),
        LOREHOUSE_DATA_DIR=str(tmp_path / "data"),
    )
    assert run.returncode == 2, run.stderr[-3000:]
    assert run.stderr.strip().count("\n") == 0, run.stderr[-3000:]  # one line, no Dagster log
    assert "LOREHOUSE_SOURCE_URI=" in run.stderr and "does not exist" in run.stderr
    assert "Set it to the folder of your documents" in run.stderr


def test_a_failure_inside_a_run_names_the_step_and_its_cause_in_a_few_lines(
    tmp_path: Path,
) -> None:
    settings = {
        "LOREHOUSE_DATA_DIR": str(tmp_path / "data"),
        "LOREHOUSE_EVAL_GOLDEN_SET": str(tmp_path / "missing.jsonl"),
    }
    run, _ = _lorehouse("materialize", "--select", "retrieval_eval", **settings)
    assert run.returncode == 1
    said = run.stderr.strip().splitlines()
    assert len(said) <= 5, run.stderr[-3000:]
    assert "Stack Trace" not in run.stderr and "BetaWarning" not in run.stderr
    assert any(
        line.startswith("retrieval_eval failed: FileNotFoundError: [Errno 2] No such file")
        and "missing.jsonl" in line
        for line in said
    ), said
    assert "lorehouse --debug materialize" in said[-1]
    # The stack, for whoever needs it.
    debugged, _ = _lorehouse("--debug", "materialize", "--select", "retrieval_eval", **settings)
    assert debugged.returncode == 1
    assert "Stack Trace" in debugged.stderr and "in retrieval_eval" in debugged.stderr


def test_an_empty_source_says_so_at_once_and_skips_the_evals(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    run, seconds = _lorehouse(
        "materialize",
        LOREHOUSE_SOURCE_URI=str(tmp_path / "empty"),
        LOREHOUSE_DATA_DIR=str(tmp_path / "data"),
    )
    assert run.returncode == 2, run.stderr[-3000:]
    # The inventory says it as it finds it, and the evals do not wait out their retries.
    empty = f"raw_documents - WARNING: the source {tmp_path / 'empty'} has no documents"
    assert empty in run.stderr
    assert "answer_eval skipped: no document is indexed" in run.stderr
    # A stage's line is its time, its step and its message; the run's id is said once.
    stage_lines = [line for line in run.stderr.splitlines() if " - " in line]
    assert stage_lines and all(re.match(r"\d\d:\d\d:\d\d [a-z_]+ - ", x) for x in stage_lines)
    run_ids = set(
        re.findall(
            r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", run.stdout + run.stderr
        )
    )
    assert len(run_ids) == 1 and (run.stdout + run.stderr).count(run_ids.pop()) == 1
    assert " failed" not in run.stderr and "FAILED" not in run.stderr, run.stderr[-3000:]
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith(f"The source {tmp_path / 'empty'} has no documents")
    assert "LOREHOUSE_SOURCE_URI" in last
    assert seconds < 60


def test_an_error_no_command_expected_is_one_line_and_its_stack_under_debug(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "lorehouse.duckdb").touch()
    monkeypatch.setenv("LOREHOUSE_DATA_DIR", str(tmp_path))

    def unreadable(*_: object, **__: object) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(Lorehouse, "feature_store", unreadable)
    get_settings.cache_clear()
    try:
        said = _refused("docs", exit_code=1)
        debugged = CliRunner().invoke(cli, ["--debug", "docs"])
    finally:
        get_settings.cache_clear()
    assert said == (
        "OSError: [Errno 5] Input/output error (`lorehouse --debug ...` prints where it happened)"
    )
    assert isinstance(debugged.exception, OSError)  # raised, so Python prints its stack


def test_keys_are_listed_without_their_secret_and_revoked_by_name(tmp_path: Path) -> None:
    keys_file = str(tmp_path / "keys.yaml")
    created = [
        CliRunner().invoke(cli, ["keys", "create", name, *groups, "--file", keys_file])
        for name, groups in (("ops", ["-g", "security", "-g", "hr"]), ("reader", []))
    ]
    assert all(result.exit_code == 0 for result in created), [r.output for r in created]
    listed = _run("keys", "list", "--file", keys_file)
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    assert re.search(rf"ops +│ security, hr +│ {today} \d\d:\d\d UTC", listed), listed
    assert re.search(rf"reader +│ public only +│ {today}", listed), listed
    stored = Path(keys_file).read_text()
    for result in created:
        assert result.stdout.strip() not in listed  # never the key
    assert not any(digest in listed for digest in re.findall(r"[0-9a-f]{64}", stored))

    revoked = CliRunner().invoke(cli, ["keys", "revoke", "ops", "--file", keys_file])
    assert revoked.exit_code == 0, revoked.output
    assert "refuses it within a second" in " ".join(revoked.output.split())
    listed = _run("keys", "list", "--file", keys_file)
    assert "reader" in listed and "ops" not in listed
    said = _refused("keys", "revoke", "ops", "--file", keys_file, exit_code=1)
    assert "no key named 'ops'" in said and "'reader'" in said


def test_the_command_keeps_compiled_bytecode_where_the_environment_says_not_to(
    tmp_path: Path,
) -> None:
    """PYTHONDONTWRITEBYTECODE would have every command compile Dagster, LanceDB and pandas
    from source again: twice the time of a warm search."""
    run, _ = _lorehouse(
        "docs", "--help", PYTHONDONTWRITEBYTECODE="1", PYTHONPYCACHEPREFIX=str(tmp_path)
    )
    assert run.returncode == 0, run.stderr[-2000:]
    written = {path.relative_to(tmp_path).as_posix() for path in tmp_path.rglob("*.pyc")}
    # With a cache prefix, Python keeps each module's bytecode under the prefix at its path.
    assert any(path.endswith("/cli/main.cpython-311.pyc") for path in written)
    assert any("/site-packages/typer/" in path for path in written)  # the libraries' too
