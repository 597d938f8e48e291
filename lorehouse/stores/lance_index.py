"""The write side of the LanceDB tables: schemas, rows written and deleted, indexes and
compaction. Each writer is its table's reader (`lorehouse.search.tables`) with the writes
the stages need; search and answering hold only the readers.

Longer than most modules because the tables share their upkeep (scalar and vector indexes,
compaction, versions kept for citations), and each table's schema sits with its writer.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, TypeVar, cast

import numpy as np
import pyarrow as pa

from lorehouse.models import PUBLIC_GROUP
from lorehouse.search.ann import NeighbourSearch
from lorehouse.search.bm25 import TextAnalyzer
from lorehouse.search.snapshot import DIMENSION_KEY, LAYOUT_KEY, MODEL_KEY
from lorehouse.search.tables import (
    TABLE_LAYOUT,
    ChunkTable,
    DocumentTable,
    SentenceTable,
    TableReader,
    TokenVectorTable,
    sql_in,
    vector_values,
)
from lorehouse.search.versions import PUBLISHED_TABLE_NAME

if TYPE_CHECKING:
    import lance
    import lancedb

#: Lance's per-column switch for how a column's pages are compressed.
_COMPRESSION_KEY = b"lance-encoding:compression"


# Long `IN (...)` lists are split so a large deletion stays a handful of modest statements.
_IDS_PER_STATEMENT = 2000


# Old table versions are kept this long so a reader that opened one mid-write can finish;
# the chunks table keeps its versions longer, for citations (`LanceTable.keep_versions`).
_KEEP_VERSIONS = timedelta(hours=1)


# Data a compaction fills a fragment with, and Lance's own target in rows. Filled to rows
# alone, a table of wide rows never completes a fragment (the token vectors' 60 KB rows would
# need 60 GB), so every compaction merged its one big fragment again: one edited document
# rewrote the whole token table (bench/compaction_memory.py).
_COMPACTED_FRAGMENT_BYTES = 256 * 1024 * 1024


_LANCE_FRAGMENT_ROWS = 1024 * 1024


# Cleanup reads the clock after the age it is given was worked out: this covers the time
# between, so the published version is never the one just past the cut.
_CLOCK_SLACK = timedelta(minutes=1)


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
            pa.field("language", pa.string()),
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
            pa.field("language", pa.string()),
            pa.field("acl", pa.list_(pa.string())),
            pa.field("text_embed", pa.string()),
            pa.field("embed_key", pa.string()),
            pa.field("row_hash", pa.string()),
            pa.field("vector", pa.list_(pa.float32(), dimension)),
        ],
        metadata=table_metadata(dimension, model),
    )


def token_vector_schema(dimension: int, model: str) -> pa.Schema:
    """One row per chunk: its tokens' vectors packed as bytes (`lorehouse.search.token_vectors`).

    What late interaction compares at query time, stored so a query reads its candidates'
    rows instead of running the encoder over them. No filter columns: only chunks a search has
    already returned (under its access predicate) are looked up, by id.

    The packed vectors are written uncompressed: sign bits hardly compress, so Lance's
    default saves little disk and slows every read of the candidates' rows that no earlier
    query left in memory. A table written before keeps its compressed files; rows added to it
    follow its schema.
    """
    return pa.schema(
        [
            pa.field("chunk_id", pa.string(), nullable=False),
            pa.field("doc_id", pa.string(), nullable=False),
            pa.field("embed_key", pa.string()),
            pa.field("row_hash", pa.string()),
            pa.field("vector", pa.binary(), metadata={_COMPRESSION_KEY: b"none"}),
        ],
        metadata=table_metadata(dimension, model),
    )


def table_metadata(dimension: int, model: str) -> dict[bytes, bytes]:
    """Schema metadata every vector table carries: model, dimension, layout version."""
    return {
        MODEL_KEY: model.encode(),
        DIMENSION_KEY: str(dimension).encode(),
        LAYOUT_KEY: TABLE_LAYOUT.encode(),
    }


def with_public_group(rows: pa.Table) -> pa.Table:
    """`rows` with PUBLIC_GROUP as the `acl` of every row that names no group."""
    if "acl" not in rows.column_names:
        return rows
    column = rows.schema.get_field_index("acl")
    groups = [value or [PUBLIC_GROUP] for value in rows["acl"].to_pylist()]
    field = rows.schema.field(column)
    return rows.set_column(column, field, pa.array(groups, type=field.type))


def _slices(values: list[str]) -> list[list[str]]:
    """`values` in runs short enough for one SQL statement's IN list."""
    return [
        values[start : start + _IDS_PER_STATEMENT]
        for start in range(0, len(values), _IDS_PER_STATEMENT)
    ]


