"""The corpus in hash buckets: each bucket's parse, chunk and enrich tables in a file it owns.

Why buckets of the document id, not a partition per source or per document: a partition
per document costs Dagster a run's overhead per file, which at a million documents is more
than parsing (docs/experiments/history-reindex-cost.md); a partition per source leaves one
huge source in one process. A fixed number of buckets (`index_partitions`) spreads any
corpus evenly, the bucket of a path is known without listing anything, and the count sets
how many processes or pods can share the per-document work.

Each bucket owns one DuckDB file (`partitions/pNN.duckdb`) opened as an ordinary
`DuckDBStore`, so the stage runners, their batch-by-batch commits and their resume after a
crash work on a bucket exactly as they do on the whole corpus, and buckets never wait on one
another's file lock. The inventory stays one global listing; it publishes each bucket's rows
as a Parquet slice, which a bucket's run adopts without opening the shared file. The merge
copies the stage tables of buckets whose content changed since their last merge into the
shared file, where the feature tables, the search index and the API read them as before.

Longer than most modules because the bucket layout, the bucket files and their copies to
and from a bucket store are one protocol that each side must read the same way.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import duckdb

from lorehouse.stores.duckdb_store import RAW_COLUMNS, DuckDBStore
from lorehouse.stores.partition_remote import PartitionRemote

#: The tables a bucket's run writes, by document, and what of each row its digest covers.
#: Parsed documents hash their identity, not their Markdown: a new parse has a new
#: `parsed_at`, and hashing every document's text at each merge would cost a full read.
STAGE_TABLE_DIGESTS = {
    "documents_parsed": "(doc_id, content_sha256, parser_version, parsed_at)",
    "documents_failed": '(doc_id, stage, content_sha256, version, reason, "at")',
    "chunks": "(chunk_id, doc_id, acl, source_fingerprint, chunked_at)",
    "chunkless_documents": "(doc_id, source_fingerprint)",
    "enriched_chunks": "(chunk_id, doc_id, summary, faqs, keywords, model, status)",
    "document_enrichment": "(doc_id, summary, generated_title, model, status, input_fingerprint)",
}
STAGE_TABLES = tuple(STAGE_TABLE_DIGESTS)
T = TypeVar("T")
#: How long a merge waits for a partition run to let go of its file before leaving that
#: partition for the next merge: a run holds it only between its stages' batches.
BUSY_PARTITION_WAIT_SECONDS = 5.0
#: Changes whenever what a merge copies does, so the merge asset shows as changed code.
MERGE_VERSION = hashlib.sha256(repr(sorted(STAGE_TABLE_DIGESTS.items())).encode()).hexdigest()[:12]


def partition_keys(partitions: int) -> list[str]:
    """The bucket keys: p00, p01, ... (three digits past 100 buckets, so keys sort)."""
    width = max(2, len(str(partitions - 1)))
    return [f"p{bucket:0{width}d}" for bucket in range(partitions)]


def bucket_of(doc_id: str, partitions: int) -> int:
    """A document's bucket: its id is a SHA-256 prefix, so buckets fill evenly."""
    return int(doc_id[:8], 16) % partitions


def bucket_sql(column: str, partitions: int) -> str:
    """`bucket_of` as a DuckDB expression over `column`."""
    return f"(('0x' || substr({column}, 1, 8))::UBIGINT % {int(partitions)})"


def bucket_of_key(key: str) -> int:
    return int(key.removeprefix("p"))


def _raw_digest_query(relation: str, partitions: int) -> str:
    """Per bucket, the count and summed row hashes of `relation`'s inventory rows: what
    changed in a bucket since its last slice, or whether a partition adopted the current one."""
    columns = ", ".join(f"r.{c}" for c in RAW_COLUMNS.split(", "))
    return (
        f"SELECT {bucket_sql('r.doc_id', partitions)} AS bucket, count(*) AS n, "
        f"sum(hash(({columns}))::HUGEINT) AS f FROM {relation} r GROUP BY 1"
    )


