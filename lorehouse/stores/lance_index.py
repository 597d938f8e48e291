"""The LanceDB `chunks` table: vectors, chunk texts and the BM25 and ANN indexes over them.

Search filters (documents, pages, file types, tables, access groups) are SQL `where` clauses
evaluated inside LanceDB before ranking, so a restricted chunk is never read into a result
set that is filtered afterwards.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import NamedTuple, TypeVar

import lancedb
import numpy as np
import pyarrow as pa

from lorehouse.stores.bm25 import Analyzer, BM25Index

TABLE_NAME = "chunks"
DOCUMENTS_TABLE_NAME = "documents"
SENTENCES_TABLE_NAME = "sentences"
TOKEN_VECTORS_TABLE_NAME = "token_vectors"
TEXT_COLUMNS = ("text_embed", "text_enriched")
_MODEL_KEY = b"lorehouse.embedding_model"
_DIMENSION_KEY = b"lorehouse.embedding_dimension"
_LAYOUT_KEY = b"lorehouse.layout"
#: Bumped whenever a table's columns change; a table of another layout is rebuilt.
TABLE_LAYOUT = "2"
# Long `IN (...)` lists are split so a large deletion stays a handful of modest statements.
_IDS_PER_STATEMENT = 2000
# Old table versions are kept this long so a reader that opened one mid-write can finish.
_KEEP_VERSIONS = timedelta(hours=1)
# Row masks of access and filter predicates kept per table version (a few KB each at 100k rows).
_CACHED_MASKS = 64
_ANALYZER = Analyzer()


T = TypeVar("T", bound="LanceTable")


class IndexNotBuilt(RuntimeError):
    """The chunks table does not exist yet: the embedding stage has not run."""


@dataclass(frozen=True)
class IndexState:
    """One index on the table, as reported in asset metadata and /healthz."""

    name: str
    kind: str
    columns: list[str]
    indexed_rows: int
    unindexed_rows: int


def chunk_schema(dimension: int, model: str) -> pa.Schema:
    """The table's columns; the embedding model and its dimension ride in the schema metadata."""
    return pa.schema(
        [
            pa.field("chunk_id", pa.string(), nullable=False),
            pa.field("doc_id", pa.string(), nullable=False),
            pa.field("title", pa.string()),
            pa.field("rel_path", pa.string()),
            pa.field("source_uri", pa.string()),
            pa.field("file_type", pa.string()),
            pa.field("position", pa.int32()),
            pa.field("heading_path", pa.list_(pa.string())),
            pa.field("page_start", pa.int32()),
            pa.field("page_end", pa.int32()),
            pa.field("is_table", pa.bool_()),
            pa.field("acl", pa.list_(pa.string())),
            pa.field("text_chat", pa.string()),
            pa.field("text_embed", pa.string()),
            pa.field("text_enriched", pa.string()),
            pa.field("embed_key", pa.string()),
            pa.field("row_hash", pa.string()),
            pa.field("vector", pa.list_(pa.float32(), dimension)),
        ],
        metadata=table_metadata(dimension, model),
    )


def document_schema(dimension: int, model: str) -> pa.Schema:
    """One row per document: its profile (title, summary, FAQs) for choosing sources."""
    return pa.schema(
        [
            pa.field("doc_id", pa.string(), nullable=False),
            pa.field("title", pa.string()),
            pa.field("rel_path", pa.string()),
            pa.field("acl", pa.list_(pa.string())),
            pa.field("summary", pa.string()),
            pa.field("faqs", pa.list_(pa.string())),
            pa.field("profile_text", pa.string()),
            pa.field("embed_key", pa.string()),
            pa.field("row_hash", pa.string()),
            pa.field("vector", pa.list_(pa.float32(), dimension)),
        ],
        metadata=table_metadata(dimension, model),
    )


