"""The DuckDB feature store's database: its schema, its connections and transactions.

Each operation opens a short-lived connection, so the Dagster webserver, a materialization and
the CLI can take turns on one database file instead of holding a lock for a whole run. The
tables are read and written by one module per stage (`inventory_tables`, `parse_tables`,
`chunk_tables`, `index_reads`, `eval_tables`, `status_tables`), which `DuckDBStore` gathers;
the schema and its migrations are SQL files beside them (`sql/`).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa

_SQL = Path(__file__).with_name("sql")
_SCHEMA = (_SQL / "schema.sql").read_text()
_MIGRATIONS = (_SQL / "migrations.sql").read_text()
_TABLES = frozenset(re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", _SCHEMA))
_OPENING = threading.Lock()


class Database:
    """One DuckDB file with the feature store's schema applied."""

    def __init__(self, path: Path | str, lock_timeout_seconds: float = 120.0) -> None:
        self.path = Path(path)
        self.lock_timeout_seconds = lock_timeout_seconds
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.connect() as connection:
            connection.execute(_SCHEMA)
            connection.execute(_MIGRATIONS)

    @contextmanager
    def connect(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection, waiting while another process holds the file's write lock.

        DuckDB lets one process open a database file at a time; the webserver, a run's asset
        checks and the CLI each hold it only for short operations, so waiting is enough.
        """
        connection = self._open_with_retry()
        try:
            yield connection
        finally:
            connection.close()

    @contextmanager
    def _transaction(
        self, **frames: pd.DataFrame | pa.Table
    ) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection inside one transaction, with `frames` registered under their names.

        Every multi-statement write goes through here, so a failure half-way rolls back and
        readers never see a stage's tables half replaced.
        """
        with self.connect() as connection:
            for name, frame in frames.items():
                connection.register(name, frame)
            connection.execute("BEGIN")
            try:
                yield connection
                connection.execute("COMMIT")
            except duckdb.Error:
                connection.execute("ROLLBACK")
                raise
            finally:
                for name in frames:
                    connection.unregister(name)

    def _open_with_retry(self) -> duckdb.DuckDBPyConnection:
        deadline = time.monotonic() + self.lock_timeout_seconds
        delay = 0.05
        while True:
            try:
                # DuckDB shares one database instance per file within a process; two threads
                # opening it at once (API requests while a reindex holds the lock) collide
                # with "Unique file handle conflict". Opening is quick, so opens take turns.
                with _OPENING:
                    return duckdb.connect(str(self.path))
            except duckdb.IOException as error:
                if "lock" not in str(error).lower() or time.monotonic() >= deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 1.0)

    def execute_in_transaction(self, statements: Sequence[str]) -> list[tuple]:
        """Runs SQL statements as one transaction: readers see all of them or none. Returns
        the rows of the last statement (a summary of what the others did, if it is a query);
        temporary tables they create last until then."""
        rows: list[tuple] = []
        with self._transaction() as connection:
            for statement in statements:
                rows = connection.execute(statement).fetchall()
        return rows


def first_rows(
    connection: duckdb.DuckDBPyConnection, result: duckdb.DuckDBPyConnection, limit: int
) -> list[tuple]:
    """The first `limit` rows of a result, and the rest dropped so the connection is free.

    Not SQL's LIMIT: DuckDB 2.0.0 returned every matching row of `... WHERE status = ?
    ORDER BY rel_path LIMIT 50` over the left joins of the status query (LIMIT over a LEFT
    JOIN is a known wrong-result bug there: duckdb/duckdb#24542).
    """
    rows = result.fetchmany(limit)
    connection.abort()
    return rows


def key_frame(column: str, keys: Sequence[str]) -> pd.DataFrame:
    """One text column of keys to join against. Typed as text so that an empty list still
    compares with the VARCHAR key columns (pandas would type it as a number)."""
    return pd.DataFrame({column: pd.Series(list(keys), dtype="string")})


def insert_frame(
    connection: duckdb.DuckDBPyConnection,
    table: str,
    registered: str,
    frame: pd.DataFrame,
    keep_existing: bool = False,
) -> None:
    """Inserts a registered frame's rows by column name (`keep_existing`: skip known keys)."""
    if frame.empty:
        return
    columns = ", ".join(frame.columns)
    conflict = " ON CONFLICT DO NOTHING" if keep_existing else ""
    connection.execute(
        f"INSERT INTO {table} ({columns}) SELECT {columns} FROM {registered}{conflict}"
    )


def known_table(table: str) -> str:
    """Table names are interpolated into SQL, so only the store's own are accepted."""
    if table not in _TABLES:
        raise ValueError(f"unknown table {table!r}")
    return table


def checked_column(name: str) -> str:
    """Column names are interpolated into SQL (quoted), so only plain identifiers pass."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ValueError(f"not a column name: {name!r}")
    return name


def declared_columns() -> dict[str, list[tuple[str, str]]]:
    """table -> (column, SQL type) of every table the store creates, read from an in-memory
    database the schema is applied to (what the orchestrator shows as column schemas)."""
    with duckdb.connect(":memory:") as connection:
        connection.execute(_SCHEMA)
        connection.execute(_MIGRATIONS)
        rows = connection.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns "
            "ORDER BY table_name, ordinal_position"
        ).fetchall()
    columns: dict[str, list[tuple[str, str]]] = {}
    for table, column, data_type in rows:
        columns.setdefault(table, []).append((column, data_type))
    return columns


#: A document the caller's groups may read: public (no groups) or sharing one of them.
VISIBLE_DOCUMENT = "(len(d.acl) = 0 OR list_has_any(d.acl, ?::VARCHAR[]))"