class StoredRow(NamedTuple):
    """What the embedding stage compares a stored row by: its vector's key and its content."""

    embed_key: str
    row_hash: str
    doc_id: str


def _optimize(table: lancedb.table.Table, keep_versions: timedelta) -> None:
    """What LanceDB's `optimize` does, in bounded steps: new rows folded into the indexes,
    small fragments compacted into fragments of about _COMPACTED_FRAGMENT_BYTES, and versions
    older than `keep_versions` removed.

    Through Lance itself, because LanceDB's `optimize` takes no compaction target: it fills
    fragments to a million rows, so a table of wide rows was rewritten whole by every later
    optimize, the token vectors after a single changed document too (docs/benchmarks.md,
    "Compaction of the token vectors"). Indexes first: compaction only joins fragments the
    same indexes cover, so a fragment no index covered yet waited for the next run.
    Compaction copies the encoded pages where it can instead of decoding and encoding every
    value again.
    """
    table.checkout_latest()
    dataset = table.to_lance()
    # Each index type's own default, as LanceDB's optimize: scalar indexes merge their new
    # rows in, so compaction may join a new fragment to its neighbours; a vector index adds
    # a delta (merging deltas costs a whole index build's memory).
    dataset.optimize.optimize_indices()
    dataset.optimize.compact_files(
        target_rows_per_fragment=_fragment_rows(dataset), compaction_mode="try_binary_copy"
    )
    dataset.cleanup_old_versions(older_than=keep_versions)
    table.checkout_latest()


def _cleanup_age(
    table: lancedb.table.Table, keep_versions: timedelta, published: int | None
) -> timedelta:
    """The age from which cleanup removes a version: `keep_versions`, counted back from the
    `published` version when that is older. Searches read the published version until the
    next merge publishes, however long ago it was written, and a citation of it is as recent
    as that."""
    if published is None:
        return keep_versions
    written = next(
        (entry["timestamp"] for entry in table.list_versions() if entry["version"] == published),
        None,
    )
    if written is None:
        return keep_versions
    age = datetime.now(UTC) - written.astimezone(UTC)
    return keep_versions + max(timedelta(0), age) + _CLOCK_SLACK


def _fragment_rows(dataset: lance.LanceDataset) -> int:
    """Rows of _COMPACTED_FRAGMENT_BYTES at the widest fragment's bytes per row, read from
    the manifest: a table's rows may differ in width, and the widest bounds a fragment."""
    widths = [
        sum(file.file_size_bytes or 0 for file in fragment.metadata.files)
        / fragment.metadata.physical_rows
        for fragment in dataset.get_fragments()
        if fragment.metadata.physical_rows
    ]
    widest = max(widths, default=0.0)
    if widest <= 0:
        return _LANCE_FRAGMENT_ROWS
    return max(1, min(_LANCE_FRAGMENT_ROWS, int(_COMPACTED_FRAGMENT_BYTES / widest)))


T = TypeVar("T", bound="LanceTable")


