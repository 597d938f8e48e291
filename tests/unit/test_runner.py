"""The parse pool: a hanging or crashing parser costs one file, never the run."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lorehouse.models import DocumentFailure, FailureReason, FileType, ParsedDocument
from lorehouse.parsing import registry
from lorehouse.parsing.registry import ParseOptions, ParseOutput, parser_for, register_parser
from lorehouse.parsing.runner import ParseJob, ParseLimits, parse_many
from lorehouse.settings import REPO_ROOT
from lorehouse.stages.parse import documents_to_parse, parser_versions
from lorehouse.stores.duckdb_store import DuckDBStore
from tests.conftest import raw_document_for


@pytest.fixture
def misbehaving_text_parser() -> Iterator[None]:
    """Swaps the plain-text parser for one that hangs, dies or balloons when told to."""
    original = parser_for(FileType.TEXT)
    assert original is not None

    @register_parser(file_type="txt", name="misbehaving", version="test")
    def misbehave(data: bytes, rel_path: str, options: ParseOptions) -> ParseOutput:
        if b"hang" in data:
            time.sleep(60)
        if data.startswith(b"slow"):
            time.sleep(3)
        if b"crash" in data:
            os._exit(3)  # what a segfault in a native library looks like from outside
        if b"balloon" in data:
            held = [bytearray(64 * 1024 * 1024) for _ in range(64)]  # 4 GiB, touched
            return ParseOutput(
                builder=original.function(data, rel_path, options).builder,
                warnings=[str(len(held))],
            )
        return original.function(data, rel_path, options)

    yield
    registry._PARSERS[FileType.TEXT] = original


def _jobs(paths: list[Path]) -> list[ParseJob]:
    return [
        ParseJob(document=raw_document_for(p, p.parent), load=lambda p=p: p.read_bytes())
        for p in paths
    ]


@pytest.mark.usefixtures("misbehaving_text_parser")
def test_hanging_and_crashing_files_fail_alone(tmp_path: Path) -> None:
    files = {
        "hang.txt": "hang forever",
        "crash.txt": "crash now",
        "balloon.txt": "balloon to 4 GiB",
        "fine.md": "# Fine\n\nA good file.\n",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    outcomes: list[ParsedDocument | DocumentFailure] = []
    started = time.monotonic()
    parse_many(
        _jobs([tmp_path / n for n in files]),
        ParseLimits(workers=2, timeout_seconds=2, max_file_bytes=10_000, memory_mb=512),
        on_outcome=outcomes.append,
    )
    assert time.monotonic() - started < 30
    by_doc = {o.doc_id: o for o in outcomes}
    reasons = {
        name: getattr(by_doc[raw_document_for(tmp_path / name, tmp_path).doc_id], "reason", None)
        for name in files
    }
    assert reasons == {
        "hang.txt": FailureReason.TIMEOUT,
        "crash.txt": FailureReason.CORRUPT,
        "balloon.txt": FailureReason.TOO_LARGE,
        "fine.md": None,
    }


@pytest.mark.usefixtures("misbehaving_text_parser")
def test_a_large_file_gets_more_time_than_a_small_one(tmp_path: Path) -> None:
    """Both files sleep 3 s before parsing; the limit is 1 s plus 120 s per MB: the 264 KB
    report gets 33 s and finishes (3 s asleep, then ~9 s idle for spaCy's import in a fresh
    worker and the parse, more on a busy 2-core machine), the few bytes that take as long
    are cut off, and the failure says what the limit was."""
    (tmp_path / "report.txt").write_text("slow\n" + "Revenue grew in every segment.\n" * 8_500)
    (tmp_path / "note.txt").write_text("slow note")
    outcomes: list[ParsedDocument | DocumentFailure] = []
    limits = ParseLimits(
        workers=2, timeout_seconds=1, timeout_seconds_per_mb=120, max_file_bytes=2**21
    )
    parse_many(_jobs([tmp_path / "report.txt", tmp_path / "note.txt"]), limits, outcomes.append)
    by_name = {
        raw_document_for(tmp_path / n, tmp_path).doc_id: n for n in ("report.txt", "note.txt")
    }
    results = {by_name[o.doc_id]: o for o in outcomes}
    assert isinstance(results["report.txt"], ParsedDocument)
    note = results["note.txt"]
    assert isinstance(note, DocumentFailure)
    assert note.reason is FailureReason.TIMEOUT
    assert note.detail == "parsing took longer than 1 s"
    assert limits.timeout_for(2_436_166) == pytest.approx(1 + 120 * 2.323, abs=0.05)


def test_bytes_other_than_those_the_inventory_hashed_are_not_parsed(tmp_path: Path) -> None:
    (tmp_path / "policy.md").write_text("# Policy\n\nPublic text.\n")
    (tmp_path / "same.md").write_text("# Same\n\nUnchanged.\n")
    jobs = _jobs([tmp_path / "policy.md", tmp_path / "same.md"])
    # Between the inventory (which hashed and labelled the file) and the parse.
    (tmp_path / "policy.md").write_text("# Policy\n\nText for the board only.\n")
    outcomes: list[ParsedDocument | DocumentFailure] = []
    limits = ParseLimits(workers=1, timeout_seconds=30, max_file_bytes=10_000)
    parse_many(jobs, limits, outcomes.append)
    by_path = {o.doc_id: o for o in outcomes}
    changed = by_path[jobs[0].document.doc_id]
    assert isinstance(changed, DocumentFailure) and changed.reason is FailureReason.CHANGED
    assert isinstance(by_path[jobs[1].document.doc_id], ParsedDocument)


def test_parsing_in_a_process_that_loaded_lancedb_warns_nobody(tmp_path: Path) -> None:
    """The parse pool forks a process that has loaded LanceDB and Lance (a materialization
    has): lancedb warns in each forked child and Lance before each fork, on the terminal the
    user watches. The workers never use either, so both warnings are kept from the user."""
    (tmp_path / "fine.md").write_text("# Fine\n\nA good file.\n")
    script = (
        "import sys, lance, lancedb\n"
        "from pathlib import Path\n"
        "from lorehouse.parsing.runner import ParseJob, ParseLimits, parse_many\n"
        "from tests.conftest import raw_document_for\n"
        "path = Path(sys.argv[1])\n"
        "job = ParseJob(document=raw_document_for(path, path.parent), load=path.read_bytes)\n"
        "parse_many([job], ParseLimits(workers=2, timeout_seconds=30, max_file_bytes=10_000),"
        " on_outcome=lambda outcome: print(type(outcome).__name__))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "fine.md")],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["ParsedDocument"]
    assert "lancedb fork" not in run.stderr, run.stderr
    assert "fork-safe" not in run.stderr, run.stderr


@pytest.mark.usefixtures("misbehaving_text_parser")
def test_a_timed_out_file_is_tried_again_on_the_next_run(tmp_path: Path) -> None:
    """A timeout says how busy the machine was, not that the file is broken: the next run
    parses it again (with a limit it fits in), while a file that failed for a reason of its
    own is not retried until it changes."""
    from lorehouse.sources import LocalFolderSource
    from lorehouse.stages.inventory import run_inventory
    from lorehouse.stages.parse import run_parse
    from lorehouse.stores import DuckDBStore

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "report.txt").write_text("slow report\n")
    (corpus / "broken.txt").write_text("crash now")
    store = DuckDBStore(tmp_path / "lorehouse.duckdb")
    source = LocalFolderSource(corpus)
    run_inventory(source, store, max_file_bytes=10_000)
    first = run_parse(
        source, store, ParseLimits(workers=1, timeout_seconds=1, max_file_bytes=10**4)
    )
    assert first.failed_by_reason == {"timeout": 1, "corrupt": 1}
    second = run_parse(
        source, store, ParseLimits(workers=1, timeout_seconds=30, max_file_bytes=10**4)
    )
    report = raw_document_for(corpus / "report.txt", corpus).doc_id
    assert (second.parsed, second.failed_count, second.failed) == (1, 0, [])
    assert second.slowest_first()[0][1] == "report.txt"
    assert report in set(store.table("documents_parsed", columns=["doc_id"])["doc_id"])


def test_documents_to_parse_are_read_a_page_at_a_time(stage_tables_store: DuckDBStore) -> None:
    """Pages cover every changed document once, by path, and skip those parsed with the
    current parser version (or failed with it, unless by a timeout)."""
    versions = parser_versions(ParseOptions())
    with stage_tables_store.connect() as connection:
        connection.execute(
            "UPDATE documents_parsed SET parser_version = ? WHERE doc_id IN ('doc-1', 'doc-2')",
            [versions["md"]],
        )
        connection.execute(
            "INSERT INTO documents_failed SELECT doc_id, 'parse', rel_path, content_sha256, ?, "
            "reason, 'x', now() FROM documents_raw, (VALUES ('corrupt'), ('timeout')) r(reason) "
            "WHERE doc_id = CASE reason WHEN 'corrupt' THEN 'doc-3' ELSE 'doc-4' END",
            [versions["md"]],
        )
    doc_ids = stage_tables_store.to_parse(versions)
    paged = [d.rel_path for d in documents_to_parse(stage_tables_store, doc_ids, page=4)]
    expected = sorted(f"p/{i}.md" for i in range(12) if i not in (1, 2, 3))
    assert paged == expected  # doc-4 timed out: tried again
    assert (len(doc_ids), stage_tables_store.row_count("documents_raw") - len(doc_ids)) == (9, 3)
