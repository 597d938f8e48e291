"""The read side of the LanceDB tables: what search reads and how, at a table version.

The index side (`lorehouse.stores.lance_index`) writes these tables through subclasses of
the readers here; search and answering hold only readers. Search filters (documents, pages,
file types, tables, access groups) are SQL `where` clauses evaluated inside LanceDB before
ranking, so a restricted chunk is never read into a result set that is filtered afterwards.
"""

from __future__ import annotations

import copy
import hashlib
import logging
import math
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, TypeVar, overload

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from cachetools import LRUCache

from lorehouse.search.bm25 import Analyzer, BM25Index, FieldPostings, TextAnalyzer
from lorehouse.search.passages import passage_runs
from lorehouse.search.snapshot_files import SnapshotFiles, regrouped

if TYPE_CHECKING:
    import lance
    import lancedb

TABLE_NAME = "chunks"


DOCUMENTS_TABLE_NAME = "documents"


SENTENCES_TABLE_NAME = "sentences"


TOKEN_VECTORS_TABLE_NAME = "token_vectors"


#: The table naming the version of each table that searches read (see PublishedVersions).
PUBLISHED_TABLE_NAME = "published"


TEXT_COLUMNS = ("text_embed", "text_enriched")


#: The BM25 field holding the words of a chunk's file name (see `file_name_words`).
FILE_NAME_FIELD = "file_name"


MODEL_KEY = b"lorehouse.embedding_model"


DIMENSION_KEY = b"lorehouse.embedding_dimension"


LAYOUT_KEY = b"lorehouse.layout"


#: Bumped whenever a table's columns change; a table of another layout is rebuilt.
#: 3: public rows carry PUBLIC_GROUP in `acl` instead of an empty list.
#: 4: chunks and sentence windows carry their `language`.
TABLE_LAYOUT = "4"


# Row masks of access and filter predicates kept per table version (a few KB each at 100k rows).
_CACHED_MASKS = 64


# With an ANN index, candidates proposed per result asked (and at least), rescored with the
# full vectors: the index ranks by quantized distances, which alone miss some of the exact
# nearest rows, and rescoring more candidates than asked finds them again
# (tests/unit/test_vector_search.py). Extra row ids cost the index little beside the
# search itself.
_ANN_CANDIDATES_PER_RESULT = 2


_ANN_MIN_CANDIDATES = 100


# From this share of rows allowed, the ANN index is searched unfiltered and the mask applied.
_POSTFILTER_MIN_SHARE = 0.5


# Token-vector rows a TokenVectorIndex keeps from its last reads: about 7 KB each for a
# 150-token passage, so at most about 30 MB. Enough for the passages a cycle of distinct
# questions reads: a smaller cache let such a cycle (the load test's) evict every row
# before its question came round again, so no read was ever a hit.
_CACHED_TOKEN_ROWS = 4096


# Columns of a search result a snapshot does not keep with its rows (the vectors are kept
# apart, normalised).
_NOT_HELD = ("vector", "_distance")


#: The most of a version's rows a newer version may delete or change for searches to go on
#: reading the rest while the newer one loads: past it they would miss too much of the corpus
#: (a re-enrichment, a change of access for everyone), and the first search waits instead.
_MAX_WITHHELD_SHARE = 0.25

#: What makes two versions' rows the same row: its key, the hash of every stored column
#: (access included) and the embed key (model and embedded text, so the vector). The access
#: list is compared as well, where the table has one: whatever wrote a row, one whose access
#: changed is never served as it was.
_SAME_ROW_COLUMNS = ("row_hash", "embed_key")
_ACCESS_COLUMN = "acl"


# Passage divisions kept per table version, one per word budget asked for.
_CACHED_PASSAGE_BUDGETS = 4


_ANALYZER = Analyzer()


log = logging.getLogger(__name__)


# A local table's `_versions` folder whose modification time is at least this old when its
# version is read is trusted to show the next commit as a new modification time (see
# VersionsFolderWatch). File times tick in steps of a few milliseconds; a second is ample.
_SETTLED_NANOSECONDS = 1_000_000_000


# Answers of `rows_when_last_held` kept per reader: a citation of a removed document is
# opened again and again, and each answer reads one version after another.
_CACHED_LAST_HELD = 256


def _utc_now() -> datetime:
    """The time a version's age is measured against (a function, so tests can move it)."""
    return datetime.now(UTC)


def _aware(stamp: datetime) -> datetime:
    """A version's timestamp in UTC: LanceDB gives it as a naive local time."""
    return stamp.astimezone(UTC)


class IndexNotBuilt(RuntimeError):
    """The chunks table does not exist yet: the embedding stage has not run."""


def file_name_words(rel_path: str | None) -> str:
    """The words of a file's name, for BM25: "filings/PEPSICO_2022_10K.pdf" -> "PEPSICO 2022 10K".

    A file's name is often the one place its company, period or subject is written ("2023 Q1
    AAPL.pdf"): questions ask by them, while the passages inside rarely repeat them. A name
    without a letter ("4983.txt", a record id or scan number) names nothing a question asks
    for, so it gives no words.
    """
    stem = PurePosixPath(rel_path or "").stem
    if not re.search(r"[^\W\d_]", stem):
        return ""
    return re.sub(r"[\s_.\-]+", " ", stem).strip()


def sql_string(value: str) -> str:
    """A SQL string literal; quotes are doubled so a value can never end the literal early."""
    return "'" + value.replace("'", "''") + "'"


def sql_in(column: str, values: Iterable[str]) -> str:
    """`column IN ('a', 'b')`, or a predicate matching nothing for an empty list."""
    literals = [sql_string(v) for v in values]
    return f"{column} IN ({', '.join(literals)})" if literals else "false"


def local_folder(uri: str) -> Path | None:
    """The folder of a LanceDB database on this machine's file system; None for object
    stores (s3://, gs://, az://) and other remote URIs."""
    if uri.startswith("file://"):
        return Path(uri.removeprefix("file://"))
    return None if "://" in uri else Path(uri)


class VersionsFolderWatch:
    """Tells, for a table in a local folder, its latest version while no commit can have
    happened, from one `stat` of its `_versions` folder instead of LanceDB's check, which
    costs far more and is asked for every table a search reads.

    Every commit writes a new manifest into `_versions`, which gives the folder a new
    modification time. That time ticks coarsely, so a commit in the same tick as the last
    look would go unseen; the folder's state is therefore trusted only once its modification
    time is older than `settled_ns` when the version was read (git's "racy clean" rule): any
    commit after that has a later time. Until then, and whenever the state differs, the
    caller asks LanceDB.
    """

    def __init__(self, table_folder: Path, settled_ns: int = _SETTLED_NANOSECONDS) -> None:
        self.versions = table_folder / "_versions"
        self.settled_ns = settled_ns
        #: (folder state, the version read after taking it), once the state has settled.
        self._trusted: tuple[tuple[int, int, int, int], int] | None = None

    def state(self) -> tuple[int, int, int, int] | None:
        """What identifies the folder's content now; None when it does not exist."""
        try:
            found = self.versions.stat()
        except FileNotFoundError:
            return None
        return (found.st_ino, found.st_mtime_ns, found.st_ctime_ns, found.st_size)

    def known_version(self, state: tuple[int, int, int, int] | None) -> int | None:
        """The latest version if `state` (taken now) is the trusted one, else None."""
        trusted = self._trusted
        if state is None or trusted is None or trusted[0] != state:
            return None
        return trusted[1]

    def trust(self, state: tuple[int, int, int, int] | None, version: int) -> None:
        """Remembers `version`, read after taking `state`, if the state has settled."""
        settled = state is not None and state[1] <= time.time_ns() - self.settled_ns
        self._trusted = (state, version) if settled and state is not None else None


