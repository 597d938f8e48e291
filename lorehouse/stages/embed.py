"""The embedding stage: keep the LanceDB `chunks` table equal to the enriched chunks in DuckDB.

Only text the current model has not embedded before is sent to the model (keyed by a hash of
the model name and the text), rows whose content did not change are not rewritten at all, and
a different model rebuilds the whole table in one commit instead of mixing vector spaces.

Longer than most modules because one sync keeps four tables in step with the chunks
(chunks, documents, sentence windows, token vectors), and each needs the same keyed
comparison, batching and resume after a crash.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa

from lorehouse.embedding.base import Embedder, EmbeddingFailure, embed_key
from lorehouse.search.token_vectors import CapturingEmbedder, PackedTokenEncoder, TokenEncoder
from lorehouse.stages.progress import ProgressCallback
from lorehouse.stores.duckdb_store import DuckDBStore
from lorehouse.stores.lance_index import (
    ChunkIndex,
    IndexState,
    LanceTable,
    StoredRow,
    TokenVectorIndex,
    chunk_schema,
    document_schema,
    sentence_schema,
    token_vector_schema,
)
from lorehouse.text import BREADCRUMB_SEPARATOR, sentences

#: Sentence vectors: each chunk also gets one vector per window of this many consecutive
#: sentences (its heading above them), a new window every SENTENCE_WINDOW_STRIDE sentences.
#: The vector ranking scores a chunk by its own vector or its best window, whichever is
#: closer to the query: a fact stated in one sentence of a long chunk is found by meaning.
SENTENCE_WINDOW = 2
SENTENCE_WINDOW_STRIDE = 2

# The stored columns come from the table schemas; the stage adds the two hashes and the vector.
_ADDED_BY_STAGE = {"embed_key", "row_hash", "vector"}
_CHUNK_COLUMNS = [n for n in chunk_schema(1, "").names if n not in _ADDED_BY_STAGE]
_DOCUMENT_COLUMNS = [n for n in document_schema(1, "").names if n not in _ADDED_BY_STAGE]
_SENTENCE_COLUMNS = [n for n in sentence_schema(1, "").names if n not in _ADDED_BY_STAGE]
_SENTENCE_INTEGER_COLUMNS = [
    f.name
    for f in sentence_schema(1, "")
    if f.name in _SENTENCE_COLUMNS and pa.types.is_integer(f.type)
]
#: The chunk columns a chunk's sentence windows are cut from or copy.
_WINDOW_SOURCE_COLUMNS = [
    *(c for c in _SENTENCE_COLUMNS if c not in ("sentence_id", "text_embed")),
    "title",
    "heading_path",
    "text_embed",
]
#: Bump when `sentence_windows` cuts differently: every chunk's windows are then cut again
#: (and rewritten; a window whose text did not change keeps its vector).
WINDOWS_VERSION = "1"


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
    sentences: int = 0
    sentences_embedded: int = 0
    #: Chunks with stored token vectors for late interaction, and how many were encoded now.
    token_vectors: int = 0
    token_vectors_embedded: int = 0
    #: Documents whose new rows could not be embedded this run (they keep their old rows).
    documents_not_embedded: list[str] = field(default_factory=list)
    provider_failure: str | None = None
    embed_seconds: float = 0.0
    chunk_embed_seconds: float = 0.0
    seconds: float = 0.0
    indexes: list[IndexState] = field(default_factory=list)
    #: Vector-index steps taken between batches (see LanceTable.index_new_vectors).
    index_steps: int = 0
    #: Vectors taken from the donor index (a seeded partition's) instead of the model.
    vectors_seeded: int = 0

    def absorb(self, other: EmbedReport) -> None:
        """Adds another run's counts (another partition's), as one report of both."""
        for name in (
            *("chunks", "embedded", "reused_vectors", "rows_written", "rows_deleted"),
            *("documents", "documents_embedded", "sentences", "sentences_embedded"),
            *("token_vectors", "token_vectors_embedded", "index_steps", "vectors_seeded"),
            *("embed_seconds", "chunk_embed_seconds", "seconds"),
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.rebuilt = self.rebuilt or other.rebuilt
        self.dimension = self.dimension or other.dimension
        self.documents_not_embedded.extend(other.documents_not_embedded)
        self.provider_failure = self.provider_failure or other.provider_failure

    @property
    def chunks_per_second(self) -> float:
        """Chunk texts per second of model calls (0 when nothing needed embedding)."""
        seconds = self.chunk_embed_seconds
        return self.embedded / seconds if seconds > 0 else 0.0


def enriched_text(title: str | None, summary: str | None, faqs: list, keywords: list) -> str:
    """What BM25 sees beside the chunk itself: its document's title and its enrichment.

    Questions users ask and the FAQs written for a chunk share words the chunk may not use,
    which is why this metadata is searched alongside the text.
    """
    parts = [title or "", summary or "", "\n".join(faqs), ", ".join(keywords)]
    return "\n".join(part for part in parts if part.strip())


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


def sentence_windows(
    text_embed: str,
    heading: str,
    window: int = SENTENCE_WINDOW,
    stride: int = SENTENCE_WINDOW_STRIDE,
) -> list[str]:
    """What is embedded for a chunk's sentences: its heading above `window` consecutive
    sentences, one window every `stride` sentences.

    The heading (breadcrumb, else the document's title) tells the model what a lone sentence
    is about ("Travel > Hotels" above "The limit is $250 a night."). A chunk whose sentences
    fit in one window gets none: its own vector already says the same.
    """
    first, _, rest = text_embed.partition("\n")
    found = sentences(rest if heading and first.strip() == heading.strip() else text_embed)
    if len(found) <= window:
        return []
    starts = range(0, len(found) - window + stride, stride)
    texts = [" ".join(found[start : start + window]) for start in starts]
    return [f"{heading}\n{text}" if heading else text for text in texts]


def window_source_hash(chunk: Mapping[str, object]) -> str:
    """A hash of what a chunk's sentence windows are cut from and copy, and of how they are
    cut: every window of the chunk carries it as its row hash."""
    source = [WINDOWS_VERSION, *(_plain(chunk.get(c)) for c in _WINDOW_SOURCE_COLUMNS)]
    return hashlib.sha256(json.dumps(source, default=str).encode()).hexdigest()[:32]


def sentence_rows(
    chunks: pd.DataFrame, model: str, stored: Mapping[str, StoredRow] | None = None
) -> pd.DataFrame:
    """The sentence windows of index rows (see `index_rows`), keyed like any embedded row.

    A window's row hash is its chunk's `window_source_hash`. A chunk whose stored windows
    (`stored`: the table's rows of these chunks' documents) all carry its current hash is not
    cut again: a document's windows are written in one commit, so every window it would cut
    is there, and those rows are listed by key and hashes only (unchanged rows are never
    rewritten). Cutting is what a run that finds nothing changed spent most on, in segtok's
    sentence splitter.
    """
    stored_by_chunk: dict[str, list[tuple[str, StoredRow]]] = defaultdict(list)
    for key, row in (stored or {}).items():
        stored_by_chunk[key.rpartition(":")[0]].append((key, row))
    records: list[dict] = []
    for chunk in chunks.to_dict("records"):
        source = window_source_hash(chunk)
        kept = stored_by_chunk.get(chunk["chunk_id"], [])
        if kept and all(row.row_hash == source for _, row in kept):
            records.extend(
                {
                    "sentence_id": key,
                    "chunk_id": chunk["chunk_id"],
                    "doc_id": row.doc_id,
                    "embed_key": row.embed_key,
                    "row_hash": row.row_hash,
                }
                for key, row in kept
            )
            continue
        path = list(chunk["heading_path"] if chunk["heading_path"] is not None else [])
        heading = BREADCRUMB_SEPARATOR.join(path) if path else chunk["title"] or ""
        for number, text in enumerate(sentence_windows(chunk["text_embed"], heading)):
            records.append(
                {
                    **{c: chunk[c] for c in _SENTENCE_COLUMNS if c in chunk},
                    "sentence_id": f"{chunk['chunk_id']}:{number}",
                    "text_embed": text,
                    "embed_key": embed_key(model, text),
                    "row_hash": source,
                }
            )
    frame = pd.DataFrame(records, columns=[*_SENTENCE_COLUMNS, "embed_key", "row_hash"])
    # Kept windows carry no page columns, and pandas fills a column of missing values and
    # None as float NaN; the pages of the windows cut now stay nullable integers.
    return frame.astype(dict.fromkeys(_SENTENCE_INTEGER_COLUMNS, "Int32"))


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
    token_encoder: TokenEncoder | None = None,
    batch_documents: int = 500,
    donor: ChunkIndex | None = None,
    sentence_windows: bool = True,
) -> EmbedReport:
    """Brings the LanceDB chunk and document tables in line with DuckDB; returns what it did.

    With a `token_encoder`, each chunk's token vectors are stored too, for late interaction.
    Without `sentence_windows` no window is embedded, and the windows stored are deleted.
    A `donor` index (the shared one, for a partition seeded from the shared store) gives the
    vectors it holds for the same model and text before the model is asked for any.
    Documents are read, compared with what the index holds and written `batch_documents` at a
    time, so a run's memory depends on the batch, not on the corpus. A table to be rebuilt
    (a new model or layout) is rebuilt in one commit, from every document at once.
    """
    started = time.perf_counter()
    model = embedder.name
    report = EmbedReport(model=model, dimension=getattr(embedder, "dimension", None))
    doc_ids = store.document_ids_for_index()
    tables = [index, index.sentences(), index.documents()]
    if token_encoder is not None:
        tables.append(index.token_vectors())
    donors = _donor_tables(donor, model, token_encoder)
    if any(
        table.exists() and not table.is_current(_model_of(table, model, token_encoder))
        for table in tables
    ):
        batches = [None]  # every document in one pass: the rebuild is one commit
    else:
        batches = [
            doc_ids[start : start + batch_documents]
            for start in range(0, len(doc_ids), batch_documents)
        ]
    for number, batch in enumerate(batches):
        if report.provider_failure:
            # The provider is down: the documents of the batches left keep their rows.
            report.documents_not_embedded.extend(batch or [])
            continue
        chunks = index_rows(store.chunks_for_index(batch), model)
        report.chunks += len(chunks)
        chunk_embedder, captured = joint_pass(embedder, token_encoder)
        outcome = sync_table(
            index,
            chunks,
            "text_embed",
            chunk_schema,
            chunk_embedder,
            batch_size,
            report,
            _batch_progress(on_progress, number, len(batches)),
            scope=batch,
            donor=donors.get("chunks"),
        )
        report.embedded += outcome.embedded
        report.reused_vectors += outcome.reused
        report.rows_written += outcome.written
        report.rows_deleted += outcome.deleted
        report.rebuilt = report.rebuilt or outcome.rebuilt
        report.documents_not_embedded.extend(sorted(outcome.not_embedded))
        report.provider_failure = outcome.failure
        report.chunk_embed_seconds = report.embed_seconds
        sync_sentences(
            index,
            chunks,
            embedder,
            batch_size,
            report,
            None,
            batch,
            donors.get("sentences"),
            windows=sentence_windows,
        )
        sync_token_vectors(
            index,
            chunks,
            token_encoder,
            batch_size,
            report,
            None,
            captured,
            batch,
            donors.get("token_vectors"),
        )
        documents = document_rows(store.documents_for_index(batch), model)
        report.documents += len(documents)
        outcome = sync_table(
            index.documents(),
            documents,
            "profile_text",
            document_schema,
            embedder,
            batch_size,
            report,
            scope=batch,
            donor=donors.get("documents"),
        )
        report.documents_embedded += outcome.embedded
        report.provider_failure = report.provider_failure or outcome.failure
        for table in tables:
            report.index_steps += table.index_new_vectors()
    if not report.provider_failure:
        # Rows of documents that are gone (removed, or now failing to parse).
        report.rows_deleted += index.delete_documents_except(doc_ids)
        for table in tables[1:]:
            table.delete_documents_except(doc_ids)
    for table in tables:
        if table.exists():
            table.refresh_indexes()
    if index.exists():
        report.indexes = index.index_state()
    report.seconds = time.perf_counter() - started
    return report


def _donor_tables(
    donor: ChunkIndex | None, model: str, token_encoder: TokenEncoder | None
) -> dict[str, LanceTable]:
    """The donor's tables that hold vectors of the same model and layout, by table."""
    if donor is None:
        return {}
    candidates: dict[str, LanceTable] = {
        "chunks": donor,
        "sentences": donor.sentences(),
        "documents": donor.documents(),
        "token_vectors": donor.token_vectors(),
    }
    return {
        name: table
        for name, table in candidates.items()
        if table.exists() and table.is_current(_model_of(table, model, token_encoder))
    }


def _model_of(table: LanceTable, model: str, token_encoder: TokenEncoder | None) -> str:
    """The model name a table's rows are stored under (token vectors: the packed encoder's)."""
    if token_encoder is not None and isinstance(table, TokenVectorIndex):
        return PackedTokenEncoder(token_encoder).name
    return model


def _batch_progress(
    on_progress: ProgressCallback | None, number: int, batches: int
) -> ProgressCallback | None:
    """Progress of the chunk vectors across batches, on a scale of 1,000 per batch."""
    if on_progress is None:
        return None

    def progress(done: int, total: int) -> None:
        share = done / total if total else 1.0
        on_progress(int((number + share) * 1000), batches * 1000)

    return progress


def sync_sentences(
    index: ChunkIndex,
    chunks: pd.DataFrame,
    embedder: Embedder,
    batch_size: int,
    report: EmbedReport,
    on_progress: ProgressCallback | None = None,
    scope: Sequence[str] | None = None,
    donor: LanceTable | None = None,
    windows: bool = True,
) -> None:
    """Makes the `sentences` table hold the sentence windows of `chunks` (index rows), for
    the documents of `scope` (every document when None); with `windows` off, none.

    Skipped when the chunk sync has just failed on the provider: search reads chunk rows
    from the chunks table, so sentence rows that lag behind cost recall for a run, never
    correctness, and the next run catches up.
    """
    if report.provider_failure:
        return
    table = index.sentences()
    if not windows and not table.exists():
        return
    # A table to be rebuilt (new model or layout) is written whole, every column of every row.
    current = table.exists() and table.is_current(embedder.name)
    stored = table.stored_keys(scope) if current else None
    rows = sentence_rows(chunks if windows else chunks.iloc[:0], embedder.name, stored)
    report.sentences += len(rows)
    outcome = sync_table(
        table,
        rows,
        "text_embed",
        sentence_schema,
        embedder,
        batch_size,
        report,
        on_progress,
        scope=scope,
        stored=stored,
        donor=donor,
    )
    report.sentences_embedded += outcome.embedded
    report.provider_failure = outcome.failure


def joint_pass(
    embedder: Embedder, token_encoder: TokenEncoder | None
) -> tuple[Embedder, dict[str, np.ndarray] | None]:
    """(the embedder for chunk vectors, the packed token vectors it captures on the way).

    When both are the same model the chunk pass keeps each text's token vectors, and the
    dict (filled as the chunk table is synced) goes to `sync_token_vectors`; otherwise None.
    """
    if token_encoder is embedder and hasattr(embedder, "embed_with_token_vectors"):
        capturing = CapturingEmbedder(embedder)  # type: ignore[arg-type]
        return capturing, capturing.captured
    return embedder, None


def sync_token_vectors(
    index: ChunkIndex,
    chunks: pd.DataFrame,
    encoder: TokenEncoder | None,
    batch_size: int,
    report: EmbedReport,
    on_progress: ProgressCallback | None = None,
    captured: dict[str, np.ndarray] | None = None,
    scope: Sequence[str] | None = None,
    donor: LanceTable | None = None,
) -> None:
    """Makes the `token_vectors` table hold the packed token vectors of `chunks` (index rows),
    for the documents of `scope` (every document when None).

    Keyed by the encoder and the chunk's embedded text, like every vector: a rerun encodes
    nothing, an edited chunk is encoded again, and the reranker ignores a stored row whose
    text is not the chunk's current one. Skipped without an encoder (the reranker then
    encodes its candidates per query) and after a provider failure, as sentence windows are.
    `captured` holds packed tokens of texts the chunk pass has just encoded.
    """
    if encoder is None or report.provider_failure:
        return
    packed = PackedTokenEncoder(encoder, captured)
    rows = keyed_rows(chunks[["chunk_id", "doc_id", "text_embed"]], "text_embed", packed.name)
    report.token_vectors += len(rows)
    outcome = sync_table(
        index.token_vectors(),
        rows,
        "text_embed",
        lambda _width, model: token_vector_schema(packed.dimension, model),
        packed,
        batch_size,
        report,
        on_progress,
        scope=scope,
        donor=donor,
    )
    report.token_vectors_embedded += outcome.embedded


@dataclass
class SyncOutcome:
    embedded: int = 0
    reused: int = 0
    written: int = 0
    deleted: int = 0
    rebuilt: bool = False
    not_embedded: set[str] = field(default_factory=set)
    failure: str | None = None


def sync_table(
    table: LanceTable,
    rows: pd.DataFrame,
    text_column: str,
    schema_for: Callable[[int, str], pa.Schema],
    embedder: Embedder,
    batch_size: int,
    report: EmbedReport,
    on_progress: ProgressCallback | None = None,
    scope: Sequence[str] | None = None,
    stored: Mapping[str, StoredRow] | None = None,
    donor: LanceTable | None = None,
) -> SyncOutcome:
    """Makes `table` hold exactly `rows`, embedding only text it has no vector for.

    With a `scope` (a batch of document ids) only those documents' stored rows are compared
    and replaced, and the caller refreshes the indexes after its last batch. `stored` is
    `table.stored_keys(scope)` when the caller has read it already.

    `rows` carry the table's key column, `doc_id`, `embed_key` and `row_hash` (see
    `keyed_rows`). Changed rows are embedded and committed about `batch_size * 8` at a time,
    in document order, never splitting a document across commits, and a document's stale
    rows are deleted in the commit that writes its new ones: a run killed halfway keeps the
    vectors it computed, and a document being replaced shows its old chunks or its new ones,
    never neither and never a mix.

    When the embedding provider fails (after its retries) the stage stops asking it: the
    slices committed so far stay, every document not finished keeps its old rows, and the
    outcome names those documents so the run can report them and the next run retries them.
    """
    if table.exists() and not table.is_current(embedder.name):
        # A new model or a new column layout: the table is replaced in one commit, so search
        # never mixes two vector spaces or two layouts (a run killed here starts this again).
        # Under the same model only the layout changed, and the stored vectors are kept.
        unique = dict(zip(rows["embed_key"], rows[text_column], strict=True))
        same_model = table.embedding_model()[0] == embedder.name
        vectors = table.vectors_for(list(unique)) if same_model else {}
        missing = [key for key in unique if key not in vectors]
        fresh = _embed(embedder, [unique[key] for key in missing], batch_size, report, on_progress)
        vectors.update(zip(missing, fresh, strict=True))
        dimension = _dimension(vectors, report.dimension, table)
        report.dimension = report.dimension or dimension
        table.replace_all(_arrow_rows(rows, vectors, schema_for(dimension, embedder.name)))
        table.refresh_indexes()
        return SyncOutcome(
            embedded=len(missing),
            reused=len(unique) - len(missing),
            written=len(rows),
            rebuilt=True,
        )
    outcome = SyncOutcome()
    if stored is None:
        stored = table.stored_keys(scope)
    key = table.key_column
    # A boolean array, not a list: pandas reads an empty list as a selection of no columns,
    # and a batch can hold no rows at all (chunks too short to have sentence windows).
    is_changed = np.array(
        [
            row_key not in stored or stored[row_key].row_hash != row_hash
            for row_key, row_hash in zip(rows[key], rows["row_hash"], strict=True)
        ],
        dtype=bool,
    )
    changed = rows[is_changed].sort_values(["doc_id", key], kind="stable").reset_index(drop=True)
    current_keys = set(rows[key])
    stale_by_document: dict[str, list[str]] = {}
    for stored_key, row in stored.items():
        if stored_key not in current_keys:
            stale_by_document.setdefault(row.doc_id, []).append(stored_key)
    # Embed keys with a vector in the table; grows as this run commits slices.
    have_vector = {row.embed_key for row in stored.values()}
    expected = len(set(changed["embed_key"]) - have_vector)
    for start, end in _document_slices(changed["doc_id"].tolist(), batch_size * 8):
        part = changed.iloc[start:end]
        needed = sorted(set(part["embed_key"]))
        vectors = table.vectors_for([k for k in needed if k in have_vector])
        missing = [k for k in needed if k not in vectors]
        if donor is not None and missing:
            donated = donor.vectors_for(missing)
            vectors.update(donated)
            report.vectors_seeded += len(donated)
            missing = [k for k in missing if k not in donated]
        text_by_key = dict(zip(part["embed_key"], part[text_column], strict=True))
        try:
            fresh = _embed(embedder, [text_by_key[k] for k in missing], batch_size, report)
        except EmbeddingFailure as error:
            outcome.failure = str(error)
            outcome.not_embedded = set(changed["doc_id"].iloc[start:])
            break
        vectors.update(zip(missing, fresh, strict=True))
        outcome.embedded += len(missing)
        outcome.reused += int((~part["embed_key"].isin(missing)).sum())
        dimension = _dimension(vectors, report.dimension, table)
        if dimension is None:  # nothing stored, nothing to store, no way to know the width
            continue
        report.dimension = report.dimension or dimension
        stale = [k for d in sorted(set(part["doc_id"])) for k in stale_by_document.pop(d, [])]
        table.upsert(_arrow_rows(part, vectors, schema_for(dimension, embedder.name)), stale)
        have_vector.update(needed)
        outcome.written += len(part)
        outcome.deleted += len(stale)
        if on_progress is not None and expected:
            on_progress(min(outcome.embedded, expected), expected)
    # Left: rows of removed documents, and rows a document dropped without changing others.
    remaining = [
        k
        for doc_id, keys in stale_by_document.items()
        if doc_id not in outcome.not_embedded
        for k in keys
    ]
    table.delete_keys(remaining)
    outcome.deleted += len(remaining)
    if table.exists() and scope is None:
        table.refresh_indexes()
    return outcome


def _document_slices(doc_ids: list[str], target_rows: int) -> list[tuple[int, int]]:
    """Row ranges that each end where a document does, so a commit holds whole documents.

    Each range has at least `target_rows` rows, except possibly the last.
    """
    slices: list[tuple[int, int]] = []
    start = 0
    for position in range(1, len(doc_ids) + 1):
        at_end = position == len(doc_ids)
        if at_end or (
            doc_ids[position] != doc_ids[position - 1] and position - start >= target_rows
        ):
            slices.append((start, position))
            start = position
    return slices


def _embed(
    embedder: Embedder,
    texts: list[str],
    batch_size: int,
    report: EmbedReport,
    on_progress: ProgressCallback | None = None,
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
    vectors: dict[str, np.ndarray], declared: int | None, table: LanceTable
) -> int | None:
    """The width of this model's vectors, from what is at hand."""
    if vectors:
        return len(next(iter(vectors.values())))
    if declared:
        return declared
    return table.embedding_model()[1] if table.exists() else None


def _arrow_rows(frame: pd.DataFrame, vectors: dict[str, np.ndarray], schema: pa.Schema) -> pa.Table:
    # from_pandas: a value pandas marks missing (NaN, NA, None) is a null, whatever the
    # column's dtype, rather than a float an integer or boolean column cannot take.
    columns = {
        name: pa.array(frame[name], type=schema.field(name).type, from_pandas=True)
        for name in schema.names
        if name != "vector"
    }
    columns["vector"] = _vector_column([vectors[key] for key in frame["embed_key"]], schema)
    return pa.table(columns, schema=schema)


def _vector_column(values: list[np.ndarray], schema: pa.Schema) -> pa.Array:
    """Float vectors as a fixed-size list (checked against the table's width), or bytes."""
    vector_type = schema.field("vector").type
    if pa.types.is_binary(vector_type):
        return pa.array([np.asarray(v, dtype=np.uint8).tobytes() for v in values], vector_type)
    dimension = vector_type.list_size
    matrix = (
        np.vstack(values).astype(np.float32) if values else np.empty((0, dimension), np.float32)
    )
    if matrix.shape[1] != dimension:
        raise ValueError(f"vectors have {matrix.shape[1]} dimensions; the table holds {dimension}")
    return pa.FixedSizeListArray.from_arrays(pa.array(matrix.reshape(-1), pa.float32()), dimension)