def sentence_schema(dimension: int, model: str) -> pa.Schema:
    """One row per sentence window of a chunk, with the chunk's filter and access columns.

    A chunk's single vector averages everything it says; a question about one of its
    sentences matches that sentence far better. The filter columns are copied from the chunk
    so the same `where` clause (access included) applies to both tables.
    """
    return pa.schema(
        [
            pa.field("sentence_id", pa.string(), nullable=False),
            pa.field("chunk_id", pa.string(), nullable=False),
            pa.field("doc_id", pa.string(), nullable=False),
            pa.field("file_type", pa.string()),
            pa.field("page_start", pa.int32()),
            pa.field("page_end", pa.int32()),
            pa.field("is_table", pa.bool_()),
            pa.field("acl", pa.list_(pa.string())),
            pa.field("text_embed", pa.string()),
            pa.field("embed_key", pa.string()),
            pa.field("row_hash", pa.string()),
            pa.field("vector", pa.list_(pa.float32(), dimension)),
        ],
        metadata=table_metadata(dimension, model),
    )


def token_vector_schema(dimension: int, model: str) -> pa.Schema:
    """One row per chunk: its tokens' vectors packed as bytes (see `lorehouse.token_vectors`).

    What late interaction compares at query time, stored so a query reads its candidates'
    rows instead of running the encoder over them. No filter columns: only chunks a search has
    already returned (under its access predicate) are looked up, by id.
    """
    return pa.schema(
        [
            pa.field("chunk_id", pa.string(), nullable=False),
            pa.field("doc_id", pa.string(), nullable=False),
            pa.field("embed_key", pa.string()),
            pa.field("row_hash", pa.string()),
            pa.field("vector", pa.binary()),
        ],
        metadata=table_metadata(dimension, model),
    )


def table_metadata(dimension: int, model: str) -> dict[bytes, bytes]:
    """Schema metadata every vector table carries: model, dimension, layout version."""
    return {
        _MODEL_KEY: model.encode(),
        _DIMENSION_KEY: str(dimension).encode(),
        _LAYOUT_KEY: TABLE_LAYOUT.encode(),
    }


def sql_string(value: str) -> str:
    """A SQL string literal; quotes are doubled so a value can never end the literal early."""
    return "'" + value.replace("'", "''") + "'"


def sql_in(column: str, values: Iterable[str]) -> str:
    """`column IN ('a', 'b')`, or a predicate matching nothing for an empty list."""
    literals = [sql_string(v) for v in values]
    return f"{column} IN ({', '.join(literals)})" if literals else "false"


class StoredRow(NamedTuple):
    """What the embedding stage compares a stored row by: its vector's key and its content."""

    embed_key: str
    row_hash: str
    doc_id: str