class PublishedVersions:
    """The version of each table that the last finished index merge published: what
    searches read, so that they never see a state no merge finished, neither while a merge
    commits table by table nor after one stopped before its end (`lorehouse.stages.index_merge`).

    Kept in one small table of the same database (PUBLISHED_TABLE_NAME, a row per table
    the merge writes, rewritten in one commit), so it changes atomically wherever LanceDB
    writes, a folder or an object store. A table it does not name (the eval baseline's), and
    every table of a database without it (built before publishing, or written by the
    embedding stage alone), is read at its latest version. In a local folder the check is
    one `stat` while the table is unchanged (see VersionsFolderWatch).
    """

    def __init__(self, db: lancedb.DBConnection, folder: Path | None) -> None:
        """`folder` is the table's folder on this machine; None for an object store."""
        self._db = db
        self._watch = None if folder is None else VersionsFolderWatch(folder)
        self._table: lancedb.table.Table | None = None
        #: (version of the published table, table name -> version published), last read.
        self._read: tuple[int, dict[str, int | None]] | None = None
        self._lock = threading.Lock()

    def versions(self) -> Mapping[str, int | None] | None:
        """table name -> its published version (None: published as not built yet); None
        when nothing was ever published."""
        watch = self._watch
        # Taken before the version is read, as in TableReader.latest_version.
        state = None if watch is None else watch.state()
        if watch is not None:
            if state is None:
                return None
            known, read = watch.known_version(state), self._read
            if known is not None and read is not None and read[0] == known:
                return read[1]
        table = self._table
        if table is None:
            try:
                table = self._table = self._db.open_table(PUBLISHED_TABLE_NAME)
            except ValueError:  # not found: never published
                return None
        # Not under the lock: on an object store this is a request, which concurrent
        # searches make side by side, as they do for each table's own version.
        version = table.version
        if watch is not None:
            watch.trust(state, version)
        read = self._read
        if read is None or read[0] != version:
            with self._lock:  # the rows of a new version are read once
                read = self._read
                if read is None or read[0] != version:
                    read = self._read = (version, self._rows_at(version))
        return read[1]

    def _rows_at(self, version: int) -> dict[str, int | None]:
        pinned = self._db.open_table(PUBLISHED_TABLE_NAME)
        pinned.checkout(version)
        rows = pinned.to_arrow()
        names, numbers = rows["table_name"].to_pylist(), rows["version"].to_pylist()
        return dict(zip(names, numbers, strict=True))


def best_by_position(scores: np.ndarray, positions: np.ndarray, count: int) -> np.ndarray:
    """Indexes of the `count` highest `scores`; of rows tied with the last one kept, those
    of the lowest `positions`. Which candidates were proposed, and in what order, then
    changes nothing: rows with equal vectors (a document stored twice) tie exactly."""
    last = -np.partition(-scores, count - 1)[count - 1]
    above = np.flatnonzero(scores > last)
    tied = np.flatnonzero(scores == last)
    tied = tied[np.argsort(positions[tied], kind="stable")[: count - len(above)]]
    return np.concatenate([above, tied])


class VersionGone(LookupError):
    """A table version that is no longer kept, or was never written."""

    def __init__(self, version: int, latest: int) -> None:
        super().__init__(
            f"index version {version} is "
            + ("not written yet" if version > latest else "no longer kept")
            + f"; the index is at version {latest}"
        )
        self.version = version
        self.latest = latest