@dataclass(frozen=True)
class PartitionLayout:
    """Where the buckets' files live under a data folder, and the bucket prefix they are
    kept in when partition runs share no volume (`remote`; see `partition_remote`)."""

    root: Path
    partitions: int
    remote: PartitionRemote | None = None

    @property
    def keys(self) -> list[str]:
        return partition_keys(self.partitions)

    def store_path(self, key: str) -> Path:
        return self.root / f"{key}.duckdb"

    def index_path(self, key: str) -> Path:
        return self.root / f"{key}.lancedb"

    def index_uri(self, key: str) -> str:
        """Where partition `key`'s LanceDB folder is: in the bucket, or beside its store."""
        return self.remote.index_uri(key) if self.remote else str(self.index_path(key))

    def indexed_keys(self) -> set[str]:
        """The partitions that have written a LanceDB folder."""
        if self.remote:
            return self.remote.indexed_keys() & set(self.keys)
        return {key for key in self.keys if self.index_path(key).exists()}

    def pull(self, keys: Sequence[str], inventory: bool = False) -> None:
        """Brings this pod's copies of `keys`' store files (and, with `inventory`, their
        inventory slices) up to what the bucket holds; nothing without a bucket."""
        if self.remote:
            if inventory:
                self.remote.pull_inventory(keys)
            self.remote.pull_stores(keys)

    def push(self, key: str) -> None:
        """Publishes partition `key`'s store file to the bucket, if it changed here."""
        if self.remote:
            self.remote.push_store(key)

    def inventory_slice(self, key: str) -> Path:
        return self.root / "inventory" / f"{key}.parquet"

    def document_counts(self, keys: Sequence[str]) -> dict[str, int]:
        """Documents in each partition's slice, as the inventory last published them."""
        digests = _read_json(self.slice_digests_path).get("digests", {})
        return {key: int(str(digests.get(key, "0:")).split(":", 1)[0]) for key in keys}

    @property
    def slice_digests_path(self) -> Path:
        return self.root / "inventory" / "digests.json"


#: A partition key of any bucket count: p00 ... p99, p000 ... p255.
PARTITION_KEY = re.compile(r"p\d{2,}")


def remove_stale_partitions(layout: PartitionLayout) -> list[str]:
    """Removes the files of partitions the current bucket count does not have, here and in
    the bucket; returns their keys.

    A deployment moving from 16 buckets to 4 leaves p04-p15 behind, one moving to 128 every
    pNN: a full second copy of the stage tables and vectors. Their documents are in the
    current partitions, which took them from the shared stores (`seed_partition`), so the old
    files are never read again.
    """
    current = set(layout.keys)
    stale = {
        key
        for path in [*layout.root.glob("p*"), *(layout.root / "inventory").glob("p*")]
        if PARTITION_KEY.fullmatch(key := path.name.split(".", 1)[0]) and key not in current
    }
    for key in stale:
        shutil.rmtree(layout.index_path(key), ignore_errors=True)
        for path in (layout.store_path(key), layout.inventory_slice(key)):
            for suffix in ("", ".wal", ".sync"):
                path.with_name(path.name + suffix).unlink(missing_ok=True)
    if layout.remote:
        stale |= layout.remote.remove_partitions_except(current, PARTITION_KEY)
    return sorted(stale)