class LanceTable:
    """One table of a LanceDB database (a folder or s3:// URI) holding rows with vectors."""

    name: str = TABLE_NAME
    key_column: str = "chunk_id"
    text_columns: tuple[str, ...] = TEXT_COLUMNS
    scalar_indexes: tuple[tuple[str, str], ...] = (("doc_id", "BTREE"), ("acl", "LABEL_LIST"))
    #: Whether `vector` is searched by nearness (and so gets an ANN index from ann_min_rows).
    nearest_neighbour_search: bool = True

    def __init__(
        self,
        uri: str,
        ann_min_rows: int = 10_000,
        storage_options: dict[str, str] | None = None,
        db: lancedb.DBConnection | None = None,
    ) -> None:
        self.uri = uri
        self.ann_min_rows = ann_min_rows
        self._storage_options = storage_options
        self._db = db or lancedb.connect(uri, storage_options=storage_options)
        self._table: lancedb.table.Table | None = None
        # (table version, has a vector index): list_indices() is too slow to ask per query.
        self._vector_index_seen: tuple[int, bool] | None = None
        # (table version, postings) and the row masks of predicates at that version.
        self._bm25: tuple[int, BM25Index] | None = None
        self._row_masks: dict[str, np.ndarray] = {}
        self._bm25_lock = threading.Lock()

    # -- opening ---------------------------------------------------------------------------------

    def exists(self) -> bool:
        """Whether the embedding stage has created the table."""
        return self.name in self._db.list_tables().tables

    def table(self) -> lancedb.table.Table:
        """The table at its latest version; raises IndexNotBuilt before the first build."""
        if self._table is None:
            if not self.exists():
                raise IndexNotBuilt(
                    f"no '{self.name}' table in {self.uri}; run `lorehouse materialize`"
                )
            self._table = self._db.open_table(self.name)
        else:
            # Another process (a materialization) may have committed since we opened it.
            self._table.checkout_latest()
        return self._table

    def embedding_model(self) -> tuple[str, int]:
        """(model name, dimension) the stored vectors were made with."""
        metadata = self.table().schema.metadata or {}
        return metadata[_MODEL_KEY].decode(), int(metadata[_DIMENSION_KEY])

    def is_current(self, model: str) -> bool:
        """Whether the table holds `model`'s vectors in today's column layout."""
        metadata = self.table().schema.metadata or {}
        return (
            metadata.get(_MODEL_KEY, b"").decode() == model
            and metadata.get(_LAYOUT_KEY, b"").decode() == TABLE_LAYOUT
        )

    def count(self, where: str | None = None) -> int:
        return self.table().count_rows(where) if self.exists() else 0

    # -- writing ---------------------------------------------------------------------------------

    def stored_keys(self) -> dict[str, StoredRow]:
        """key -> what identifies the stored row's content, without reading vectors."""
        if not self.exists():
            return {}
        table = self.table()
        columns = list(dict.fromkeys([self.key_column, *StoredRow._fields]))
        arrow = table.search().select(columns).limit(max(1, table.count_rows())).to_arrow()
        values = [arrow[name].to_pylist() for name in StoredRow._fields]
        return dict(
            zip(
                arrow[self.key_column].to_pylist(),
                (StoredRow(*row) for row in zip(*values, strict=True)),
                strict=True,
            )
        )

    def vectors_for(self, embed_keys: Sequence[str]) -> dict[str, np.ndarray]:
        """Stored vectors by embed key, so text that did not change is never embedded twice."""
        found: dict[str, np.ndarray] = {}
        if not embed_keys or not self.exists():
            return found
        table = self.table()
        for start in range(0, len(embed_keys), _IDS_PER_STATEMENT):
            part = embed_keys[start : start + _IDS_PER_STATEMENT]
            arrow = (
                table.search()
                .where(sql_in("embed_key", part))
                .select(["embed_key", "vector"])
                .limit(len(part) * 4)
                .to_arrow()
            )
            keys = arrow["embed_key"].to_pylist()
            for key, vector in zip(keys, _vector_values(arrow["vector"]), strict=True):
                found[key] = vector
        return found

    def upsert(self, rows: pa.Table, stale_keys: Sequence[str]) -> None:
        """Writes new and changed rows, then deletes rows whose chunks are gone.

        In that order: a document being replaced shows its old or its new chunks, never
        neither. The table is created on the first write.
        """
        if not self.exists():
            self._table = self._db.create_table(self.name, data=rows, schema=rows.schema)
            return
        table = self.table()
        if rows.num_rows:
            (
                table.merge_insert(self.key_column)
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute(rows)
            )
        self.delete_keys(stale_keys)

    def delete_keys(self, keys: Sequence[str]) -> None:
        """Deletes the rows with these keys (a no-op before the table exists)."""
        if not keys or not self.exists():
            return
        table = self.table()
        for start in range(0, len(keys), _IDS_PER_STATEMENT):
            table.delete(sql_in(self.key_column, keys[start : start + _IDS_PER_STATEMENT]))

    def replace_all(self, rows: pa.Table) -> None:
        """Overwrites the table in one commit: readers see the old model's rows or the new."""
        self._table = self._db.create_table(
            self.name, data=rows, schema=rows.schema, mode="overwrite"
        )

    def refresh_indexes(self) -> list[IndexState]:
        """Creates missing indexes, folds new rows into existing ones and compacts the table.

        The ANN index exists only from `ann_min_rows` rows, because below that an exact scan
        is both exact and fast. Rows not yet in an index are still found (LanceDB scans them),
        so refreshing is about speed, not correctness. BM25 needs no index in the store: its
        postings are built by the reader, per table version (see `text_search`).
        """
        table = self.table()
        present = {tuple(index.columns) for index in table.list_indices()}
        for column, kind in self.scalar_indexes:
            if (column,) not in present:
                table.create_scalar_index(column, index_type=kind)
        rows = table.count_rows()
        wants_ann = self.nearest_neighbour_search and rows >= self.ann_min_rows
        if ("vector",) not in present and wants_ann:
            table.create_index(
                metric="cosine", vector_column_name="vector", index_type="IVF_HNSW_SQ"
            )
        table.optimize(cleanup_older_than=_KEEP_VERSIONS)
        return self.index_state()

    def index_state(self) -> list[IndexState]:
        """Every index with how many rows it covers and how many are still only scanned."""
        if not self.exists():
            return []
        table = self.table()
        return [
            IndexState(
                name=index.name,
                kind=str(index.index_type),
                columns=list(index.columns),
                indexed_rows=int(getattr(index, "num_indexed_rows", 0) or 0),
                unindexed_rows=int(getattr(index, "num_unindexed_rows", 0) or 0),
            )
            for index in table.list_indices()
        ]

    def has_vector_index(self) -> bool:
        return any(state.columns == ["vector"] for state in self.index_state())

    def _vector_indexed(self, table: lancedb.table.Table) -> bool:
        """has_vector_index, asked again only when the table has a new version."""
        version = table.version
        if self._vector_index_seen is None or self._vector_index_seen[0] != version:
            present = any(list(i.columns) == ["vector"] for i in table.list_indices())
            self._vector_index_seen = (version, present)
        return self._vector_index_seen[1]

    # -- reading ---------------------------------------------------------------------------------

    def vector_search(
        self, vector: np.ndarray, where: str | None, limit: int, columns: Sequence[str]
    ) -> list[dict]:
        """Nearest chunks by cosine distance, filtered inside the query."""
        table = self.table()
        query = table.search(vector, vector_column_name="vector").distance_type("cosine")
        if self._vector_indexed(table):
            # Re-score a few times more candidates with full vectors: SQ quantization alone
            # costs a few points of recall.
            query = query.refine_factor(4)
        if where:
            query = query.where(where, prefilter=True)
        return query.select([*columns, "_distance"]).limit(limit).to_list()

    def text_search(
        self,
        text: str,
        where: str | None,
        limit: int,
        columns: Sequence[str],
        fields: Sequence[str] | Mapping[str, float] | None = None,
        scope: str | None = None,
    ) -> list[dict]:
        """BM25 over the text columns (or `fields`, each weighing 1 unless a mapping gives its
        weight) of the rows matching `where`, best first.

        The BM25 statistics are those of the rows matching `scope` (default: `where`), so
        pass the caller's access clause as `scope` and access plus filters as `where`: a
        filter narrows the results without changing how terms are weighted, and rows outside
        the caller's access change neither. Each row carries its score as `_score`.
        """
        ranked = self.text_ranking(text, where, limit, fields, scope)
        if not ranked:
            return []
        keys = [key for key, _ in ranked]
        # Read at the table's latest version with the predicate applied again: a row that was
        # deleted or restricted since the postings were built is left out, not shown.
        condition = sql_in(self.key_column, keys) + (f" AND ({where})" if where else "")
        found = {row[self.key_column]: row for row in self.rows(condition, columns, len(keys))}
        return [{**found[key], "_score": score} for key, score in ranked if key in found]

    def text_ranking(
        self,
        text: str,
        where: str | None,
        limit: int,
        fields: Sequence[str] | Mapping[str, float] | None = None,
        scope: str | None = None,
    ) -> list[tuple[str, float]]:
        """`text_search`'s (key, BM25 score) pairs, best first, without reading the rows.

        The postings and masks are those of the table's current version; a caller that shows
        the rows reads them with `where` again, as `text_search` does.
        """
        table = self.table()
        bm25 = self._bm25_index(table)
        allowed = self._matching(table, bm25, where)
        visible = allowed if scope is None or scope == where else self._matching(table, bm25, scope)
        weights = (
            fields
            if isinstance(fields, Mapping)
            else dict.fromkeys(fields or self.text_columns, 1.0)
        )
        return bm25.search(text, weights, visible, allowed, limit)

    def _bm25_index(self, table: lancedb.table.Table) -> BM25Index:
        """The postings of the text columns at the table's current version, built once."""
        version = table.version
        with self._bm25_lock:
            if self._bm25 is None or self._bm25[0] != version:
                columns = [self.key_column, *self.text_columns]
                arrow = table.search().select(columns).limit(max(1, table.count_rows())).to_arrow()
                texts = {name: arrow[name].to_pylist() for name in self.text_columns}
                built = BM25Index.build(arrow[self.key_column].to_pylist(), texts, _ANALYZER)
                self._bm25 = (version, built)
                self._row_masks.clear()
            return self._bm25[1]

    def _matching(
        self, table: lancedb.table.Table, bm25: BM25Index, where: str | None
    ) -> np.ndarray:
        """The rows matching `where` as a mask over `bm25`'s rows, asked of LanceDB itself.

        The one evaluator of access and filter predicates is LanceDB; masks are cached per
        table version because most callers share a handful of predicates.
        """
        if not where:
            return np.ones(len(bm25.keys), dtype=bool)
        with self._bm25_lock:
            cached = self._row_masks.get(where)
        if cached is not None:
            return cached
        limit = max(1, table.count_rows())
        arrow = table.search().where(where).select([self.key_column]).limit(limit).to_arrow()
        mask = bm25.mask(arrow[self.key_column].to_pylist())
        with self._bm25_lock:
            if len(self._row_masks) >= _CACHED_MASKS:
                self._row_masks.pop(next(iter(self._row_masks)))
            self._row_masks[where] = mask
        return mask

    def rows(self, where: str, columns: Sequence[str], limit: int) -> list[dict]:
        """Rows matching a predicate (a chunk by id, a document's neighbours)."""
        return self.table().search().where(where).select(list(columns)).limit(limit).to_list()