class TableSnapshot:
    """One version of a table, held for searching it: every query of a search asks one.

    What a query needs beyond LanceDB itself is built on first use and kept for the version:

    * **The rows**, every column but the vector, and the vectors as one normalised float32
      matrix (1.5 KB a row at 384 dimensions). Reading even a few rows back from LanceDB
      costs more than the rest of a search, whatever the table size; from memory the rows a
      search shows cost next to nothing.
    * **BM25 postings** of the text columns (see `lorehouse.search.bm25`).
    * **Lookups** of rows by key (and by text, for `holders`) and passage divisions.
    * **Predicate masks.** The rows matching an access or filter predicate, asked of LanceDB
      (the one evaluator of predicates) once per predicate; most callers share a handful.

    With a snapshot folder (`TableReader.snapshot_folder`, the default), all but the masks are
    files every process of the host maps (`SnapshotFiles`): `--workers N` hold one copy in
    the page cache, and a process holds of its own what does not grow with the table
    beyond its bounded caches. Without one, each process holds them in memory.

    Vector search, without a vector index (below the ANN threshold), is one matrix-vector
    product with the mask applied: exact like LanceDB's flat scan, without that scan's cost
    per query, which grows with the table.
    With the index, the IVF_HNSW_SQ search proposes twice the asked number of candidates (at
    least 100) by quantized distance and the product rescores them with the full vectors,
    which is what LanceDB's `refine_factor` does by reading the vectors back from disk.
    """

    def __init__(self, owner: TableReader, pinned: lancedb.table.Table, version: int) -> None:
        self.version = version
        self.key_column = owner.key_column
        self.text_columns = owner.text_columns
        self.derived_text_fields = owner.derived_text_fields
        self.analyzer = owner.analyzer
        self._table = pinned
        #: The folder this host's processes share each version's snapshot files in; None:
        #: each process holds its own copy.
        self._snapshot_folder = owner.snapshot_folder
        self._files: SnapshotFiles | None = None
        self.metadata: dict[bytes, bytes] = pinned.schema.metadata or {}
        #: Whether vector search goes through the ANN index (else it scores every row).
        self.vector_indexed = any(list(i.columns) == ["vector"] for i in pinned.list_indices())
        self._lock = threading.Lock()
        #: Held while arrays derived from the rows are computed: once per version.
        self._derive_lock = threading.Lock()
        self._row_count: int | None = None
        self._rows: pa.Table | None = None
        self._batches: list[pa.RecordBatch] = []
        self._batch_starts = np.zeros(1, dtype=np.int64)
        self._derived: dict[str, dict[str, np.ndarray]] = {}
        self._unit_vectors: np.ndarray | None = None
        self._row_order = np.empty(0, dtype=np.int64)
        self._sorted_row_ids = np.empty(0, dtype=np.uint64)
        self._bm25: BM25Index | None = None
        self._masks: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._passages: dict[int, PassageRuns] = {}
        #: The rows a search may read; None: all. A snapshot served while a newer version
        #: loads withholds the rows that version deleted or changed (`withholding_changes`).
        self._served: np.ndarray | None = None
        #: Each row's recorded language as codes, and the languages, once asked for.
        self._languages: tuple[np.ndarray, list[str]] | None = None
        #: scope -> each language's share of the scope's rows (None: none recorded).
        self._language_shares: dict[str, dict[str, float] | None] = {}

    # -- what is held in memory ------------------------------------------------------------------

    def _load(self) -> None:
        """Reads (or maps) the rows and their vectors once. What only some searches need
        (BM25 postings, key lookups) is built on first use: a search of sentence windows
        never ranks them by BM25 nor reads them by key."""
        with self._lock:
            if self._row_count is not None:
                return
            arrow, self._unit_vectors = self._read_rows_and_vectors(
                max(1, self._table.count_rows())
            )
            if self._files is None:  # LanceDB's small batches, grouped as a file's are
                arrow = pa.Table.from_batches(list(regrouped(arrow)), arrow.schema)
            self._rows = arrow
            self._batches = arrow.to_batches()
            lengths = [batch.num_rows for batch in self._batches]
            self._batch_starts = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])
            self._row_count = arrow.num_rows
        # Row ids -> positions, for what LanceDB answers by row id (masks, ANN results).
        order = self._arrays("rowids", self._row_id_order)
        self._row_order, self._sorted_row_ids = order["order"], order["sorted"]

    def _row_id_order(self) -> dict[str, np.ndarray]:
        assert self._rows is not None
        row_ids = self._rows["_rowid"].to_numpy()
        order = np.argsort(row_ids, kind="stable")
        return {"order": order, "sorted": row_ids[order]}

    def _arrays(
        self, name: str, compute: Callable[[], Mapping[str, np.ndarray]]
    ) -> dict[str, np.ndarray]:
        """The arrays `name` derived from this version's rows: from the host's snapshot
        folder where there is one (computed by the first process to ask), else computed
        here; kept for the version either way. `compute` must not derive others: the
        host's lock is held while it runs."""
        found = self._derived.get(name)
        if found is not None:
            return found
        with self._derive_lock:
            found = self._derived.get(name)
            if found is None:
                files = self._files
                found = dict(compute()) if files is None else files.arrays(name, compute)
                self._derived[name] = found
        return found

    def _bm25_index(self) -> BM25Index:
        """The BM25 postings of the text columns, built (or mapped) on first use."""
        self._load()
        if self._bm25 is None:
            assert self.text_columns, "no text columns"
            # Postings of another analyzer (other languages) are other arrays.
            name = "bm25" if self.analyzer.name == "en" else f"bm25.{self.analyzer.name}"
            arrays = self._arrays(name, self._bm25_arrays)
            fields = {
                field: FieldPostings.from_arrays(
                    {
                        part: arrays[f"{field}.{part}"]
                        for part in ("terms", "starts", "rows", "counts", "lengths")
                    }
                )
                for field in self._bm25_fields()
            }
            index = BM25Index(_KeyColumn(self), fields, self.analyzer)
            with self._lock:
                self._bm25 = self._bm25 or index
        return self._bm25

    def _bm25_fields(self) -> list[str]:
        return [*self.text_columns, *(name for name, _, _ in self.derived_text_fields)]

    def _bm25_arrays(self) -> dict[str, np.ndarray]:
        """Every field's postings as arrays named `field.part`."""
        assert self._rows is not None
        texts = {name: self._rows[name].to_pylist() for name in self.text_columns}
        for name, column, derive in self.derived_text_fields:
            texts[name] = [derive(value) for value in self._rows[column].to_pylist()]
        # Each row read in the language its chunk recorded: told once, when it was cut.
        languages = (
            self._rows["language"].to_pylist() if "language" in self._rows.column_names else None
        )
        arrays: dict[str, np.ndarray] = {}
        for field, values in texts.items():
            postings = FieldPostings.build(values, self.analyzer, languages)
            arrays.update({f"{field}.{part}": a for part, a in postings.arrays().items()})
        return arrays

    def _read_rows_and_vectors(self, limit: int) -> tuple[pa.Table, np.ndarray]:
        """Every row with its row id, without the vector, and the unit vectors in row order.

        With a snapshot folder, both are files every process of the host maps
        (`SnapshotFiles`): the first process to load a version writes them, the others map
        them, so `--workers N` share one copy through the page cache instead of holding N,
        and pages no search touches are never read in.
        """
        if self._snapshot_folder is not None:
            width = self._table.schema.field("vector").type.list_size
            files = SnapshotFiles.of(self._snapshot_folder, self._table)
            shared = files.load(
                limit, width, lambda out: self._read_rows_with_vectors(limit, out)[0]
            )
            if shared is not None:
                self._files = files
                return shared
        return self._read_rows_with_vectors(limit)

    def _read_rows_with_vectors(
        self, limit: int, out: np.ndarray | None = None
    ) -> tuple[pa.Table, np.ndarray]:
        """The rows and their unit vectors, read from the table, the vectors into `out`
        (a file's mapping) when given.

        Batch by batch, each batch's vectors copied into one preallocated matrix and then
        dropped: reading the whole table first held more than twice what is kept, at its
        peak.
        """
        width = self._table.schema.field("vector").type.list_size
        unit_vectors = np.zeros((limit, width), dtype=np.float32) if out is None else out
        kept: list[pa.RecordBatch] = []
        filled = 0
        reader = self._table.search().with_row_id(True).limit(limit).to_batches()
        for batch in reader:
            if filled + batch.num_rows > len(unit_vectors):
                break  # more rows than counted: the caller sees the count differ
            vectors = batch.column("vector").flatten().to_numpy(zero_copy_only=False)
            block = unit_vectors[filled : filled + batch.num_rows]
            block[:] = vectors.reshape(-1, width)
            # Normalised a batch at a time: the norms of the whole matrix at once would take
            # a temporary as large as the matrix.
            norms = np.linalg.norm(block, axis=1, keepdims=True)
            np.divide(block, norms, out=block, where=norms > 0)
            filled += batch.num_rows
            kept.append(batch.select([n for n in batch.schema.names if n not in _NOT_HELD]))
        unit_vectors = unit_vectors[:filled]
        if not kept:  # an empty table
            schema = self._table.schema
            fields = [schema.field(n) for n in schema.names if n not in _NOT_HELD]
            empty = pa.schema([*fields, pa.field("_rowid", pa.uint64())])
            return empty.empty_table(), unit_vectors
        return pa.Table.from_batches(kept), unit_vectors

    def mask(self, where: str | None) -> np.ndarray:
        """The rows matching `where` as a boolean mask over this version's rows."""
        return self._predicate(where)[0]

    def _predicate(self, where: str | None) -> tuple[np.ndarray, np.ndarray]:
        """(mask, positions of the rows it excludes) of `where`, asked of LanceDB once."""
        self._load()
        assert self._row_count is not None
        with self._lock:
            cached = self._masks.get(where or "")
        if cached is not None:
            return cached
        mask = np.ones(self._row_count, dtype=bool)
        if where:
            limit = max(1, self._row_count)
            # The key column rides along: with no column selected LanceDB reads them all,
            # the vectors included, many times the bytes of the key column alone.
            query = self._table.search().where(where).select([self.key_column])
            query = query.with_row_id(True)
            matching = query.limit(limit).to_arrow()["_rowid"].to_numpy()
            mask[:] = False
            mask[self._positions_of(matching)] = True
        if self._served is not None:
            mask &= self._served
        found = (mask, np.flatnonzero(~mask))
        with self._lock:
            if len(self._masks) >= _CACHED_MASKS:
                self._masks.pop(next(iter(self._masks)))
            self._masks[where or ""] = found
        return found

    # -- a newer version --------------------------------------------------------------------

    @property
    def row_count(self) -> int | None:
        """Rows of this version; None until a search loaded them."""
        return self._row_count

    def withholding_changes(
        self, newer: lancedb.table.Table, max_withheld_share: float = _MAX_WITHHELD_SHARE
    ) -> TableSnapshot | None:
        """This loaded snapshot less every row `newer` (a later version) does not hold as it
        is here: what searches read while `newer`'s own snapshot loads (`TableReader.snapshot`).

        A row is kept when `newer` holds a row with the same key, row hash and embed key: the
        same row, wherever compaction moved it. A row deleted, edited, moved to another
        group or narrowed in access is withheld from every query at once (masks, BM25
        statistics, lookups); a row `newer` adds appears with its snapshot. Reads three
        short columns of `newer`, not its rows and vectors.

        None when it would not serve: never loaded, another model or layout, or more than
        `max_withheld_share` of the rows withheld.
        """
        rows = self._rows
        if rows is None or (newer.schema.metadata or {}) != self.metadata:
            return None
        columns = [self.key_column, *_SAME_ROW_COLUMNS]
        if any(name not in rows.column_names for name in columns):
            return None
        if _ACCESS_COLUMN in rows.column_names:
            columns.append(_ACCESS_COLUMN)
        held = newer.to_lance().to_table(columns=columns)
        kept = pc.is_in(_same_row_keys(rows, columns), value_set=_same_row_keys(held, columns))
        served = kept.to_numpy(zero_copy_only=False).astype(bool)
        withheld = len(served) - int(served.sum())
        if withheld > max_withheld_share * max(1, len(served)):
            return None
        view = copy.copy(self)  # the loaded rows and what was derived of them, shared
        view._masks = {}
        view._language_shares = {}
        view._served = served
        return view

    def warm_like(self, *replaced: TableSnapshot) -> None:
        """Loads this version and builds what the snapshots it replaces had built (postings,
        lookups, passage divisions, the masks of the callers searching): the first search
        after the swap finds them ready instead of building them itself."""
        self._load()
        if any(old._bm25 is not None for old in replaced) and self.text_columns:
            self._bm25_index()
        derived = {name for old in replaced for name in list(old._derived)}
        for name in sorted(derived):
            if name.startswith("find."):
                column = name.removeprefix("find.")
                self._arrays(name, lambda column=column: self._digest_order(column))
        for budget in {budget for old in replaced for budget in list(old._passages)}:
            self.passages(budget)
        wheres: dict[str, None] = {}
        for old in replaced:
            with old._lock:
                wheres.update(dict.fromkeys(old._masks))
        for where in list(wheres)[-_CACHED_MASKS:]:
            self._predicate(where or None)

    def _positions_of(self, row_ids: np.ndarray) -> np.ndarray:
        """Positions in this snapshot's rows of LanceDB row ids of the same version."""
        return self._row_order[np.searchsorted(self._sorted_row_ids, row_ids)]

    # -- queries ---------------------------------------------------------------------------------

    def embedding_model(self) -> tuple[str, int]:
        """(model name, dimension) the stored vectors were made with."""
        return self.metadata[MODEL_KEY].decode(), int(self.metadata[DIMENSION_KEY])

    def vector_search(
        self, vector: np.ndarray, where: str | None, limit: int, columns: Sequence[str]
    ) -> list[dict]:
        """Nearest rows by cosine distance (as `_distance`, 1 - cosine), filtered first."""
        positions, cosines = self._nearest(vector, where, limit)
        found = self._take(positions.tolist(), columns)
        for row, cosine in zip(found, cosines.tolist(), strict=True):
            row["_distance"] = 1.0 - cosine
        return found

    def vector_ranking(
        self, vector: np.ndarray, where: str | None, limit: int, column: str | None = None
    ) -> list[tuple[str, float]]:
        """(value of `column`, default the key; cosine) of the nearest rows, best first:
        `vector_search` without a dict per row, for a leg that ranks ids: a question's chunk
        and sentence-window searches would build hundreds of dicts to read two values of
        each."""
        positions, cosines = self._nearest(vector, where, limit)
        keys = self._values(column or self.key_column, positions)
        return list(zip(keys, cosines.tolist(), strict=True))

    def _nearest(
        self, vector: np.ndarray, where: str | None, limit: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """(positions, cosines) of the `limit` nearest rows matching `where`, best first and
        ties in row order."""
        nothing = (np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32))
        norm = float(np.linalg.norm(vector))
        if norm == 0.0 or limit <= 0:
            return nothing
        allowed, hidden = self._predicate(where)
        assert self._unit_vectors is not None
        unit_query = np.asarray(vector, dtype=np.float32) / norm
        if self.vector_indexed:
            # Candidates proposed by the ANN index, rescored exactly.
            rows = self._ann_candidates(vector, where, allowed, limit)
            scores = self._unit_vectors[rows] @ unit_query
            count = min(limit, len(rows))
        else:
            rows = None
            scores = self._unit_vectors @ unit_query
            scores[hidden] = -np.inf
            count = min(limit, len(scores) - len(hidden))
        if count <= 0:
            return nothing
        if count >= len(scores):
            best = np.arange(len(scores))
        else:
            best = best_by_position(scores, np.arange(len(scores)) if rows is None else rows, count)
        positions = best if rows is None else rows[best]
        order = np.lexsort((positions, -scores[best]))
        return positions[order], scores[best[order]]

    def _ann_candidates(
        self, vector: np.ndarray, where: str | None, allowed: np.ndarray, limit: int
    ) -> np.ndarray:
        """Positions of the rows the ANN index proposes for the `limit` nearest allowed ones.

        When most rows are allowed (an access filter, every caller), the index is searched
        unfiltered for enough extra candidates and the mask applied after, which costs less
        per query than LanceDB's prefilter. A narrow predicate (a filter on one document), or
        too few candidates left after the mask, uses the prefilter.
        """
        wanted = max(_ANN_CANDIDATES_PER_RESULT * limit, _ANN_MIN_CANDIDATES)
        share = float(allowed.mean()) if len(allowed) else 0.0
        if share >= _POSTFILTER_MIN_SHARE:
            # Restricted rows cluster (a document's chunks are alike), so a fifth more.
            rows = self._ann_search(vector, None, math.ceil(1.2 * wanted / share))
            rows = rows[allowed[rows]]
            if len(rows) >= min(limit, int(allowed.sum())):
                return rows[:wanted]
        rows = self._ann_search(vector, where, wanted)
        # The same predicate on the same version: the mask keeps every row, and it stays the
        # one word on access, whichever way the rows were found.
        return rows[allowed[rows]]

    def _ann_search(self, vector: np.ndarray, where: str | None, limit: int) -> np.ndarray:
        """Positions of the ANN index's `limit` nearest rows (matching `where` if given)."""
        query = self._table.search(vector, vector_column_name="vector").distance_type("cosine")
        if where:
            query = query.where(where, prefilter=True)
        # Row ids alone: asking for the key column too costs a read of those rows, a large
        # part of the search.
        arrow = query.select(["_distance"]).with_row_id(True).limit(limit).to_arrow()
        return self._positions_of(arrow["_rowid"].to_numpy())

    def text_ranking(
        self,
        text: str,
        where: str | None,
        limit: int,
        fields: Sequence[str] | Mapping[str, float] | None = None,
        scope: str | None = None,
        question_word_weight: float = 1.0,
    ) -> list[tuple[str, float]]:
        """(key, BM25 score) of the best rows matching `where`, without reading the rows.

        The BM25 statistics are those of the rows matching `scope` (default: `where`), so
        pass the caller's access clause as `scope` and access plus filters as `where`: a
        filter narrows the results without changing how terms are weighted, and rows outside
        the caller's access change neither. Each field weighs 1 unless a mapping says; the
        query's question words ("how", "do", "I") weigh `question_word_weight`.
        """
        allowed = self.mask(where)
        visible = allowed if scope is None or scope == where else self.mask(scope)
        weights = (
            fields
            if isinstance(fields, Mapping)
            else dict.fromkeys(fields or self.text_columns, 1.0)
        )
        return self._bm25_index().search(
            text, weights, visible, allowed, limit, question_word_weight
        )

    def language_share(self, language: str, scope: str | None) -> float:
        """The share of the rows matching `scope` (the caller's access clause) that their
        chunks record as in `language`; 1.0 for a table that records none."""
        shares = self.language_shares(scope)
        return 1.0 if shares is None else shares.get(language, 0.0)

    def main_language(self, scope: str | None) -> str | None:
        """The language most rows matching `scope` record; None for a table that records
        none or a scope that matches no row."""
        shares = self.language_shares(scope)
        if not shares:
            return None
        return max(sorted(shares), key=lambda language: shares[language])

    def language_shares(self, scope: str | None) -> dict[str, float] | None:
        """Each recorded language's share of the rows matching `scope`; None for a table that
        records none, {} for a scope that matches no row.

        Asked by every hybrid search of a deployment of several languages, so it is kept per
        scope: the few callers' scopes a server sees cost one pass each.
        """
        key = scope or ""
        with self._lock:
            if key in self._language_shares:
                return self._language_shares[key]
        allowed = self.mask(scope)
        codes, names = self._language_codes()
        shares: dict[str, float] | None = None
        if codes is not None:
            counts = np.bincount(codes[allowed & (codes >= 0)], minlength=len(names))
            visible = int(np.count_nonzero(allowed))
            shares = {
                name: int(count) / visible
                for name, count in zip(names, counts, strict=True)
                if count
            }
        with self._lock:
            if len(self._language_shares) >= _CACHED_MASKS:
                self._language_shares.pop(next(iter(self._language_shares)))
            self._language_shares[key] = shares
        return shares

    def _language_codes(self) -> tuple[np.ndarray | None, list[str]]:
        """Each row's recorded language as a small integer, and the languages they number;
        (None, []) for a table that records none."""
        self._load()
        assert self._rows is not None
        if "language" not in self._rows.column_names:
            return None, []
        with self._lock:
            held = self._languages
        if held is None:
            encoded = pc.dictionary_encode(self._rows["language"].combine_chunks())
            codes = encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False)
            held = (codes, [str(name) for name in encoded.dictionary.to_pylist()])
            with self._lock:
                self._languages = held
        return held

    def mentions(self, phrase: str, scope: str | None) -> bool:
        """Whether a row matching `scope` (the caller's access clause) holds `phrase` in its
        text columns; see `BM25Index.mentions`."""
        return self._bm25_index().mentions(phrase, self.mask(scope))

    def text_search(
        self,
        text: str,
        where: str | None,
        limit: int,
        columns: Sequence[str],
        fields: Sequence[str] | Mapping[str, float] | None = None,
        scope: str | None = None,
        question_word_weight: float = 1.0,
    ) -> list[dict]:
        """`text_ranking` with the rows read; each row carries its score as `_score`."""
        ranked = self.text_ranking(text, where, limit, fields, scope, question_word_weight)
        found = self.rows_by_key([key for key, _ in ranked], where, columns)
        return [{**found[key], "_score": score} for key, score in ranked if key in found]

    def rows_by_key(
        self, keys: Sequence[str], where: str | None, columns: Sequence[str]
    ) -> dict[str, dict]:
        """key -> row for the `keys` whose rows match `where` (others are left out)."""
        if not keys:
            return {}
        allowed = self.mask(where)
        found = self._find(self.key_column, keys)
        rows = [row for key in dict.fromkeys(keys) for row in found.get(key, ())[:1]]
        rows = [row for row in rows if allowed[row]]
        return {row[self.key_column]: row for row in self._take(rows, columns)}

    def holders(self, column: str, values: Iterable[str], where: str) -> dict[str, bool]:
        """value -> whether a row holding it in `column` matches `where`, for those of
        `values` some row of this version holds (whole values only)."""
        wanted = sorted({value for value in values if value is not None})
        if not wanted:
            return {}
        allowed = self.mask(where)
        return {
            value: bool(allowed[rows].any()) for value, rows in self._find(column, wanted).items()
        }

    def _find(self, column: str, values: Sequence[str]) -> dict[str, list[int]]:
        """value -> positions of the rows holding it in `column`, ascending, for the values
        some row holds: a binary search of the column's sorted value digests, each hit
        checked against the row itself (so a digest shared by two values finds only the
        one asked)."""
        self._load()
        lookup = self._arrays(f"find.{column}", lambda: self._digest_order(column))
        digests, order = lookup["digests"], lookup["order"]
        asked = _digests(values)
        lefts = np.searchsorted(digests, asked, side="left")
        rights = np.searchsorted(digests, asked, side="right")
        candidates = [order[left:right] for left, right in zip(lefts, rights, strict=True)]
        held = self._values(column, np.concatenate([np.empty(0, np.int64), *candidates]))
        found: dict[str, list[int]] = {}
        at = 0
        for value, rows in zip(values, candidates, strict=True):
            for row in rows.tolist():
                if held[at] == value:
                    found.setdefault(value, []).append(row)
                at += 1
        return {value: sorted(rows) for value, rows in found.items()}

    def _digest_order(self, column: str) -> dict[str, np.ndarray]:
        assert self._rows is not None
        digests = _digests(self._rows[column].to_pylist())
        order = np.argsort(digests, kind="stable")
        return {"digests": digests[order], "order": order}

    def passages(self, max_words: int) -> PassageRuns:
        """key -> the keys of its passage, in reading order: each document's rows divided
        into runs of consecutive rows up to `max_words` (lorehouse/search/passages.py). Computed on
        first use per budget and kept with this version, which no write changes."""
        self._load()
        with self._lock:
            cached = self._passages.get(max_words)
        if cached is not None:
            return cached
        # Counted first: arrays are never derived while others are (one lock holds both).
        words = self._arrays("words", self._word_counts)["words"]
        found = PassageRuns(
            self, self._arrays(f"passages.{max_words}", lambda: self._runs(max_words, words))
        )
        with self._lock:
            if len(self._passages) >= _CACHED_PASSAGE_BUDGETS:
                self._passages.pop(next(iter(self._passages)))
            self._passages[max_words] = found
        return found

    def _runs(self, max_words: int, words: np.ndarray) -> dict[str, np.ndarray]:
        """The passage runs as arrays: `members` (positions, run after run), `starts` (where
        each run begins in it, and its end) and `run_of` (each position's run)."""
        assert self._rows is not None
        runs = passage_runs(
            self._rows["doc_id"].to_pylist(),
            self._rows["position"].to_pylist(),
            self._rows["is_table"].to_pylist(),
            words.tolist(),
            max_words,
        )
        members = np.fromiter((row for run in runs for row in run), np.int64, len(words))
        starts = np.zeros(len(runs) + 1, dtype=np.int64)
        np.cumsum([len(run) for run in runs], out=starts[1:])
        run_of = np.empty(len(words), dtype=np.int32)
        run_of[members] = np.repeat(np.arange(len(runs), dtype=np.int32), np.diff(starts))
        return {"members": members, "starts": starts, "run_of": run_of}

    def _word_counts(self) -> dict[str, np.ndarray]:
        """Each row's words of embedded text, counted once per version for every budget."""
        assert self._rows is not None
        texts = self._rows["text_embed"].to_pylist()
        return {"words": np.fromiter((len(t.split()) for t in texts), np.int32, len(texts))}

    def _take(self, rows: Sequence[int] | np.ndarray, columns: Sequence[str]) -> list[dict]:
        """Rows by position, as dicts of `columns`, in the order asked."""
        names = list(dict.fromkeys([self.key_column, *columns]))
        found: list[dict] = [{}] * len(rows)
        for batch, places, local in self._by_batch(rows):
            for place, row in zip(places, batch.select(names).take(local).to_pylist(), strict=True):
                found[place] = row
        return found

    def _values(self, name: str, rows: Sequence[int] | np.ndarray) -> list:
        """One column's values at positions `rows`, in the order asked: a search reads its
        hits' values alone, whichever rows the snapshot holds."""
        found: list = [None] * len(rows)
        for batch, places, local in self._by_batch(rows):
            for place, value in zip(
                places, batch.column(name).take(local).to_pylist(), strict=True
            ):
                found[place] = value
        return found

    def _by_batch(
        self, rows: Sequence[int] | np.ndarray
    ) -> Iterator[tuple[pa.RecordBatch, list[int], pa.Array]]:
        """(batch, places in `rows`, positions within the batch) for each batch `rows` fall
        in: a take from one batch reads that batch alone, where a take from the whole table
        would first join its batches into one copy."""
        self._load()
        positions = np.asarray(rows, dtype=np.int64)
        if not len(positions):
            return
        batch_of = np.searchsorted(self._batch_starts, positions, side="right") - 1
        for index in np.unique(batch_of).tolist():
            places = np.flatnonzero(batch_of == index)
            local = positions[places] - self._batch_starts[index]
            yield self._batches[index], places.tolist(), pa.array(local, pa.int64())