def publish_inventory_slices(shared: DuckDBStore, layout: PartitionLayout) -> list[str]:
    """Writes the inventory rows of every bucket that changed since the last publication (or
    whose slice is missing) to its Parquet slice, and returns those buckets' keys.

    Each slice is written beside its place and renamed over it, and the digests last, so a
    crash half-way publishes again next time and a bucket's run never reads half a slice.
    """
    slices = layout.root / "inventory"
    slices.mkdir(parents=True, exist_ok=True)
    previous = _read_json(layout.slice_digests_path)
    if previous.get("partitions") != layout.partitions:
        previous = {}
    with shared.connect() as connection:
        found = connection.execute(_raw_digest_query("documents_raw", layout.partitions)).fetchall()
        digests = {layout.keys[int(b)]: f"{n}:{f}" for b, n, f in found}
        changed = [
            key
            for key in layout.keys
            if previous.get("digests", {}).get(key) != digests.get(key, "0:")
            or not layout.inventory_slice(key).exists()
        ]
        for key in changed:
            target = layout.inventory_slice(key)
            partial = target.with_suffix(".parquet.partial")
            connection.execute(
                f"COPY (SELECT {RAW_COLUMNS} FROM documents_raw "
                f"WHERE {bucket_sql('doc_id', layout.partitions)} = {bucket_of_key(key)} "
                f"ORDER BY doc_id) TO '{_quoted(partial)}' (FORMAT parquet)"
            )
            partial.replace(target)
    _write_json(
        layout.slice_digests_path,
        {
            "partitions": layout.partitions,
            "digests": {k: digests.get(k, "0:") for k in layout.keys},
        },
    )
    if layout.remote:
        layout.remote.push_inventory()
    return changed


@dataclass
class MergeReport:
    """Which buckets the merge copied into the shared store, and which it left as they were."""

    merged: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    #: Buckets whose run is not done with the current inventory: not adopted, not indexed,
    #: or its file held by the run.
    behind: list[str] = field(default_factory=list)
    rows_by_table: dict[str, int] = field(default_factory=dict)
    #: Documents of buckets behind that left the shared store: no longer listed, or listed
    #: under another access list.
    withheld: int = 0
    #: Partitions of an earlier bucket count whose files were removed.
    removed: list[str] = field(default_factory=list)
    seconds: float = 0.0


class PartitionsBehind(RuntimeError):
    """Buckets whose documents changed and whose run has not caught up: merging them would
    bring back rows the inventory removed or access lists it changed."""


def merge_partitions(
    shared: DuckDBStore, layout: PartitionLayout, keys: Sequence[str] | None = None
) -> MergeReport:
    """Copies each bucket of `keys` (every bucket by default) whose stage tables changed
    since its last merge into the shared store, one transaction per bucket: its rows are
    replaced whole, and only for documents the inventory still lists.

    With `keys` (a partition publishing its own run's rows), the other buckets' files are
    not opened; only their documents the inventory no longer lists, or lists under another
    access list, leave the shared store, as for a bucket behind. For a bucket whose rows
    follow the inventory that removes nothing, so it is done for all of them, in one
    statement: a revoked access takes effect at the next publish, whichever bucket it is.

    A bucket is merged once its file has adopted the current inventory slice. One that has
    not (its run queued, running or failed before it took its slice), or whose file its run
    holds, keeps what the last merge took from it, so the others never wait for it; only its
    documents the inventory no longer lists, or lists under another access list, leave the
    shared store now (`_withhold_changed`), so a deletion or a revoked access takes effect
    whatever state the bucket's run is in. Whether a bucket's search rows follow its stage
    tables is the index merge's to check (`partition_is_indexed`).
    """
    report = MergeReport()
    n = layout.partitions
    merging = list(layout.keys if keys is None else keys)
    layout.pull(merging)
    with shared.connect() as connection:
        done = dict(
            connection.execute("SELECT partition_key, digest FROM partition_merges").fetchall()
        )
        inventory = {
            int(b): f"{count}:{f}"
            for b, count, f in connection.execute(_raw_digest_query("documents_raw", n)).fetchall()
        }
        others = {bucket_of_key(key): key for key in layout.keys if key not in merging}
        if others:
            report.withheld += _withhold_changed(connection, others, n)
        for key in merging:
            bucket = bucket_of_key(key)
            path = layout.store_path(key)
            if not path.exists():
                if bucket in inventory:
                    report.behind.append(key)
                    report.withheld += _withhold_changed(connection, {bucket: key}, n)
                continue
            try:
                _attach(connection, path, BUSY_PARTITION_WAIT_SECONDS)
            except duckdb.IOException:
                # Its run holds the file: it is not done with it, and the next merge takes it.
                report.behind.append(key)
                report.withheld += _withhold_changed(connection, {bucket: key}, n)
                continue
            try:
                adopted = connection.execute(_raw_digest_query("part.documents_raw", n)).fetchall()
                digest = _stage_digest(connection, "part")
                if {int(b): f"{count}:{f}" for b, count, f in adopted} != (
                    {bucket: inventory[bucket]} if bucket in inventory else {}
                ):
                    report.behind.append(key)
                    report.withheld += _withhold_changed(connection, {bucket: key}, n)
                    continue
                digest = f"{n}:{digest}"
                if done.get(key) == digest:
                    report.unchanged.append(key)
                    continue
                _copy_bucket(connection, bucket, n, key, digest, report.rows_by_table)
                report.merged.append(key)
            finally:
                connection.execute("DETACH part")
    return report


