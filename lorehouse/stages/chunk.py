"""The chunking stage as a plain function: re-chunk exactly the documents that changed.

A document is re-chunked when its bytes, its parser version or the chunker's own version
(including the token limit) changed, so a nightly run over an unchanged corpus does no work
and ids of unchanged chunks never move.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pandas as pd
import pyarrow as pa

from lorehouse.chunking import Chunk, Chunker
from lorehouse.stages.progress import ProgressCallback
from lorehouse.stores.duckdb_store import DuckDBStore


@dataclass
class ChunkReport:
    """What one chunking run did, for asset metadata and the CLI."""

    documents_chunked: int = 0
    documents_skipped: int = 0
    documents_dropped: int = 0
    chunks_written: int = 0
    table_chunks_written: int = 0
    token_counts: list[int] = field(default_factory=list)
    seconds: float = 0.0


def run_chunking(
    store: DuckDBStore,
    chunker: Chunker,
    on_progress: ProgressCallback | None = None,
    batch_size: int = 25,
) -> ChunkReport:
    """Chunks new and changed parsed documents and drops chunks of documents that left."""
    started = time.perf_counter()
    report = ChunkReport()
    report.documents_dropped = store.drop_unparsed_chunks()
    pending = store.to_chunk(chunker.version)
    report.documents_skipped = store.row_count("documents_parsed") - pending.num_rows
    batch_ids: list[str] = []
    rows: list[dict] = []
    for index, (doc_id, fingerprint, acl) in enumerate(_rows_of(pending), start=1):
        document = store.parsed_document(doc_id)
        if document is None:  # removed between listing and reading
            continue
        chunks = chunker.chunk(document, acl)
        rows.extend(_row(chunk, fingerprint) for chunk in chunks)
        batch_ids.append(doc_id)
        report.documents_chunked += 1
        report.chunks_written += len(chunks)
        report.table_chunks_written += sum(chunk.is_table for chunk in chunks)
        report.token_counts.extend(chunk.token_count for chunk in chunks)
        if len(batch_ids) >= batch_size:
            store.replace_chunks(batch_ids, chunk_frame(rows))
            batch_ids, rows = [], []
        if on_progress is not None:
            on_progress(index, pending.num_rows)
    if batch_ids:
        store.replace_chunks(batch_ids, chunk_frame(rows))
    report.seconds = time.perf_counter() - started
    return report


def _rows_of(pending: pa.Table, page: int = 1000) -> Iterator[tuple[str, str, list[str]]]:
    """(doc_id, fingerprint, acl) of each row, turned into Python a page at a time."""
    for batch in pending.to_batches(max_chunksize=page):
        columns = [batch.column(name).to_pylist() for name in ("doc_id", "fingerprint", "acl")]
        yield from zip(*columns, strict=True)


_COLUMNS = [
    "chunk_id",
    "doc_id",
    "position",
    "heading_path",
    "text_embed",
    "text_chat",
    "page_start",
    "page_end",
    "is_table",
    "token_count",
    "acl",
    "source_fingerprint",
]


def chunk_frame(rows: list[dict]) -> pd.DataFrame:
    """Rows as a frame with every column even when empty (documents with no chunks)."""
    return pd.DataFrame(rows, columns=_COLUMNS)


def _row(chunk: Chunk, fingerprint: str) -> dict:
    return {
        "chunk_id": chunk.chunk_id,
        "doc_id": chunk.doc_id,
        "position": chunk.position,
        "heading_path": list(chunk.heading_path),
        "text_embed": chunk.text_embed,
        "text_chat": chunk.text_chat,
        "page_start": chunk.page_start,
        "page_end": chunk.page_end,
        "is_table": chunk.is_table,
        "token_count": chunk.token_count,
        "acl": list(chunk.acl),
        "source_fingerprint": fingerprint,
    }