def _vector_values(column: pa.ChunkedArray) -> list[np.ndarray]:
    """A `vector` column as arrays: float32 rows, or the raw bytes of packed token vectors."""
    if pa.types.is_binary(column.type):
        return [np.frombuffer(value, dtype=np.uint8) for value in column.to_pylist()]
    return [
        np.asarray(vector, dtype=np.float32) for vector in column.to_numpy(zero_copy_only=False)
    ]


class ChunkIndex(LanceTable):
    """The `chunks` table: what search and citations read."""

    # Search reads the rows it shows by chunk id, after ranking ids alone: without an index on
    # chunk_id each of those reads scans the table.
    scalar_indexes = (("doc_id", "BTREE"), ("chunk_id", "BTREE"), ("acl", "LABEL_LIST"))
    _sentences: SentenceIndex | None = None
    _token_vectors: TokenVectorIndex | None = None

    def documents(self) -> DocumentIndex:
        """The `documents` table of the same database."""
        return self.sibling(DocumentIndex)

    def sentences(self) -> SentenceIndex:
        """The `sentences` table of the same database (one object, so its caches last)."""
        if self._sentences is None:
            self._sentences = self.sibling(SentenceIndex)
        return self._sentences

    def token_vectors(self) -> TokenVectorIndex:
        """The `token_vectors` table of the same database (one object, so its caches last)."""
        if self._token_vectors is None:
            self._token_vectors = self.sibling(TokenVectorIndex)
        return self._token_vectors

    def sibling(self, table_type: type[T]) -> T:
        """Another table of the same database, sharing this connection."""
        return table_type(self.uri, self.ann_min_rows, self._storage_options, db=self._db)


