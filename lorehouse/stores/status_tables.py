"""Reporting over every table: statuses for `lorehouse docs`, counts, checks' reads."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pandas as pd
import pyarrow as pa

from lorehouse.stores.database import (
    Database,
    checked_column,
    first_rows,
    known_table,
)


@dataclass(frozen=True)
class DocumentStatus:
    """One line of `lorehouse docs`: where a document stands."""

    doc_id: str
    rel_path: str
    file_type: str
    status: str
    reason: str | None
    detail: str | None
    acl_groups: list[str]
    title: str | None


def _status(
    doc_id: str,
    rel_path: str,
    file_type: str,
    status: str,
    reason: str | None,
    detail: str | None,
    acl_groups: Sequence[str],
    title: str | None,
) -> DocumentStatus:
    """A row of `_STATUSES`, NULLs as None whether DuckDB or pandas read it."""
    return DocumentStatus(
        doc_id=doc_id,
        rel_path=rel_path,
        file_type=file_type,
        status=status,
        reason=None if pd.isna(reason) else reason,
        detail=None if pd.isna(detail) else detail,
        acl_groups=list(acl_groups),
        title=None if pd.isna(title) else title,
    )


#: Every inventoried document with its parse status (parsed, failed, pending) and why.
_STATUSES = """
    SELECT r.doc_id, r.rel_path, r.file_type,
           CASE WHEN p.doc_id IS NOT NULL THEN 'parsed'
                WHEN f.doc_id IS NOT NULL THEN 'failed'
                ELSE 'pending' END AS status,
           f.reason, f.detail, r.acl_groups, p.title
    FROM documents_raw r
    LEFT JOIN documents_parsed p USING (doc_id)
    LEFT JOIN documents_failed f ON f.doc_id = r.doc_id AND f.stage = 'parse'
"""


class StatusTables(Database):
    """Reads for reports, checks and the CLI."""

    def table(
        self, name: str, columns: Sequence[str] = ("*",), limit: int | None = None
    ) -> pd.DataFrame:
        """A table (its `columns`, at most `limit` rows) as a DataFrame, for reports and tests.

        Whole tables grow with the corpus: a stage or check reads only the columns it needs,
        or goes through `table_batches`.
        """
        selected = ", ".join("*" if c == "*" else f'"{checked_column(c)}"' for c in columns)
        bound = f" LIMIT {int(limit)}" if limit is not None else ""
        with self.connect() as connection:
            return connection.execute(f"SELECT {selected} FROM {known_table(name)}{bound}").df()

    def column_values(self, name: str, column: str) -> pa.ChunkedArray:
        """One column of a whole table as Arrow (a few bytes a value, not a Python object)."""
        query = f'SELECT "{checked_column(column)}" FROM {known_table(name)}'
        with self.connect() as connection:
            return connection.sql(query).to_arrow_table()[column]

    def table_batches(self, name: str, rows_per_batch: int) -> Iterator[pd.DataFrame]:
        """A whole table in batches of at most `rows_per_batch` rows (by row id), so that
        reading it costs the memory of a batch, not of the table. Each batch opens its own
        short connection, as every read here does, so no one waits long for the file."""
        with self.connect() as connection:
            row = connection.execute(f"SELECT max(rowid) FROM {known_table(name)}").fetchone()
        last = row[0] if row and row[0] is not None else -1
        step = max(1, rows_per_batch)
        for start in range(0, last + 1, step):
            with self.connect() as connection:
                frame = connection.execute(
                    f"SELECT * FROM {name} WHERE rowid >= ? AND rowid < ?", [start, start + step]
                ).df()
            if not frame.empty:
                yield frame

    def duplicates(self, name: str, column: str, limit: int = 20) -> list[tuple[object, int]]:
        """Values of `column` held by more than one row, with how many (at most `limit`)."""
        quoted = f'"{checked_column(column)}"'
        with self.connect() as connection:
            return connection.execute(
                f"SELECT {quoted}, count(*) AS n FROM {known_table(name)} GROUP BY {quoted} "
                f"HAVING count(*) > 1 ORDER BY n DESC LIMIT {int(limit)}"
            ).fetchall()

    def offending_values(self, query: str, limit: int = 20) -> list[object]:
        """What a contract query over whole tables finds wrong (at most `limit` values).

        Only for the contract queries defined in code (`lorehouse.schemas.TABLE_CONTRACTS`),
        never for text from outside."""
        with self.connect() as connection:
            rows = connection.execute(f"{query} LIMIT {int(limit)}").fetchall()
        return [row[0] for row in rows]

    def document_names(self, doc_ids: Sequence[str]) -> dict[str, tuple[str, str]]:
        """doc_id -> (title, rel_path) of the given documents that are in the document list."""
        rows = self._for_documents(
            "SELECT doc_id, title, rel_path FROM documents {where}", "doc_id", doc_ids
        )
        return {row.doc_id: (row.title, row.rel_path) for row in rows.itertuples()}

    def row_count(self, name: str) -> int:
        """Rows in a table, without reading them."""
        with self.connect() as connection:
            row = connection.execute(f"SELECT count(*) FROM {known_table(name)}").fetchone()
        return int(row[0]) if row else 0

    def document_statuses(
        self, status: str | None = None, limit: int | None = None
    ) -> list[DocumentStatus]:
        """Inventoried documents with their parse status: parsed, failed (why) or pending; only
        those of `status` when given, the first `limit` by path when given (a check or a
        summary shows a few; every document of a large corpus would not fit in memory)."""
        where = "WHERE status = ?" if status is not None else ""
        with self.connect() as connection:
            result = connection.execute(
                f"SELECT * FROM ({_STATUSES}) {where} ORDER BY rel_path",
                [status] if status is not None else [],
            )
            rows = result.fetchall() if limit is None else first_rows(connection, result, limit)
        return [_status(*row) for row in rows]

    def statuses_of(self, doc_ids: Sequence[str]) -> dict[str, DocumentStatus]:
        """doc_id -> where each of these documents stands, for those the inventory has
        listed (an upload's progress page asks for a few)."""
        rows = self._for_documents(f"SELECT * FROM ({_STATUSES}) {{where}}", "doc_id", doc_ids)
        return {row[0]: _status(*row) for row in rows.itertuples(index=False)}

    def status_totals(self) -> Counter[str]:
        """status -> how many inventoried documents, over every file type."""
        totals: Counter[str] = Counter()
        for (_, status), count in self.status_counts().items():
            totals[status] += count
        return totals

    def status_counts(self) -> dict[tuple[str, str], int]:
        """(file type, status) -> how many inventoried documents, counted in DuckDB."""
        with self.connect() as connection:
            rows = connection.execute(
                f"SELECT file_type, status, count(*) FROM ({_STATUSES}) GROUP BY ALL"
            ).fetchall()
        return {(file_type, status): int(count) for file_type, status, count in rows}


#: The inventory's one rule for a file it need not read again: the same size and
#: modification time as at the last inventory (`l`: the listing, `r`: `documents_raw`). An
