"""The readers of the LanceDB tables: which version search reads, and reads by key.

The index side (`lorehouse.stores.lance_index`) writes these tables through subclasses of
the readers here; search and answering hold only readers. Search filters (documents, pages,
file types, tables, access groups) are SQL `where` clauses evaluated inside LanceDB before
ranking, so a restricted chunk is never read into a result set that is filtered afterwards.
What one version holds and how it is searched is `lorehouse.search.snapshot`; how a reader
learns of a new version, `lorehouse.search.versions`.

Longer than most modules because `TableReader` is one object a search and a citation both
ask: the version to read, the snapshot of it (loaded in the background for a large table),
rows at a cited version, and the four table types' few differences beside it.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import pyarrow as pa
from cachetools import LRUCache

from lorehouse.search.ann import NeighbourSearch
from lorehouse.search.bm25 import Analyzer, TextAnalyzer
from lorehouse.search.snapshot import DIMENSION_KEY, LAYOUT_KEY, MODEL_KEY, TableSnapshot
from lorehouse.search.versions import (
    PUBLISHED_TABLE_NAME,
    PublishedVersions,
    VersionGone,
    VersionsFolderWatch,
)

if TYPE_CHECKING:
    import lance
    import lancedb


TABLE_NAME = "chunks"


DOCUMENTS_TABLE_NAME = "documents"


SENTENCES_TABLE_NAME = "sentences"


TOKEN_VECTORS_TABLE_NAME = "token_vectors"


TEXT_COLUMNS = ("text_embed", "text_enriched")


#: The BM25 field holding the words of a chunk's file name (see `file_name_words`).
FILE_NAME_FIELD = "file_name"


#: Bumped whenever a table's columns change; a table of another layout is rebuilt.
#: 3: public rows carry PUBLIC_GROUP in `acl` instead of an empty list.
#: 4: chunks and sentence windows carry their `language`.
TABLE_LAYOUT = "4"


# Token-vector rows a TokenVectorIndex keeps from its last reads: about 7 KB each for a
# 150-token passage, so at most about 30 MB. Enough for the passages a cycle of distinct
# questions reads: a smaller cache let such a cycle (the load test's) evict every row
# before its question came round again, so no read was ever a hit.
_CACHED_TOKEN_ROWS = 4096


_ANALYZER = Analyzer()


log = logging.getLogger(__name__)


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

    def __init__(
        self,
        uri: str,
        storage_options: dict[str, str] | None = None,
        db: lancedb.DBConnection | None = None,
        snapshot_folder: Path | None = None,
        cache_bytes: tuple[int, int] | None = None,
        warm_min_rows: int | None = None,
        analyzer: TextAnalyzer | None = None,
        keep_versions: timedelta | None = None,
        neighbours: NeighbourSearch | None = None,
    ) -> None:
        """`neighbours`: from what size and how a vector search goes through an ANN index
        (the deployment's, from the wiring); None scores every row at any size.
        `keep_versions`: how long a replaced version stays readable by `rows_at` (the
        deployment's citation retention; None: as long as its files are kept).
        `cache_bytes`: (index, metadata) cache bounds of the connection opened here
        (LanceDB's defaults, 6 GiB and 1 GiB, when None); a `db` given keeps its own.
        `warm_min_rows`: rows of the snapshot searched from which a new version loads in the
        background (see `snapshot`; the deployment's `search_warm_min_rows`); None loads
        every version in the search that first reads it. `analyzer`: how BM25 reads the text
        columns and queries (English when None)."""
        self.uri = uri
        self.warm_min_rows = warm_min_rows
        self.keep_versions = keep_versions
        self.analyzer = analyzer or _ANALYZER
        self.neighbours = neighbours
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
            neighbours=self.neighbours,
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

    @property
    def connection(self) -> lancedb.DBConnection:
        """The LanceDB connection this table reads through, with its caches: a writer of the
        same database opened on it shares them instead of holding a second copy."""
        return self._db

    def count(self, where: str | None = None) -> int:
        """Rows of the latest version under `where` (all when None); 0 before the first
        build."""
        return self.table().count_rows(where) if self.exists() else 0

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
            steps = fresh.warm_like(*replaced)
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
            "%s version %d loaded in %.1f s (%s); searches read it",
            self.name,
            fresh.version,
            time.perf_counter() - started,
            ", ".join(f"{step} {seconds:.1f} s" for step, seconds in steps.items()),
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