class LanceTable(TableReader):
    """A table the index side writes: rows upserted and deleted, its indexes kept current."""

    scalar_indexes: tuple[tuple[str, str], ...] = (("doc_id", "BTREE"), ("acl", "LABEL_LIST"))

    def __init__(
        self,
        uri: str,
        ann_min_rows: int | None = None,
        storage_options: dict[str, str] | None = None,
        db: lancedb.DBConnection | None = None,
        search_indexes: bool = True,
        keep_versions: timedelta = _KEEP_VERSIONS,
        snapshot_folder: Path | None = None,
        cache_bytes: tuple[int, int] | None = None,
        warm_min_rows: int | None = None,
        analyzer: TextAnalyzer | None = None,
        neighbours: NeighbourSearch | None = None,
    ) -> None:
        """`ann_min_rows`: rows from which a searched table gets LanceDB's vector index
        (the deployment's `ann_index_min_rows`, from the wiring), which searches read when
        `neighbours` says the "lancedb" engine; None builds none. The other arguments are
        the reader's (`TableReader`)."""
        super().__init__(
            uri,
            storage_options=storage_options,
            db=db,
            snapshot_folder=snapshot_folder,
            cache_bytes=cache_bytes,
            warm_min_rows=warm_min_rows,
            analyzer=analyzer,
            keep_versions=keep_versions,
            neighbours=neighbours,
        )
        #: Whether the table gets its scalar and vector indexes: not for a partition's own
        #: tables, which are only read whole, by the merge into the shared ones.
        self.search_indexes = search_indexes
        self.ann_min_rows = ann_min_rows

    def sibling(self, table_type: type[T]) -> T:  # type: ignore[override]
        """Another table of the same database, sharing this connection, its published
        versions and these settings."""
        table = table_type(
            self.uri,
            self.ann_min_rows,
            self._storage_options,
            db=self._db,
            search_indexes=self.search_indexes,
            snapshot_folder=self.snapshot_folder,
            warm_min_rows=self.warm_min_rows,
            analyzer=self.analyzer,
            neighbours=self.neighbours,
        )
        table._published = self._published
        return table

    def stored_keys(self, doc_ids: Sequence[str] | None = None) -> dict[str, StoredRow]:
        """key -> what identifies the stored row's content, without reading vectors; only the
        rows of `doc_ids` when given (the embedding stage compares a batch at a time)."""
        if not self.exists():
            return {}
        table = self.table()
        columns = list(dict.fromkeys([self.key_column, *StoredRow._fields]))
        if doc_ids is None:
            parts = [table.search().select(columns).limit(max(1, table.count_rows())).to_arrow()]
        else:
            parts = [
                table.search()
                .where(sql_in("doc_id", ids))
                .select(columns)
                .limit(max(1, table.count_rows()))
                .to_arrow()
                for ids in _slices(list(doc_ids))
            ]
        found: dict[str, StoredRow] = {}
        for arrow in parts:
            values = [arrow[name].to_pylist() for name in StoredRow._fields]
            found.update(
                zip(
                    arrow[self.key_column].to_pylist(),
                    (StoredRow(*row) for row in zip(*values, strict=True)),
                    strict=True,
                )
            )
        return found

    def access_of(self, doc_ids: Sequence[str], by: str) -> dict[str, tuple[str, list[str]]]:
        """key -> (its `by` column, its access list) for the rows of `doc_ids`: what the index
        merge compares with the feature store's access lists."""
        if not doc_ids or not self.exists():
            return {}
        table = self.table()
        columns = list(dict.fromkeys([self.key_column, by, "acl"]))
        found: dict[str, tuple[str, list[str]]] = {}
        for ids in _slices(list(doc_ids)):
            arrow = (
                table.search()
                .where(sql_in("doc_id", ids))
                .select(columns)
                .limit(max(1, table.count_rows()))
                .to_arrow()
            )
            for key, value, acl in zip(
                arrow[self.key_column].to_pylist(),
                arrow[by].to_pylist(),
                arrow["acl"].to_pylist(),
                strict=True,
            ):
                found[key] = (value, acl or [])
        return found

    def column_values(self, column: str) -> pa.ChunkedArray:
        """One column of every row, as Arrow: comparisons over the whole table stay in Arrow
        (a few bytes a value) instead of Python strings (about 70 bytes each)."""
        if not self.exists():
            return pa.chunked_array([], pa.string())
        table = self.table()
        return table.search().select([column]).limit(max(1, table.count_rows())).to_arrow()[column]

    def delete_documents_except(self, doc_ids: Iterable[str]) -> int:
        """Deletes the rows of every document not in `doc_ids`; returns how many rows."""
        if not self.exists():
            return 0
        import pyarrow.compute as pc

        stored = pc.unique(self.column_values("doc_id"))
        kept = pa.array(list(doc_ids), pa.string())
        gone = sorted(pc.filter(stored, pc.invert(pc.is_in(stored, value_set=kept))).to_pylist())
        table = self.table()
        before = table.count_rows()
        for ids in _slices(gone):
            table.delete(sql_in("doc_id", ids))
        return before - table.count_rows() if gone else 0

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
            for key, vector in zip(keys, vector_values(arrow["vector"]), strict=True):
                found[key] = vector
        return found

    def rows_with_keys(self, keys: Sequence[str]) -> pa.Table:
        """Whole stored rows (vectors too) by key, in the table's schema: what a merge of
        partition tables copies into the shared one."""
        table = self.table()
        parts = [
            table.search().where(sql_in(self.key_column, part)).limit(len(part)).to_arrow()
            for part in _slices(list(keys))
        ]
        schema = table.schema
        return (
            pa.concat_tables([p.select(schema.names).cast(schema) for p in parts])
            if parts
            else schema.empty_table()
        )

    def upsert(self, rows: pa.Table, stale_keys: Sequence[str]) -> None:
        """Writes new and changed rows, then deletes rows whose chunks are gone.

        In that order: a document being replaced shows its old or its new chunks, never
        neither. The table is created on the first write.
        """
        rows = with_public_group(rows)
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
        for part in _slices(list(keys)):
            table.delete(sql_in(self.key_column, part))

    def replace_all(self, rows: pa.Table | pa.RecordBatchReader) -> None:
        """Overwrites the table in one commit: readers see the old model's rows or the new.

        A reader is written batch by batch, so replacing a table with many partitions' rows
        (a new model or layout) holds one batch at a time, not every partition's rows."""
        if isinstance(rows, pa.Table):
            rows = with_public_group(rows)
            schema = rows.schema
        else:
            schema = rows.schema
            batches = (
                batch
                for read in rows
                for batch in with_public_group(pa.Table.from_batches([read], schema)).to_batches()
            )
            rows = pa.RecordBatchReader.from_batches(schema, batches)
        self._table = self._db.create_table(self.name, data=rows, schema=schema, mode="overwrite")

    def refresh_indexes(self) -> list[IndexState]:
        """Creates missing indexes, folds new rows into existing ones and compacts the table.

        The ANN index exists only from `ann_min_rows` rows, because below that an exact scan
        is both exact and fast. Rows not yet in an index are still found (LanceDB scans them),
        so refreshing is about speed, not correctness. BM25 needs no index in the store: its
        postings are built by the reader, per table version (see `TableSnapshot`).
        """
        table = self.table()
        if not self.search_indexes:
            _optimize(table, self._kept_for())
            return []
        present = {tuple(index.columns) for index in table.list_indices()}
        for column, kind in self.scalar_indexes:
            if (column,) not in present:
                table.create_scalar_index(column, index_type=kind)
        wants_ann = self.builds_vector_index and table.count_rows() >= (self.ann_min_rows or 0)
        if ("vector",) not in present and wants_ann:
            table.create_index(
                metric="cosine", vector_column_name="vector", index_type="IVF_HNSW_SQ"
            )
        _optimize(table, self._kept_for())
        return self.index_state()

    def _kept_for(self) -> timedelta:
        """How long cleanup keeps this table's old versions (see `_cleanup_age`)."""
        published = self.published_versions()
        version = None if published is None else published.get(self.name)
        return _cleanup_age(self.table(), self.keep_versions, version)

    @property
    def builds_vector_index(self) -> bool:
        """Whether this table gets LanceDB's vector index: only where searches read it (the
        "lancedb" engine, or a table opened without the deployment's `neighbours`). The
        mapped index searches read by default is built from the snapshot's vectors by the
        first process that searches a version (`lorehouse.search.ann`), so the merge
        spends nothing on an index no search would read."""
        reads_lancedb = self.neighbours is None or self.neighbours.engine == "lancedb"
        return (
            self.nearest_neighbour_search
            and self.search_indexes
            and self.ann_min_rows is not None
            and reads_lancedb
        )

    def index_new_vectors(self) -> bool:
        """Folds rows into the vector index once `ann_min_rows` of them are outside it.

        Building an IVF_HNSW_SQ index holds memory in proportion to the rows it covers, and
        adding rows to an existing index about as much per added row (docs/benchmarks.md,
        "The vector index built between batches"). Called after each batch of a build, this
        keeps every index step to at most `ann_min_rows` rows and one batch: the first step
        creates the index when the table reaches the threshold, each later one adds a delta
        index for the rows since. Returns whether it indexed anything. Rows outside the index
        are still searched (by scan), so this is about a build's memory, not about what
        searches find.
        """
        if not self.builds_vector_index or not self.exists():
            return False
        vector_index = next((s for s in self.index_state() if s.columns == ["vector"]), None)
        outside = self.table().count_rows() if vector_index is None else vector_index.unindexed_rows
        if outside < self.ann_min_rows:
            return False
        self.refresh_indexes()
        return True

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


