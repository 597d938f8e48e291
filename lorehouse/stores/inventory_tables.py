"""The inventory's tables: `documents_raw`, staged batch by batch, and a partition's share of it."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import duckdb
import pyarrow as pa

from lorehouse.models import (
    FileType,
    RawDocument,
)
from lorehouse.sources.base import SIDECAR_SUFFIX
from lorehouse.stores.database import (
    Database,
    first_rows,
)

#: The inventory's one rule for a file it need not read again: the same size and
#: modification time as at the last inventory (`l`: the listing, `r`: `documents_raw`). An
#: S3 object's LastModified moves with every upload, so on S3 this follows the content too.
_UNCHANGED = "l.size_bytes = r.size_bytes AND l.modified_at = r.modified_at"


class InventoryTables(Database):
    """What the inventory stage writes and what reads the inventory."""

    def inventory_differences(
        self, listing: pa.Table, shown: int = 50
    ) -> tuple[dict[str, int], list[tuple[str, str]]]:
        """How a listing of the source (`rel_path`, `size_bytes`, `modified_at`) differs from
        the last inventory: counts of files added, changed (size or time) and removed, and the
        first `shown` (path, state) rows by path. Compared in DuckDB, so a million files cost
        two columns of Arrow, not a model per document."""
        differences = f"""
            SELECT coalesce(l.rel_path, r.rel_path) AS rel_path,
                   CASE WHEN r.rel_path IS NULL THEN 'added'
                        WHEN l.rel_path IS NULL THEN 'removed'
                        ELSE 'changed' END AS state
            FROM listing l FULL OUTER JOIN documents_raw r ON l.rel_path = r.rel_path
            WHERE r.rel_path IS NULL OR l.rel_path IS NULL OR NOT ({_UNCHANGED})
        """
        with self.connect() as connection:
            connection.register("listing", listing)
            try:
                counts = dict(
                    connection.execute(
                        f"SELECT state, count(*) FROM ({differences}) GROUP BY state"
                    ).fetchall()
                )
                result = connection.execute(
                    f"SELECT rel_path, state FROM ({differences}) ORDER BY "
                    "CASE state WHEN 'added' THEN 0 WHEN 'changed' THEN 1 ELSE 2 END, rel_path"
                )
                rows = first_rows(connection, result, shown)
            finally:
                connection.unregister("listing")
        return {state: int(counts.get(state, 0)) for state in ("added", "changed", "removed")}, rows

    @contextmanager
    def inventory_staging(self) -> Iterator[InventoryStaging]:
        """A new inventory built beside the current one, batch by batch, and swapped in at
        once by `InventoryStaging.commit`; left without a commit, it is dropped and
        `documents_raw` is as it was.

        The staging tables are ordinary tables in the file, not TEMP ones: each step opens
        its own short connection, so no one waits for the file while a first build hashes
        for hours. Leftovers of a run that was killed are dropped here (one index run writes
        at a time).
        """
        with self._transaction() as connection:
            leftovers = connection.execute(
                "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main' "
                "AND starts_with(table_name, 'inventory_staging_')"
            ).fetchall()
            for (name,) in leftovers:
                if _STAGING_TABLE.fullmatch(name):
                    connection.execute(f"DROP TABLE IF EXISTS {name}")
        staging = InventoryStaging(self, uuid.uuid4().hex[:12])
        with self._transaction() as connection:
            connection.execute(
                f"CREATE TABLE {staging.listing} (doc_id VARCHAR, rel_path VARCHAR NOT NULL, "
                "size_bytes BIGINT NOT NULL, modified_at TIMESTAMPTZ NOT NULL, "
                "sidecar BOOLEAN NOT NULL, acl_groups VARCHAR[])"
            )
            # The new inventory's rows take documents_raw's columns and types (the
            # constraints are checked when the swap inserts them there).
            connection.execute(
                f"CREATE TABLE {staging.next} AS SELECT {RAW_COLUMNS} FROM documents_raw "
                "WHERE false"
            )
        try:
            yield staging
        finally:
            with self._transaction() as connection:
                for name in (staging.listing, staging.plan, staging.next):
                    connection.execute(f"DROP TABLE IF EXISTS {name}")

    def adopt_inventory(self, inventory_slice: Path) -> int:
        """Makes this store's inventory the rows of a Parquet slice (a partition's share of
        the global inventory, `lorehouse.stores.partitions`), in one transaction, and returns
        how many documents left it: their parsed rows and failures go with them, as the
        global inventory's own swap does."""
        source = "read_parquet('" + str(inventory_slice.resolve()).replace("'", "''") + "')"
        with self._transaction() as connection:
            return _replace_inventory(connection, f"(SELECT * FROM {source})")