class DocumentIndex(LanceTable):
    """The `documents` table: one profile per document, for choosing sources."""

    name = DOCUMENTS_TABLE_NAME
    key_column = "doc_id"
    text_columns = ("profile_text",)
    scalar_indexes = (("acl", "LABEL_LIST"),)


class SentenceIndex(LanceTable):
    """The `sentences` table: a vector per sentence window, pointing at its chunk."""

    name = SENTENCES_TABLE_NAME
    key_column = "sentence_id"
    text_columns = ("text_embed",)
    scalar_indexes = (("doc_id", "BTREE"), ("acl", "LABEL_LIST"))


class TokenVectorIndex(LanceTable):
    """The `token_vectors` table: each chunk's packed token vectors, for late interaction."""

    name = TOKEN_VECTORS_TABLE_NAME
    key_column = "chunk_id"
    text_columns = ()
    scalar_indexes = (("chunk_id", "BTREE"),)
    nearest_neighbour_search = False

    def packed(self, chunk_ids: Sequence[str]) -> dict[str, tuple[str, np.ndarray]]:
        """chunk id -> (embed key, packed bytes) for the ids that have a stored row."""
        if not chunk_ids:
            return {}
        arrow = (
            self.table()
            .search()
            .where(sql_in("chunk_id", chunk_ids))
            .select(["chunk_id", "embed_key", "vector"])
            .limit(len(chunk_ids))
            .to_arrow()
        )
        return dict(
            zip(
                arrow["chunk_id"].to_pylist(),
                zip(arrow["embed_key"].to_pylist(), _vector_values(arrow["vector"]), strict=True),
                strict=True,
            )
        )