class _KeyColumn(Sequence[str]):
    """A snapshot's key column as a sequence, read a value at a time: BM25 reads the keys of
    the rows it returns, never the column."""

    def __init__(self, snapshot: TableSnapshot) -> None:
        self._snapshot = snapshot

    def __len__(self) -> int:
        return self._snapshot._row_count or 0

    def take(self, rows: Sequence[int]) -> list[str]:
        """The keys of `rows`, in the order asked."""
        return self._snapshot._values(self._snapshot.key_column, rows)

    @overload
    def __getitem__(self, row: int) -> str: ...

    @overload
    def __getitem__(self, row: slice) -> list[str]: ...

    def __getitem__(self, row: int | slice) -> str | list[str]:
        if isinstance(row, slice):
            return self._snapshot._values(self._snapshot.key_column, range(len(self))[row])
        return self._snapshot._values(self._snapshot.key_column, [row])[0]


class PassageRuns:
    """One word budget's passage of each row of a snapshot, looked up by key."""

    def __init__(self, snapshot: TableSnapshot, arrays: Mapping[str, np.ndarray]) -> None:
        self._snapshot = snapshot
        self._members = arrays["members"]
        self._starts = arrays["starts"]
        self._run_of = arrays["run_of"]

    def get(self, key: str, default: tuple[str, ...] | None = None) -> tuple[str, ...] | None:
        """The keys of the passage holding the row `key`, in reading order."""
        rows = self._snapshot._find(self._snapshot.key_column, [key]).get(key)
        if not rows:
            return default
        run = int(self._run_of[rows[0]])
        members = self._members[self._starts[run] : self._starts[run + 1]]
        return tuple(self._snapshot._values(self._snapshot.key_column, members))

    def __getitem__(self, key: str) -> tuple[str, ...]:
        found = self.get(key)
        if found is None:
            raise KeyError(key)
        return found