def _withhold_changed(
    connection: duckdb.DuckDBPyConnection, buckets: Mapping[int, str], partitions: int
) -> int:
    """Removes from the shared stage tables the documents of `buckets` (bucket -> key) which
    the inventory no longer lists, or lists with another access list than their chunks were
    built with; returns how many. A changed text keeps being served as it was until the
    bucket's run is done; a changed access list does not, since that would show a document
    to people its owners took it from."""
    numbers = ", ".join(str(bucket) for bucket in sorted(buckets))
    in_buckets = f"{bucket_sql('doc_id', partitions)} IN ({numbers})"
    with _transaction(connection):
        unlisted = " UNION ".join(
            f"SELECT doc_id FROM {table} WHERE {in_buckets} "
            "AND doc_id NOT IN (SELECT doc_id FROM documents_raw)"
            for table in STAGE_TABLES
        )
        connection.execute(
            f"CREATE OR REPLACE TEMP TABLE withheld AS {unlisted} "
            "UNION SELECT c.doc_id FROM chunks c JOIN documents_raw r USING (doc_id) "
            f"WHERE {bucket_sql('c.doc_id', partitions)} IN ({numbers}) "
            "AND list_sort(r.acl_groups) <> list_sort(c.acl)"
        )
        for table in STAGE_TABLES:
            connection.execute(f"DELETE FROM {table} WHERE doc_id IN (SELECT doc_id FROM withheld)")
        (withheld,) = connection.execute("SELECT count(*) FROM withheld").fetchone() or (0,)
        touched = connection.execute(
            f"SELECT DISTINCT {bucket_sql('doc_id', partitions)} FROM withheld"
        ).fetchall()
        connection.execute("DROP TABLE withheld")
        # The shared store no longer holds what the last merge took of these buckets: the
        # next merge takes each whole, even if its file is unchanged by then.
        for (bucket,) in touched:
            connection.execute(
                "DELETE FROM partition_merges WHERE partition_key = ?", [buckets[int(bucket)]]
            )
    return int(withheld)


def _stage_digest(connection: duckdb.DuckDBPyConnection, schema: str = "part") -> str:
    parts = []
    for table, columns in STAGE_TABLE_DIGESTS.items():
        (count, total) = connection.execute(
            f"SELECT count(*), coalesce(sum(hash({columns})::HUGEINT), 0) FROM {schema}.{table}"
        ).fetchone() or (0, 0)
        parts.append(f"{table}={count}:{total}")
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:24]


def record_indexed(partition: DuckDBStore) -> None:
    """Notes, in a partition's own file, that its embedding run has gone over its stage
    tables as they are now: the shared stores take a partition's rows only while this holds,
    so the rows of a partition whose chunks changed after its last embedding run (their text
    or access list) never reach search."""
    with partition.connect() as connection:
        connection.execute(_STATE_TABLE)
        digest = _stage_digest(connection, "main")
        connection.execute("INSERT OR REPLACE INTO partition_state VALUES ('indexed', ?)", [digest])


def forget_indexed(partition: DuckDBStore) -> None:
    """Notes that an embedding run is rewriting the partition's search rows: until it records
    them again (`record_indexed`), a merge takes nothing of this partition, so a run killed
    half-way never publishes half its rows."""
    with partition.connect() as connection:
        connection.execute(_STATE_TABLE)
        connection.execute("DELETE FROM partition_state WHERE name = 'indexed'")


