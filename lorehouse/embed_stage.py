"""The embedding stage: keep the LanceDB `chunks` table equal to the enriched chunks in DuckDB.

Only text the current model has not embedded before is sent to the model (keyed by a hash of
the model name and the text), rows whose content did not change are not rewritten at all, and
a different model rebuilds the whole table in one commit instead of mixing vector spaces.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa

from lorehouse.embedding_providers import Embedder
from lorehouse.stores.duckdb_store import DuckDBStore
from lorehouse.stores.lance_index import (
    ChunkIndex,
    IndexState,
    LanceTable,
    chunk_schema,
    document_schema,
)

ProgressCallback = Callable[[int, int], None]

# The stored columns come from the table schemas; the stage adds the two hashes and the vector.
_ADDED_BY_STAGE = {"embed_key", "row_hash", "vector"}
_CHUNK_COLUMNS = [n for n in chunk_schema(1, "").names if n not in _ADDED_BY_STAGE]
_DOCUMENT_COLUMNS = [n for n in document_schema(1, "").names if n not in _ADDED_BY_STAGE]


@dataclass
class EmbedReport:
    """What one run of the stage did, for asset metadata and benchmarks."""

    model: str
    dimension: int | None
    chunks: int = 0
    embedded: int = 0
    reused_vectors: int = 0
    rows_written: int = 0
    rows_deleted: int = 0
    rebuilt: bool = False
    documents: int = 0
    documents_embedded: int = 0
    embed_seconds: float = 0.0
    chunk_embed_seconds: float = 0.0
    seconds: float = 0.0
    indexes: list[IndexState] = field(default_factory=list)

    @property
    def chunks_per_second(self) -> float:
        """Chunk texts per second of model calls (0 when nothing needed embedding)."""
        seconds = self.chunk_embed_seconds
        return self.embedded / seconds if seconds > 0 else 0.0


def enriched_text(title: str | None, summary: str | None, faqs: list, keywords: list) -> str:
    """What BM25 sees beside the chunk itself: its document's title and its enrichment.

    Questions users ask and the FAQs written for a chunk share words the chunk may not use,
    which is why Uber's design searches this metadata alongside the text.
    """
    parts = [title or "", summary or "", "\n".join(faqs), ", ".join(keywords)]
    return "\n".join(part for part in parts if part.strip())


def embed_key(model: str, text: str) -> str:
    """Identifies a vector: the same text under the same model always has the same vector."""
    return hashlib.sha256(f"{model}\x00{text}".encode()).hexdigest()[:32]


def index_rows(chunks: pd.DataFrame, model: str) -> pd.DataFrame:
    """The stored columns of every chunk, with its embed key and a hash of its row content."""
    frame = chunks.copy()
    frame["heading_path"] = frame["heading_path"].map(list)
    frame["acl"] = frame["acl"].map(list)
    frame["text_enriched"] = [
        enriched_text(title, summary, list(faqs), list(keywords))
        for title, summary, faqs, keywords in zip(
            frame["title"], frame["summary"], frame["faqs"], frame["keywords"], strict=True
        )
    ]
    frame = frame[_CHUNK_COLUMNS]
    frame["page_start"] = frame["page_start"].astype("Int32")
    frame["page_end"] = frame["page_end"].astype("Int32")
    frame["position"] = frame["position"].astype("int32")
    return keyed_rows(frame, "text_embed", model)


def document_rows(documents: pd.DataFrame, model: str) -> pd.DataFrame:
    """Each document's profile: title, summary and FAQs, embedded as one text."""
    frame = documents.copy()
    frame["acl"] = frame["acl"].map(list)
    frame["faqs"] = frame["faqs"].map(list)
    frame["profile_text"] = [
        enriched_text(title, summary, faqs, [])
        for title, summary, faqs in zip(
            frame["title"], frame["summary"], frame["faqs"], strict=True
        )
    ]
    return keyed_rows(frame[_DOCUMENT_COLUMNS], "profile_text", model)


def keyed_rows(frame: pd.DataFrame, text_column: str, model: str) -> pd.DataFrame:
    """Adds the embed key of the embedded text and a hash of the whole stored row."""
    columns = list(frame.columns)
    frame = frame.copy()
    frame["embed_key"] = [embed_key(model, text) for text in frame[text_column]]
    frame["row_hash"] = [
        hashlib.sha256(
            json.dumps([_plain(row[c]) for c in columns], default=str).encode()
        ).hexdigest()[:32]
        for row in frame.to_dict("records")
    ]
    return frame.reset_index(drop=True)


def _plain(value: object) -> object:
    return None if value is pd.NA else value