def _same_row_keys(rows: pa.Table, columns: Sequence[str]) -> pa.Array:
    """Each row's `columns` joined into one string, for matching rows across versions (a
    list column's values joined first, in their order)."""
    values = [
        pc.binary_join(rows[name], "\x1e")
        if pa.types.is_list(rows.schema.field(name).type)
        else rows[name]
        for name in columns
    ]
    joined = pc.binary_join_element_wise(
        *values, "\x1f", null_handling="replace", null_replacement=""
    )
    return joined.combine_chunks() if isinstance(joined, pa.ChunkedArray) else joined


def _digests(values: Iterable[str | None]) -> np.ndarray:
    """An 8-byte BLAKE2b digest of each value (0 for None), the same in every process."""
    return np.fromiter(
        (
            0
            if value is None
            else int.from_bytes(hashlib.blake2b(value.encode(), digest_size=8).digest(), "little")
            for value in values
        ),
        dtype=np.uint64,
    )


def vector_values(column: pa.ChunkedArray) -> list[np.ndarray]:
    """A `vector` column as arrays: float32 rows, or the raw bytes of packed token vectors."""
    if pa.types.is_binary(column.type):
        return [np.frombuffer(value, dtype=np.uint8) for value in column.to_pylist()]
    return [
        np.asarray(vector, dtype=np.float32) for vector in column.to_numpy(zero_copy_only=False)
    ]


