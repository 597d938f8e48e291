"""Traditional RAG, reproduced side by side: fixed 1,000-character windows, vector search only.

Every retrieval chart shows Lorehouse's gain over this baseline, so it is built from the
same parsed documents and the same embedding model, in its own table: the gain is then the
retrieval's own.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import pandas as pd
import pyarrow as pa

from evals.metrics import RetrievedChunk
from lorehouse.embedding.base import Embedder
from lorehouse.search.filters import access_clause
from lorehouse.stages.embed import EmbedReport, keyed_rows, sync_table
from lorehouse.stores.duckdb_store import DuckDBStore
from lorehouse.stores.lance_index import LanceTable, table_metadata

WINDOW_CHARS = 1000
OVERLAP_CHARS = 200


def windows(text: str, size: int = WINDOW_CHARS, overlap: int = OVERLAP_CHARS) -> list[str]:
    """Fixed-size character windows, each starting `size - overlap` after the previous."""
    if size <= overlap:
        raise ValueError("the window must be longer than its overlap")
    step = size - overlap
    starts = range(0, max(1, len(text) - overlap), step)
    return [text[start : start + size] for start in starts if text[start : start + size].strip()]


def naive_schema(dimension: int, model: str) -> pa.Schema:
    return pa.schema(
        [
            pa.field("chunk_id", pa.string(), nullable=False),
            pa.field("doc_id", pa.string()),
            pa.field("rel_path", pa.string()),
            pa.field("position", pa.int32()),
            pa.field("acl", pa.list_(pa.string())),
            pa.field("text", pa.string()),
            pa.field("embed_key", pa.string()),
            pa.field("row_hash", pa.string()),
            pa.field("vector", pa.list_(pa.float32(), dimension)),
        ],
        metadata=table_metadata(dimension, model),
    )


class NaiveIndex(LanceTable):
    """The baseline's own LanceDB table, next to the real one."""

    name = "naive_chunks"
    key_column = "chunk_id"
    text_columns = ()
    scalar_indexes = ()


def build_naive_index(store: DuckDBStore, index: NaiveIndex, embedder: Embedder) -> int:
    """Windows every parsed document and embeds new windows; returns the window count."""
    rows = []
    for document in store.parsed_for_baseline().itertuples():
        for position, text in enumerate(windows(document.markdown)):
            digest = hashlib.sha256(f"{document.doc_id}:{position}:{text}".encode()).hexdigest()
            rows.append(
                {
                    "chunk_id": digest[:32],
                    "doc_id": document.doc_id,
                    "rel_path": document.rel_path,
                    "position": position,
                    "acl": list(document.acl),
                    "text": text,
                }
            )
    frame = pd.DataFrame(
        rows, columns=["chunk_id", "doc_id", "rel_path", "position", "acl", "text"]
    )
    frame["position"] = frame["position"].astype("int32")
    report = EmbedReport(model=embedder.name, dimension=getattr(embedder, "dimension", None))
    sync_table(
        index, keyed_rows(frame, "text", embedder.name), "text", naive_schema, embedder, 64, report
    )
    return len(frame)


def naive_search(
    index: NaiveIndex, embedder: Embedder, query: str, k: int, caller_groups: Sequence[str]
) -> list[RetrievedChunk]:
    """Top-k windows by cosine similarity, nothing else."""
    vector = embedder.embed([query])[0]
    rows = index.snapshot().vector_search(
        vector, access_clause(caller_groups), k, ["chunk_id", "rel_path", "position", "text"]
    )
    return [
        RetrievedChunk(row["chunk_id"], row["rel_path"], int(row["position"]), row["text"])
        for row in rows
    ]