class ChunkIndex(LanceTable, ChunkTable):
    """The `chunks` table, written by the embedding stage."""

    # Search reads the rows it shows by chunk id, after ranking ids alone: without an index on
    # chunk_id each of those reads scans the table.
    scalar_indexes = (("doc_id", "BTREE"), ("chunk_id", "BTREE"), ("acl", "LABEL_LIST"))

    # The siblings are the writers (`document_type` and the others, set below); these only
    # say so to the type checker.
    def documents(self) -> DocumentIndex:
        return cast(DocumentIndex, super().documents())

    def sentences(self) -> SentenceIndex:
        return cast(SentenceIndex, super().sentences())

    def token_vectors(self) -> TokenVectorIndex:
        return cast(TokenVectorIndex, super().token_vectors())

    def publish(self, tables: Iterable[LanceTable]) -> dict[str, int | None]:
        """Makes the latest version of each of `tables` (of this database) the one searches
        read, all in one commit (see `PublishedVersions`); one not built yet reads as not
        built. Returns table name -> version published (None: not built)."""
        versions = {
            table.name: table.table().version if table.exists() else None for table in tables
        }
        rows = pa.table(
            {
                "table_name": pa.array(list(versions), pa.string()),
                "version": pa.array(list(versions.values()), pa.int64()),
            }
        )
        mode = "create" if self.published_versions() is None else "overwrite"
        published = self._db.create_table(PUBLISHED_TABLE_NAME, data=rows, mode=mode)
        # A reader reads the rows of the version it has just seen: an hour is ample.
        published.to_lance().cleanup_old_versions(older_than=_KEEP_VERSIONS)
        return versions


class DocumentIndex(LanceTable, DocumentTable):
    """The `documents` table, written by the document features stage."""

    scalar_indexes = (("acl", "LABEL_LIST"),)


class SentenceIndex(LanceTable, SentenceTable):
    """The `sentences` table, written by the embedding stage."""

    scalar_indexes = (("doc_id", "BTREE"), ("acl", "LABEL_LIST"))


class TokenVectorIndex(LanceTable, TokenVectorTable):
    """The `token_vectors` table, written by the embedding stage."""

    scalar_indexes = (("chunk_id", "BTREE"),)


ChunkIndex.document_type = DocumentIndex
ChunkIndex.sentence_type = SentenceIndex
ChunkIndex.token_vector_type = TokenVectorIndex