@dataclass(frozen=True)
class _TokenRowOffsets:
    """One version of the token vector table, readable by row offset."""

    version: int
    dataset: lance.LanceDataset
    #: chunk id -> row offset in `dataset`
    rows: dict[str, int]


R = TypeVar("R", bound="TableReader")


class TableReader:
    """One table of a LanceDB database (a folder or s3:// URI), read: the version searches
    read (the published one, else the latest), a snapshot of it that searches share, and
    rows by predicate at any kept version."""

    name: str = TABLE_NAME
    key_column: str = "chunk_id"
    text_columns: tuple[str, ...] = TEXT_COLUMNS
    #: BM25 fields derived from a column when the postings are built: (field, column, how).
    #: Derived rather than stored, so they change without re-embedding a table.
    derived_text_fields: tuple[tuple[str, str, Callable[[str | None], str]], ...] = ()
    #: Whether `vector` is searched by nearness (and so has a snapshot to search).
    nearest_neighbour_search: bool = True
    #: How long a version stays readable by `rows_at` after a later one replaced it; None:
    #: for as long as its files are kept.
    keep_versions: timedelta | None = None

    def __init__(
        self,
        uri: str,
        storage_options: dict[str, str] | None = None,
        db: lancedb.DBConnection | None = None,
        snapshot_folder: Path | None = None,
        cache_bytes: tuple[int, int] | None = None,
        warm_min_rows: int | None = None,
        analyzer: TextAnalyzer | None = None,
    ) -> None:
        """`cache_bytes`: (index, metadata) cache bounds of the connection opened here
        (LanceDB's defaults, 6 GiB and 1 GiB, when None); a `db` given keeps its own.
        `warm_min_rows`: rows of the snapshot searched from which a new version loads in the
        background (see `snapshot`; the deployment's `search_warm_min_rows`); None loads
        every version in the search that first reads it. `analyzer`: how BM25 reads the text
        columns and queries (English when None)."""
        self.uri = uri
        self.warm_min_rows = warm_min_rows
        self.analyzer = analyzer or _ANALYZER
        self._storage_options = storage_options
        #: Where this host's processes share searched versions' snapshots
        #: (`SnapshotFiles`); None: each process holds its own.
        self.snapshot_folder = snapshot_folder
        # Every read of the latest version sees what another process (a materialization)
        # committed since: LanceDB checks for a newer version on each call, which costs less
        # than a checkout_latest() before each read.
        # Imported here, not with the module: a process that loads the code location but
        # reads no table (the webserver, the daemon, most step processes) never loads it.
        import lancedb

        session = None if cache_bytes is None else lancedb.Session(*cache_bytes)
        self._db = db or lancedb.connect(
            uri,
            storage_options=storage_options,
            read_consistency_interval=timedelta(0),
            session=session,
        )
        self._table: lancedb.table.Table | None = None
        # The older version `rows_at` read last.
        self._pinned: lancedb.table.Table | None = None
        # (version, the table opened at it): the published version `rows` reads.
        self._at_published: tuple[int, lancedb.table.Table] | None = None
        # version -> when it was written, for the versions listed so far (they never change).
        self._written: dict[int, datetime] = {}
        self._last_held: LRUCache[tuple[object, ...], list[dict] | None] = LRUCache(
            _CACHED_LAST_HELD
        )
        self._last_held_lock = threading.Lock()
        # What searches of the latest version seen share (see TableSnapshot).
        self._snapshot: TableSnapshot | None = None
        self._snapshot_lock = threading.Lock()
        # While a newer version loads in the background: its snapshot, the thread loading it,
        # and what searches read meanwhile (`_snapshot` less what the newer one changed).
        self._warming: TableSnapshot | None = None
        self._warm_thread: threading.Thread | None = None
        self._serving: TableSnapshot | None = None
        # A version whose background load failed: the next search loads it itself, so the
        # error reaches a caller.
        self._warm_failed: int | None = None
        folder = local_folder(uri)
        self._folder = None if folder is None else folder / f"{self.name}.lance"
        self._versions_watch = None if self._folder is None else VersionsFolderWatch(self._folder)
        self._published = PublishedVersions(
            self._db, None if folder is None else folder / f"{PUBLISHED_TABLE_NAME}.lance"
        )

    def sibling(self, table_type: type[R]) -> R:
        """Another table of the same database, sharing this connection and its published
        versions."""
        table = table_type(
            self.uri,
            self._storage_options,
            db=self._db,
            snapshot_folder=self.snapshot_folder,
            warm_min_rows=self.warm_min_rows,
            analyzer=self.analyzer,
        )
        table._published = self._published
        return table

    def published_versions(self) -> Mapping[str, int | None] | None:
        """The database's published table versions (see PublishedVersions.versions)."""
        return self._published.versions()

    def published_version(self) -> int | None:
        """This table's published version; None when searches read its latest (no version
        of it was published). Raises IndexNotBuilt when it was published as not built."""
        published = self._published.versions()
        if published is None or self.name not in published:
            return None
        version = published[self.name]
        if version is None:
            raise IndexNotBuilt(
                f"no '{self.name}' table published in {self.uri}; run `lorehouse materialize`"
            )
        return version

    def exists(self) -> bool:
        """Whether the embedding stage has created the table.

        A local table without its folder is missing without asking LanceDB to list the
        database, a call that costs far more than a look at the folder: a search of an index
        built before sentence windows asks each time.
        """
        if self._folder is not None and not self._folder.is_dir():
            return False
        return self.name in self._db.list_tables().tables

    def table(self) -> lancedb.table.Table:
        """The table at its latest version; raises IndexNotBuilt before the first build."""
        if self._table is None:
            if not self.exists():
                raise IndexNotBuilt(
                    f"no '{self.name}' table in {self.uri}; run `lorehouse materialize`"
                )
            self._table = self._db.open_table(self.name)
        return self._table

    def embedding_model(self) -> tuple[str, int]:
        """(model name, dimension) the stored vectors were made with."""
        metadata = self.table().schema.metadata or {}
        return metadata[MODEL_KEY].decode(), int(metadata[DIMENSION_KEY])

    def is_current(self, model: str) -> bool:
        """Whether the table holds `model`'s vectors in today's column layout."""
        metadata = self.table().schema.metadata or {}
        return (
            metadata.get(MODEL_KEY, b"").decode() == model
            and metadata.get(LAYOUT_KEY, b"").decode() == TABLE_LAYOUT
        )

    def snapshot(self) -> TableSnapshot:
        """The table at the version searches read (`latest_version`), built once per version.

        A search takes one snapshot and asks it everything (ranking, predicate masks, rows),
        so what it shows is one version of the table even while a materialization commits.
        Only tables searched by vector have one (the token vectors are read by chunk id).

        A new version of a table of `warm_min_rows` or more is loaded in the background: its
        first search would otherwise wait for every row and vector to be read and the
        postings built, minutes at a million rows, and every search behind it too. Until it
        is ready searches read the snapshot before it less what the new version deleted,
        changed or narrowed (`TableSnapshot.withholding_changes`), so nothing the new version
        withdrew is shown; what it added is shown once it is ready. When the two differ too
        much, or a background load failed, the search loads the version itself, as below
        `warm_min_rows`.
        """
        if not self.nearest_neighbour_search:
            raise TypeError(f"the '{self.name}' table is read by key, not searched")
        version = self.latest_version()
        with self._snapshot_lock:
            current = self._snapshot
            if current is not None and current.version == version:
                return current
            warming, serving = self._warming, self._serving
            if warming is not None and serving is not None and warming.version == version:
                return serving
            pinned = self._db.open_table(self.name)
            pinned.checkout(version)
            fresh = TableSnapshot(self, pinned, version)
            view = self._served_while_loading(current, pinned, version)
            if view is None:
                self._snapshot, self._warming, self._serving = fresh, None, None
                return fresh
            replaced = [old for old in (current, serving, view) if old is not None]
            self._warming, self._serving = fresh, view
            thread = threading.Thread(
                target=self._warm,
                args=(fresh, replaced),
                name=f"lorehouse-load-{self.name}-{version}",
                daemon=True,
            )
            self._warm_thread = thread
            thread.start()
            return view

    def _served_while_loading(
        self, current: TableSnapshot | None, pinned: lancedb.table.Table, version: int
    ) -> TableSnapshot | None:
        """What searches read while `version` loads in the background; None: they wait."""
        rows = None if current is None else current.row_count
        if (
            rows is None
            or self.warm_min_rows is None
            or rows < self.warm_min_rows
            or version == self._warm_failed
        ):
            return None
        assert current is not None
        started = time.perf_counter()
        try:
            view = current.withholding_changes(pinned)
        except (OSError, RuntimeError, ValueError) as error:
            # The load below reads the same files: a caller sees its error if it fails too.
            log.warning(
                "comparing %s version %d with %d failed (%s); searches wait for its load",
                self.name,
                current.version,
                version,
                error,
            )
            return None
        if view is None:
            log.info(
                "%s version %d differs too much from %d to serve it while loading; "
                "searches wait for its load",
                self.name,
                version,
                current.version,
            )
            return None
        withheld = rows - view.mask(None).sum()
        log.info(
            "%s version %d loads in the background; searches read version %d less %d "
            "withdrawn rows meanwhile (compared in %.2f s)",
            self.name,
            version,
            current.version,
            withheld,
            time.perf_counter() - started,
        )
        return view

    def _warm(self, fresh: TableSnapshot, replaced: Sequence[TableSnapshot]) -> None:
        """Loads `fresh` and makes it the snapshot searches read, unless a newer version
        took its place meanwhile."""
        started = time.perf_counter()
        try:
            fresh.warm_like(*replaced)
        except Exception:  # a thread's error would otherwise reach no one
            log.exception(
                "loading %s version %d in the background failed; the next search loads it",
                self.name,
                fresh.version,
            )
            with self._snapshot_lock:
                if self._warming is fresh:
                    self._warming = self._serving = None
                    self._warm_failed = fresh.version
            return
        with self._snapshot_lock:
            if self._warming is not fresh:
                return
            self._snapshot, self._warming, self._serving = fresh, None, None
        log.info(
            "%s version %d loaded in %.1f s; searches read it",
            self.name,
            fresh.version,
            time.perf_counter() - started,
        )

    def loaded(self, timeout: float | None = None) -> bool:
        """Waits up to `timeout` seconds (None: for as long as it takes) for a version loading
        in the background; whether none is loading now."""
        thread = self._warm_thread
        if thread is not None:
            thread.join(timeout)
        with self._snapshot_lock:
            return self._warming is None

    def latest_version(self) -> int:
        """The version searches read: the published one (see PublishedVersions), or, in a
        database that never published, the table's latest, committed by any process. Raises
        IndexNotBuilt before the first build, and for a table no merge has published yet.
        Local tables answer from their folder while it is unchanged (see VersionsFolderWatch)."""
        published = self.published_version()
        if published is not None:
            return published
        watch = self._versions_watch
        # Taken before the version is read: a commit in between makes the two disagree,
        # and the next call asks LanceDB again.
        state = None if watch is None else watch.state()
        known = None if watch is None else watch.known_version(state)
        if known is not None:
            return known
        version = self.table().version
        if watch is not None:
            watch.trust(state, version)
        return version

    def rows(self, where: str, columns: Sequence[str], limit: int) -> list[dict]:
        """Rows matching a predicate (a chunk by id, a document's neighbours), at the
        version searches read."""
        return self._searched().search().where(where).select(list(columns)).limit(limit).to_list()

    def _searched(self) -> lancedb.table.Table:
        """The table at the version searches read: its latest, or the published version,
        opened once per version."""
        version = self.published_version()
        if version is None:
            return self.table()
        opened = self._at_published
        if opened is None or opened[0] != version:
            table = self._db.open_table(self.name)
            table.checkout(version)
            opened = self._at_published = (version, table)
        return opened[1]

    def rows_at(self, version: int, where: str, columns: Sequence[str], limit: int) -> list[dict]:
        """`rows` as the table was at `version`: what a citation made then points at.

        Raises VersionGone when the version was never written (or not yet published), was
        cleaned up, or was replaced more than `keep_versions` ago. The age is checked here,
        at every read, so retention holds without a later run's cleanup: until one runs, the
        files of every older version are still there, those of documents deleted since
        included.
        """
        latest = self.latest_version()
        if version == latest:
            return self.rows(where, columns, limit)
        if version > latest or self._past_retention(version):
            raise VersionGone(version, latest)
        pinned = self._pinned
        if pinned is None or pinned.version != version:
            # One opened version kept: a citation's chunk and its neighbours, or an answer's
            # context, read the same version several times in a row.
            pinned = self._db.open_table(self.name)
            try:
                pinned.checkout(version)
            except ValueError as error:
                raise VersionGone(version, self.latest_version()) from error
            self._pinned = pinned
        return pinned.search().where(where).select(list(columns)).limit(limit).to_list()

    def _past_retention(self, version: int) -> bool:
        """Whether `version`, older than the latest, was replaced more than `keep_versions`
        ago, or is not listed at all (cleaned up)."""
        if self.keep_versions is None:
            return False
        written = self._written
        if version not in written or not any(later > version for later in written):
            listed = self.table().list_versions()
            written = self._written = {
                int(entry["version"]): _aware(entry["timestamp"]) for entry in listed
            }
        if version not in written:
            return True
        replaced = min((at for later, at in written.items() if later > version), default=None)
        return replaced is not None and _utc_now() - replaced > self.keep_versions

    def rows_when_last_held(
        self, held: str, where: str, columns: Sequence[str], limit: int, after: int
    ) -> list[dict] | None:
        """The rows matching `where` in the newest version between `after` and the latest
        (both left out) with a row matching `held`; None when none of them has one.

        What a document gone from the latest version was last indexed as: its access list
        then is the one it left with. Raises VersionGone when one of those versions is no
        longer kept, as what it held is then unknown. Versions are read newest first, one
        by one; answers are kept per latest version.
        """
        latest = self.latest_version()
        key = (held, where, tuple(columns), limit, after, latest)
        with self._last_held_lock:
            if key in self._last_held:
                cached = self._last_held[key]
                return None if cached is None else list(cached)
        found: list[dict] | None = None
        reader: lancedb.table.Table | None = None
        for version in range(latest - 1, after, -1):
            reader = reader or self._db.open_table(self.name)
            try:
                reader.checkout(version)
            except ValueError as error:
                raise VersionGone(version, latest) from error
            if reader.search().where(held).select([self.key_column]).limit(1).to_list():
                found = reader.search().where(where).select(list(columns)).limit(limit).to_list()
                break
        with self._last_held_lock:
            self._last_held[key] = found
        return found