def run_embedding(
    store: DuckDBStore,
    index: ChunkIndex,
    embedder: Embedder,
    batch_size: int = 64,
    on_progress: ProgressCallback | None = None,
) -> EmbedReport:
    """Brings the LanceDB chunk and document tables in line with DuckDB; returns what it did."""
    started = time.perf_counter()
    model = embedder.name
    report = EmbedReport(model=model, dimension=getattr(embedder, "dimension", None))
    chunks = index_rows(store.chunks_for_index(), model)
    report.chunks = len(chunks)
    outcome = sync_table(
        index, chunks, "text_embed", chunk_schema, embedder, batch_size, report, on_progress
    )
    report.embedded = outcome.embedded
    report.reused_vectors = outcome.reused
    report.rows_written = outcome.written
    report.rows_deleted = outcome.deleted
    report.rebuilt = outcome.rebuilt
    report.chunk_embed_seconds = report.embed_seconds

    documents = document_rows(store.documents_for_index(), model)
    report.documents = len(documents)
    outcome = sync_table(
        index.documents(), documents, "profile_text", document_schema, embedder, batch_size, report
    )
    report.documents_embedded = outcome.embedded
    if index.exists():
        report.indexes = index.index_state()
    report.seconds = time.perf_counter() - started
    return report


@dataclass
class SyncOutcome:
    embedded: int = 0
    reused: int = 0
    written: int = 0
    deleted: int = 0
    rebuilt: bool = False


def sync_table(
    table: LanceTable,
    rows: pd.DataFrame,
    text_column: str,
    schema_for: Callable[[int, str], pa.Schema],
    embedder: Embedder,
    batch_size: int,
    report: EmbedReport,
    on_progress: ProgressCallback | None = None,
) -> SyncOutcome:
    """Makes `table` hold exactly `rows`, embedding only text it has no vector for.

    `rows` carry the table's key column, `embed_key` and `row_hash` (see `keyed_rows`).
    """
    model = embedder.name
    outcome = SyncOutcome()
    rebuild = table.exists() and not table.is_current(model)
    stored = {} if rebuild else table.stored_keys()
    key = table.key_column
    is_changed = [
        stored.get(row_key, ("", ""))[1] != row_hash
        for row_key, row_hash in zip(rows[key], rows["row_hash"], strict=True)
    ]
    changed = rows[is_changed].reset_index(drop=True)
    stale = sorted(set(stored) - set(rows[key]))

    known = {} if rebuild else table.vectors_for(sorted(set(changed["embed_key"])))
    missing = sorted(set(changed["embed_key"]) - set(known))
    text_by_key = dict(zip(changed["embed_key"], changed[text_column], strict=True))
    fresh = _embed(embedder, [text_by_key[k] for k in missing], batch_size, report, on_progress)
    vectors = {**known, **dict(zip(missing, fresh, strict=True))}
    outcome.embedded = len(missing)
    newly_embedded = set(missing)
    outcome.reused = sum(k not in newly_embedded for k in changed["embed_key"])

    dimension = _dimension(vectors, report.dimension, table, rebuild)
    report.dimension = report.dimension or dimension
    if dimension is None:  # nothing stored, nothing to store, and no way to know the width
        return outcome
    schema = schema_for(dimension, model)
    if rebuild:
        table.replace_all(_arrow_rows(rows, vectors, schema))
        outcome.rebuilt = True
        outcome.written = len(rows)
    else:
        table.upsert(_arrow_rows(changed, vectors, schema), stale)
        outcome.written = len(changed)
        outcome.deleted = len(stale)
    table.refresh_indexes()
    return outcome


def _embed(
    embedder: Embedder,
    texts: list[str],
    batch_size: int,
    report: EmbedReport,
    on_progress: ProgressCallback | None,
) -> list[np.ndarray]:
    """Embeds in slices so progress is reported while a large corpus is being embedded."""
    vectors: list[np.ndarray] = []
    slice_size = max(batch_size * 8, 256)
    for start in range(0, len(texts), slice_size):
        began = time.perf_counter()
        part = embedder.embed(texts[start : start + slice_size], batch_size=batch_size)
        report.embed_seconds += time.perf_counter() - began
        vectors.extend(part)
        if on_progress:
            on_progress(min(start + slice_size, len(texts)), len(texts))
    return vectors


def _dimension(
    vectors: dict[str, np.ndarray], declared: int | None, table: LanceTable, rebuild: bool
) -> int | None:
    if vectors:
        return len(next(iter(vectors.values())))
    if table.exists() and not rebuild:
        return table.embedding_model()[1]
    return declared


def _arrow_rows(frame: pd.DataFrame, vectors: dict[str, np.ndarray], schema: pa.Schema) -> pa.Table:
    dimension = schema.field("vector").type.list_size
    matrix = (
        np.vstack([vectors[key] for key in frame["embed_key"]]).astype(np.float32)
        if len(frame)
        else np.empty((0, dimension), dtype=np.float32)
    )
    if matrix.shape[1] != dimension:
        raise ValueError(f"vectors have {matrix.shape[1]} dimensions; the table holds {dimension}")
    columns = {
        name: pa.array(frame[name].tolist(), type=schema.field(name).type)
        for name in schema.names
        if name != "vector"
    }
    columns["vector"] = pa.FixedSizeListArray.from_arrays(
        pa.array(matrix.reshape(-1), pa.float32()), dimension
    )
    return pa.table(columns, schema=schema)