def _indexed_digest(connection: duckdb.DuckDBPyConnection, schema: str) -> str | None:
    """The stage digest the partition (attached as `schema`, or `main`) last recorded as
    indexed; None for a file that never recorded one."""
    try:
        found = connection.execute(
            f"SELECT digest FROM {schema}.partition_state WHERE name = 'indexed'"
        ).fetchall()
    except duckdb.CatalogException:
        return None
    return str(found[0][0]) if found else None


def merged_digests(shared: DuckDBStore) -> dict[str, str]:
    """partition key -> the stage digest (with its bucket count) the shared store last took."""
    with shared.connect() as connection:
        return dict(
            connection.execute("SELECT partition_key, digest FROM partition_merges").fetchall()
        )


def partition_is_indexed(
    layout: PartitionLayout, key: str, merged: str | None, timeout_seconds: float
) -> bool:
    """Whether partition `key`'s search rows are those of the stage tables the shared store
    took from it (`merged`): its embedding run recorded them and has not started again."""
    if merged is None:
        return False
    path = str(layout.store_path(key))
    try:
        with _waiting_for_lock(
            lambda: duckdb.connect(path, read_only=True), timeout_seconds
        ) as connection:
            indexed = _indexed_digest(connection, "main")
    except duckdb.IOException:
        return False  # its run holds the file: not done with it
    return indexed is not None and merged == f"{layout.partitions}:{indexed}"


_STATE_TABLE = (
    "CREATE TABLE IF NOT EXISTS partition_state (name VARCHAR PRIMARY KEY, digest VARCHAR)"
)


def seed_partition(partition: DuckDBStore, shared_path: Path, layout: PartitionLayout) -> int:
    """Copies into a partition's file, from the shared store's file (opened read-only), the
    stage rows of the
    documents its inventory slice holds and it has not parsed; returns how many documents.

    Runs once per partition and layout: the first time a partition's file is used under
    the current bucket count. That is when a store built before partitions is upgraded, or
    the bucket count changes (a deployment growing to more pods): the documents are the
    same, only their buckets moved, and the shared store holds what the last merge took
    from every bucket. A document is taken only while its bytes are those its rows were
    built from, so the stages carry on from there as on any rerun, and the partition's
    embedding run then takes the same documents' vectors from the shared index (`seeding`).
    Without it, every document in a moved bucket would be parsed, enriched and embedded
    again: the whole build.
    """
    with partition.connect() as connection:
        connection.execute(_STATE_TABLE)
        marker = connection.execute(
            "SELECT digest FROM partition_state WHERE name = 'layout'"
        ).fetchall()
        if marker and marker[0][0] == str(layout.partitions):
            return 0
        seeded = 0
        if shared_path.exists():
            _attach(connection, shared_path, partition.lock_timeout_seconds, "shared")
            try:
                seeded = _copy_from_shared(connection)
            finally:
                connection.execute("DETACH shared")
        connection.execute(
            "INSERT OR REPLACE INTO partition_state VALUES ('layout', ?), ('seeding', ?)",
            [str(layout.partitions), str(seeded)],
        )
    return seeded


def _copy_from_shared(connection: duckdb.DuckDBPyConnection) -> int:
    """The stage rows, from the attached `shared` store, of the documents this partition's
    inventory holds with the bytes they were parsed from, and it has no rows of."""
    (has_parsed,) = connection.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE database_name = 'shared' "
        "AND table_name = 'documents_parsed'"
    ).fetchone() or (0,)
    if not has_parsed:
        return 0
    with _transaction(connection):
        connection.execute(
            "CREATE TEMP TABLE seeded AS SELECT r.doc_id FROM documents_raw r "
            "WHERE r.doc_id NOT IN (SELECT doc_id FROM documents_parsed) "
            "AND r.doc_id NOT IN (SELECT doc_id FROM documents_failed) "
            "AND (r.doc_id, r.content_sha256) IN ("
            "SELECT doc_id, content_sha256 FROM shared.documents_parsed "
            "UNION SELECT doc_id, content_sha256 FROM shared.documents_failed)"
        )
        for table in STAGE_TABLES:
            connection.execute(
                f"INSERT INTO {table} BY NAME SELECT * FROM shared.{table} "
                "WHERE doc_id IN (SELECT doc_id FROM seeded)"
            )
        (seeded,) = connection.execute("SELECT count(*) FROM seeded").fetchone() or (0,)
        connection.execute("DROP TABLE seeded")
    return int(seeded)


