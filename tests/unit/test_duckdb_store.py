"""The DuckDB store: short connections that wait for another process's lock."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from lorehouse.chunking import Chunker
from lorehouse.embedding.minilm import default_token_counter
from lorehouse.stages.chunk import chunk_frame, run_chunking
from lorehouse.stores import DuckDBStore

_HOLD_LOCK = """
import sys, time, duckdb
connection = duckdb.connect(sys.argv[1])
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
connection.close()
"""


def test_a_second_process_waits_for_the_lock_instead_of_failing(tmp_path: Path) -> None:
    store = DuckDBStore(tmp_path / "lorehouse.duckdb")
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD_LOCK, str(store.path), "1.5"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        started = time.monotonic()
        assert store.document_statuses() == []
        assert time.monotonic() - started >= 0.5
    finally:
        holder.wait(timeout=30)


def test_a_document_that_now_has_no_chunks_loses_its_old_ones(tmp_path: Path) -> None:
    store = DuckDBStore(tmp_path / "lorehouse.duckdb")
    row = {
        "chunk_id": "c1",
        "doc_id": "d1",
        "position": 0,
        "heading_path": ["Title"],
        "text_embed": "Title\nText",
        "text_chat": "Title\n\nText",
        "page_start": 1,
        "page_end": 1,
        "is_table": False,
        "token_count": 5,
        "acl": [],
        "source_fingerprint": "f1",
    }
    store.replace_chunks(["d1"], chunk_frame([row]))
    assert store.row_count("chunks") == 1
    # Its Markdown became headings only: zero chunks must still replace the old ones.
    store.replace_chunks(["d1"], chunk_frame([]))
    assert store.row_count("chunks") == 0


def test_chunking_a_store_with_no_parsed_documents_empties_it_instead_of_failing(
    tmp_path: Path,
) -> None:
    # `lorehouse materialize --select chunks` on a fresh store, or a corpus whose every file
    # failed to parse: nothing is kept, and an empty list of ids must still compare as text.
    store = DuckDBStore(tmp_path / "lorehouse.duckdb")
    report = run_chunking(store, Chunker(256, default_token_counter().count))
    assert report.documents_dropped == 0
    assert store.row_count("chunks") == 0
    assert store.chunks_by_document([]) == []


def test_statuses_are_counted_and_filtered_in_the_store(stage_tables_store: DuckDBStore) -> None:
    """Checks and summaries count statuses in DuckDB and fetch only the few they show."""
    with stage_tables_store.connect() as connection:
        connection.execute("DELETE FROM documents_parsed WHERE doc_id IN ('doc-3', 'doc-4')")
        connection.execute(
            "INSERT INTO documents_failed VALUES ('doc-3', 'parse', 'p/3.md', 'x', '1', "
            "'timeout', 'took too long', now())"
        )
    assert stage_tables_store.status_counts() == {
        ("md", "parsed"): 10,
        ("md", "failed"): 1,
        ("md", "pending"): 1,
    }
    failed = stage_tables_store.document_statuses(status="failed")
    assert [(s.rel_path, s.reason, s.detail) for s in failed] == [
        ("p/3.md", "timeout", "took too long")
    ]
    assert [s.rel_path for s in stage_tables_store.document_statuses(status="pending")] == [
        "p/4.md"
    ]
    first = stage_tables_store.document_statuses(limit=3)
    assert [s.rel_path for s in first] == ["p/0.md", "p/1.md", "p/10.md"]
    assert len(stage_tables_store.document_statuses(status="parsed", limit=4)) == 4


def test_documents_to_chunk_and_chunks_to_drop_are_found_in_the_store(
    stage_tables_store: DuckDBStore,
) -> None:
    """Documents chunked from their current parse with this chunker are skipped; the chunks
    of a document no longer parsed are dropped, counted by document."""
    with stage_tables_store.connect() as connection:
        connection.execute(
            "UPDATE chunks SET source_fingerprint = p.content_sha256 || '|1|v7' "
            "FROM documents_parsed p WHERE chunks.doc_id = p.doc_id "
            "AND p.doc_id IN ('doc-0', 'doc-1', 'doc-2')"
        )
        connection.execute("DELETE FROM documents_parsed WHERE doc_id = 'doc-11'")
    assert stage_tables_store.drop_unparsed_chunks() == 1
    assert stage_tables_store.row_count("chunks") == 22
    pending = stage_tables_store.to_chunk("v7")
    assert pending["doc_id"].to_pylist() == sorted(f"doc-{i}" for i in range(3, 11))
    assert pending["fingerprint"][0].as_py().endswith("|1|v7")
    assert len(stage_tables_store.to_chunk("v8")) == 11  # a new chunker redoes every one


def test_a_document_cut_into_no_chunk_is_not_chunked_again_until_it_changes(
    stage_tables_store: DuckDBStore,
) -> None:
    """An empty page parses to Markdown with nothing to chunk. Before, having no chunk with
    its fingerprint, it was chunked again on every run, so no run ever found nothing to do."""
    with stage_tables_store.connect() as connection:
        connection.execute(
            "UPDATE documents_parsed SET markdown = CASE WHEN doc_id = 'doc-5' THEN '' "
            "ELSE '# Leave\n\nStaff of ' || doc_id || ' get 20 days of leave a year.' END"
        )
    chunker = Chunker(256, default_token_counter().count)
    first = run_chunking(stage_tables_store, chunker)
    assert (first.documents_chunked, first.chunks_written) == (12, 11)

    again = run_chunking(stage_tables_store, chunker)
    assert (again.documents_chunked, again.documents_skipped) == (0, 12)

    # A new parse of it (new content) is chunked again, and now yields a chunk.
    with stage_tables_store.connect() as connection:
        connection.execute(
            "UPDATE documents_parsed SET content_sha256 = 'new', "
            "markdown = '# Leave\n\nNow it says something.' WHERE doc_id = 'doc-5'"
        )
    edited = run_chunking(stage_tables_store, chunker)
    assert (edited.documents_chunked, edited.chunks_written) == (1, 1)
    assert run_chunking(stage_tables_store, chunker).documents_chunked == 0


def test_chunking_reads_and_writes_documents_a_batch_at_a_time(
    stage_tables_store: DuckDBStore,
) -> None:
    """Batches that do not divide the pending documents evenly still chunk each one once,
    from its own Markdown; a document asked for but gone is left out, not an error."""
    with stage_tables_store.connect() as connection:
        connection.execute(
            "UPDATE documents_parsed SET markdown = "
            "'# Leave ' || doc_id || E'\\n\\nStaff of ' || doc_id || ' get ' || "
            "replace(doc_id, 'doc-', '') || ' days of leave a year.'"
        )
    found = stage_tables_store.parsed_documents(["doc-3", "doc-404"])
    assert list(found) == ["doc-3"]
    assert "Staff of doc-3 get 3 days" in found["doc-3"].markdown

    report = run_chunking(
        stage_tables_store, Chunker(256, default_token_counter().count), batch_size=5
    )
    assert report.documents_chunked == 12
    with stage_tables_store.connect() as connection:
        rows = connection.execute(
            "SELECT doc_id, count(*), any_value(text_chat) FROM chunks GROUP BY doc_id"
        ).fetchall()
    assert len(rows) == 12
    for doc_id, count, text in rows:
        assert count == 1
        assert f"Staff of {doc_id} get {doc_id.removeprefix('doc-')} days" in text