class ChunkTable(TableReader):
    """The `chunks` table: what search and citations read."""

    derived_text_fields = ((FILE_NAME_FIELD, "rel_path", file_name_words),)
    #: The types of the sibling tables (the index side's writers name their own).
    document_type: type[DocumentTable]
    sentence_type: type[SentenceTable]
    token_vector_type: type[TokenVectorTable]
    _sentences: SentenceTable | None = None
    _token_vectors: TokenVectorTable | None = None

    def documents(self) -> DocumentTable:
        """The `documents` table of the same database."""
        return self.sibling(self.document_type)

    def sentences(self) -> SentenceTable:
        """The `sentences` table of the same database (one object, so its caches last)."""
        if self._sentences is None:
            self._sentences = self.sibling(self.sentence_type)
        return self._sentences

    def token_vectors(self) -> TokenVectorTable:
        """The `token_vectors` table of the same database (one object, so its caches last)."""
        if self._token_vectors is None:
            self._token_vectors = self.sibling(self.token_vector_type)
        return self._token_vectors


class DocumentTable(TableReader):
    """The `documents` table: one profile per document, for choosing sources."""

    name = DOCUMENTS_TABLE_NAME
    key_column = "doc_id"
    text_columns = ("profile_text",)


class SentenceTable(TableReader):
    """The `sentences` table: a vector per sentence window, pointing at its chunk."""

    name = SENTENCES_TABLE_NAME
    key_column = "sentence_id"
    text_columns = ("text_embed",)