class InventoryStaging:
    """One inventory run's tables: the listing as staged, the plan (each document in path
    order with what the last inventory knew of it) and the rows of the new inventory.

    Every step is its own short transaction and moves one batch, so the memory of a run is
    a batch's; DuckDB does the joins and the one sort, spilling to disk past its limit.
    """

    def __init__(self, store: Database, token: str) -> None:
        self._store = store
        self.listing = _staging_table(f"inventory_staging_{token}_listing")
        self.plan = _staging_table(f"inventory_staging_{token}_plan")
        self.next = _staging_table(f"inventory_staging_{token}_next")

    def add_listing(self, batch: pa.Table) -> None:
        """Appends a batch of the listing (`lorehouse.inventory.LISTING_SCHEMA`)."""
        with self._store._transaction(batch=batch) as connection:
            connection.execute(
                f"INSERT INTO {self.listing} "
                "SELECT doc_id, rel_path, size_bytes, modified_at, sidecar, acl_groups FROM batch"
            )

    def make_plan(self) -> int:
        """Numbers the listed documents in path order beside their last inventory row, drops
        the listing, and returns how many documents there are."""
        with self._store._transaction() as connection:
            connection.execute(
                f"""
                CREATE TABLE {self.plan} AS
                WITH documents AS (SELECT * FROM {self.listing} WHERE NOT sidecar),
                     sidecars AS (SELECT rel_path FROM {self.listing} WHERE sidecar)
                SELECT row_number() OVER (ORDER BY l.rel_path) AS n,
                       l.doc_id, l.rel_path, l.size_bytes, l.modified_at, l.acl_groups,
                       EXISTS (SELECT 1 FROM sidecars s
                               WHERE s.rel_path = l.rel_path || '{SIDECAR_SUFFIX}')
                           AS has_sidecar,
                       r.doc_id IS NOT NULL AS known,
                       coalesce({_UNCHANGED}, false) AS unchanged,
                       r.file_type AS prev_file_type,
                       r.content_sha256 AS prev_content_sha256
                FROM documents l LEFT JOIN documents_raw r ON r.doc_id = l.doc_id
                ORDER BY n
                """
            )
            connection.execute(f"DROP TABLE {self.listing}")
            (count,) = connection.execute(f"SELECT count(*) FROM {self.plan}").fetchall()[0]
        return int(count)

    def plan_batches(self, rows: int) -> Iterator[pa.Table]:
        """The plan in path order, `rows` documents at a time, each read in its own short
        connection (ranges of the row number: no LIMIT, no OFFSET)."""
        with self._store.connect() as connection:
            (last,) = connection.execute(f"SELECT count(*) FROM {self.plan}").fetchall()[0]
        for after in range(0, int(last), rows):
            with self._store.connect() as connection:
                batch = connection.sql(
                    f"SELECT * FROM {self.plan} WHERE n > {int(after)} "
                    f"AND n <= {int(after + rows)} ORDER BY n"
                ).to_arrow_table()
            yield batch

    def add_documents(self, batch: pa.Table) -> None:
        """Appends described documents (`lorehouse.inventory.INVENTORY_SCHEMA`)."""
        with self._store._transaction(batch=batch) as connection:
            connection.execute(f"INSERT INTO {self.next} SELECT * FROM batch")

    def commit(self, documents: int) -> int:
        """Swaps the new inventory in, in one transaction, and returns how many documents
        were removed; their parsed rows and failures go with them, so a deleted file stops
        being searchable in the same transaction. `documents` is how many rows the run
        described: a different count in the staged rows rolls everything back."""
        with self._store._transaction() as connection:
            (staged,) = connection.execute(f"SELECT count(*) FROM {self.next}").fetchall()[0]
            if staged != documents:
                raise RuntimeError(
                    f"inventory staging holds {staged} documents where {documents} were "
                    "described; the last inventory is kept"
                )
            removed = _replace_inventory(connection, self.next)
            connection.execute(f"DROP TABLE {self.next}")
            connection.execute(f"DROP TABLE {self.plan}")
        return int(removed)


_RAW_COLUMN_NAMES = (
    *("doc_id", "source_uri", "rel_path", "file_type", "size_bytes", "content_sha256"),
    *("modified_at", "acl_groups"),
)


RAW_COLUMNS = ", ".join(_RAW_COLUMN_NAMES)


def _replace_inventory(connection: duckdb.DuckDBPyConnection, source: str) -> int:
    """Makes documents_raw hold the rows of `source` (a table or a `read_parquet(...)`) and
    returns how many documents left; their parsed rows and failures go with them, so a
    deleted file stops being searchable in the same transaction.

    Only rows that differ are rewritten: a nightly run over an unchanged million documents
    writes nothing, where replacing the table rewrote every row and its key index.
    `inventoried_at` is therefore when a row last changed.
    """
    (removed,) = connection.execute(
        "SELECT count(*) FROM documents_raw r WHERE NOT EXISTS "
        f"(SELECT 1 FROM {source} x WHERE x.doc_id = r.doc_id)"
    ).fetchall()[0]
    same = " AND ".join(f"x.{c} IS NOT DISTINCT FROM r.{c}" for c in _RAW_COLUMN_NAMES)
    connection.execute(
        f"DELETE FROM documents_raw r WHERE NOT EXISTS (SELECT 1 FROM {source} x WHERE {same})"
    )
    connection.execute(
        f"INSERT INTO documents_raw ({RAW_COLUMNS}) SELECT {RAW_COLUMNS} "
        f"FROM {source} x WHERE NOT EXISTS "
        "(SELECT 1 FROM documents_raw r WHERE r.doc_id = x.doc_id)"
    )
    for table in ("documents_parsed", "documents_failed"):
        connection.execute(f"DELETE FROM {table} WHERE doc_id NOT IN (SELECT doc_id FROM {source})")
    return int(removed)


def raw_document(row: Sequence) -> RawDocument:
    """A `RAW_COLUMNS` row as the model."""
    return RawDocument(
        doc_id=row[0],
        source_uri=row[1],
        rel_path=row[2],
        file_type=FileType(row[3]),
        size_bytes=row[4],
        content_sha256=row[5],
        modified_at=row[6],
        acl_groups=list(row[7]),
    )


_STAGING_TABLE = re.compile(r"inventory_staging_[0-9a-f]{12}_(listing|plan|next)")


def _staging_table(name: str) -> str:
    """Staging table names are interpolated into SQL, so only the inventory's own pass."""
    if not _STAGING_TABLE.fullmatch(name):
        raise ValueError(f"not an inventory staging table: {name!r}")
    return name