def seeding(partition: DuckDBStore) -> bool:
    """Whether the partition took rows from the shared store (`seed_partition`) and has not
    had an embedding run since: that run takes their vectors from the shared index."""
    with partition.connect() as connection:
        if not _has_state(connection):
            return False
        found = connection.execute(
            "SELECT digest FROM partition_state WHERE name = 'seeding'"
        ).fetchall()
    return bool(found) and found[0][0] != "0"


def seeded_vectors_taken(partition: DuckDBStore) -> None:
    """Notes that the partition's embedding run has taken its seeded documents' vectors."""
    with partition.connect() as connection:
        connection.execute(_STATE_TABLE)
        connection.execute("INSERT OR REPLACE INTO partition_state VALUES ('seeding', '0')")


def _has_state(connection: duckdb.DuckDBPyConnection) -> bool:
    (count,) = connection.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'partition_state'"
    ).fetchone() or (0,)
    return bool(count)


def _copy_bucket(
    connection: duckdb.DuckDBPyConnection,
    bucket: int,
    partitions: int,
    key: str,
    digest: str,
    rows_by_table: dict[str, int],
) -> None:
    with _transaction(connection):
        for table in STAGE_TABLES:
            connection.execute(
                f"DELETE FROM {table} WHERE {bucket_sql('doc_id', partitions)} = {bucket}"
            )
            (inserted,) = connection.execute(
                f"INSERT INTO {table} BY NAME SELECT * FROM part.{table} "
                "WHERE doc_id IN (SELECT doc_id FROM documents_raw)"
            ).fetchone() or (0,)
            rows_by_table[table] = rows_by_table.get(table, 0) + int(inserted)
        # Cached enrichments are keyed by text, not document: a later rebuild of any bucket
        # (or of the shared store) finds them.
        connection.execute(
            "INSERT INTO enrichment_cache BY NAME SELECT * FROM part.enrichment_cache "
            "ON CONFLICT DO NOTHING"
        )
        connection.execute(
            "INSERT OR REPLACE INTO partition_merges VALUES (?, ?, current_timestamp)",
            [key, digest],
        )


@contextmanager
def _transaction(connection: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """One transaction on `connection`: committed at the end of the block, rolled back if a
    statement in it fails, so readers never see a bucket's tables half replaced."""
    connection.execute("BEGIN")
    try:
        yield
    except duckdb.Error:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")


def _attach(
    connection: duckdb.DuckDBPyConnection, path: Path, timeout_seconds: float, alias: str = "part"
) -> None:
    """Attaches a store's file read-only as `alias` (a partition's as `part`), waiting while
    another process holds its write lock."""
    _waiting_for_lock(
        lambda: connection.execute(f"ATTACH '{_quoted(path)}' AS {alias} (READ_ONLY)"),
        timeout_seconds,
    )


def _waiting_for_lock(action: Callable[[], T], timeout_seconds: float) -> T:
    """`action()`, tried again while another process (a run of that partition) holds the
    file's write lock, as `DuckDBStore` waits for its own file."""
    deadline = time.monotonic() + timeout_seconds
    delay = 0.05
    while True:
        try:
            return action()
        except duckdb.IOException as error:
            if "lock" not in str(error).lower() or time.monotonic() >= deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 1.0)


def _quoted(path: Path) -> str:
    return str(path.resolve()).replace("'", "''")


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def _write_json(path: Path, value: dict) -> None:
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(value, sort_keys=True))
    partial.replace(path)
