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
    #: Documents whose chunks took new access groups, and nothing else.
    documents_relabeled: int = 0
    chunks_written: int = 0
    table_chunks_written: int = 0
    token_counts: list[int] = field(default_factory=list)
    seconds: float = 0.0

    def absorb(self, other: ChunkReport) -> None:
        """Adds another run's counts (another partition's), as one report of both."""
        self.documents_chunked += other.documents_chunked
        self.documents_skipped += other.documents_skipped
        self.documents_dropped += other.documents_dropped
        self.documents_relabeled += other.documents_relabeled
        self.chunks_written += other.chunks_written
        self.table_chunks_written += other.table_chunks_written
        self.token_counts.extend(other.token_counts)
        self.seconds += other.seconds


def run_chunking(
    store: DuckDBStore,
    chunker: Chunker,
    on_progress: ProgressCallback | None = None,
    batch_size: int = 100,
) -> ChunkReport:
    """Chunks new and changed parsed documents and drops chunks of documents that left.

    `batch_size` documents are held at a time, read over one connection and written in one
    transaction: opening the store per document or writing in small batches cost more than
    chunking itself.
    """
    started = time.perf_counter()
    report = ChunkReport()
    report.documents_dropped = store.drop_unparsed_chunks()
    report.documents_relabeled = store.relabel_chunks()
    pending = store.to_chunk(chunker.version)
    report.documents_skipped = store.row_count("documents_parsed") - pending.num_rows
    done = 0
    # A batch's documents are read together and its chunks written in one transaction: one
    # connection each way per batch, not one per document.
    for batch in _batches_of(pending, batch_size):
        documents = store.parsed_documents([doc_id for doc_id, _, _ in batch])
        batch_ids: list[str] = []
        rows: list[dict] = []
        chunkless: dict[str, str] = {}
        for doc_id, fingerprint, acl in batch:
            done += 1
            document = documents.get(doc_id)
            if document is None:  # removed between listing and reading
                continue
            chunks = chunker.chunk(document, acl)
            rows.extend(_row(chunk, fingerprint) for chunk in chunks)
            if not chunks:
                chunkless[doc_id] = fingerprint
            batch_ids.append(doc_id)
            report.documents_chunked += 1
            report.chunks_written += len(chunks)
            report.table_chunks_written += sum(chunk.is_table for chunk in chunks)
            report.token_counts.extend(chunk.token_count for chunk in chunks)
            if on_progress is not None:
                on_progress(done, pending.num_rows)
        if batch_ids:
            store.replace_chunks(batch_ids, chunk_frame(rows), chunkless)
    report.seconds = time.perf_counter() - started
    return report


def _batches_of(pending: pa.Table, size: int) -> Iterator[list[tuple[str, str, list[str]]]]:
    """(doc_id, fingerprint, acl) of the rows, `size` at a time, turned into Python a batch
    at a time."""
    for batch in pending.to_batches(max_chunksize=size):
        columns = [batch.column(name).to_pylist() for name in ("doc_id", "fingerprint", "acl")]
        yield list(zip(*columns, strict=True))


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
    "language",
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
        "language": chunk.language,
    }