class TokenVectorTable(TableReader):
    """The `token_vectors` table: each chunk's packed token vectors, for late interaction."""

    name = TOKEN_VECTORS_TABLE_NAME
    key_column = "chunk_id"
    text_columns = ()
    nearest_neighbour_search = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # (table version, chunk id) -> (embed key, packed bytes), or None for no stored row;
        # most recently used last.
        self._recent: LRUCache[tuple[int, str], tuple[str, np.ndarray] | None] = LRUCache(
            _CACHED_TOKEN_ROWS
        )
        self._recent_lock = threading.Lock()
        self._offsets: _TokenRowOffsets | None = None
        self._offsets_lock = threading.Lock()

    def packed(self, chunk_ids: Sequence[str]) -> dict[str, tuple[str, np.ndarray]]:
        """chunk id -> (embed key, packed bytes) for the ids that have a stored row.

        The last _CACHED_TOKEN_ROWS rows read are kept per table version: the same passages
        come back for popular questions (about 7 KB a passage). The others are taken from
        the version by row offset (see `_row_offsets`).
        """
        if not chunk_ids:
            return {}
        version = self.latest_version()  # IndexNotBuilt before the first build
        found: dict[str, tuple[str, np.ndarray]] = {}
        with self._recent_lock:
            unread = []
            for chunk_id in chunk_ids:
                if (version, chunk_id) not in self._recent:
                    unread.append(chunk_id)
                elif (row := self._recent[(version, chunk_id)]) is not None:
                    found[chunk_id] = row
        if not unread:
            return found
        offsets = self._row_offsets(version)
        wanted = [chunk_id for chunk_id in unread if chunk_id in offsets.rows]
        arrow = offsets.dataset.take(
            [offsets.rows[chunk_id] for chunk_id in wanted],
            columns=["chunk_id", "embed_key", "vector"],
        )
        taken = arrow["chunk_id"].to_pylist()
        if set(taken) != set(wanted):
            raise RuntimeError(f"token vector offsets of version {version} point at other rows")
        read = dict(
            zip(
                taken,
                zip(arrow["embed_key"].to_pylist(), vector_values(arrow["vector"]), strict=True),
                strict=True,
            )
        )
        with self._recent_lock:
            for chunk_id in unread:
                self._recent[(version, chunk_id)] = read.get(chunk_id)
        return {**found, **read}

    def _row_offsets(self, version: int) -> _TokenRowOffsets:
        """The Lance dataset of `version` and each chunk id's row offset in it, read once per
        version (the key column alone).

        A take by offset skips what LanceDB's query builder does for each read (the schema
        fetched three times, a filter planned and run against the chunk_id index), which was
        the largest part of a question the server has not seen before.
        """
        with self._offsets_lock:
            offsets = self._offsets
            if offsets is None or offsets.version != version:
                pinned = self._db.open_table(self.name)
                pinned.checkout(version)
                dataset = pinned.to_lance()
                keys = dataset.to_table(columns=["chunk_id"])["chunk_id"].to_pylist()
                rows = {chunk_id: offset for offset, chunk_id in enumerate(keys)}
                offsets = self._offsets = _TokenRowOffsets(version, dataset, rows)
        return offsets


ChunkTable.document_type = DocumentTable
ChunkTable.sentence_type = SentenceTable
ChunkTable.token_vector_type = TokenVectorTable
