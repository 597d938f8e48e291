"""The parse stage's tables: `documents_parsed` and `documents_failed`."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

import duckdb
import pandas as pd
import pyarrow as pa

from lorehouse.models import (
    DocumentFailure,
    FailureReason,
    PageSpan,
    ParsedDocument,
    RawDocument,
)
from lorehouse.stores.database import (
    Database,
    key_frame,
)
from lorehouse.stores.inventory_tables import RAW_COLUMNS, raw_document

#: Every inventoried document, and whether it is to be parsed: neither parsed nor failed
#: (other than by a timeout) with its current bytes and its type's parser version.
_TO_PARSE = f"""
    SELECT r.*, NOT (
        EXISTS (SELECT 1 FROM documents_parsed p WHERE p.doc_id = r.doc_id
                AND p.content_sha256 = r.content_sha256 AND p.parser_version = v.version)
        OR EXISTS (SELECT 1 FROM documents_failed f WHERE f.doc_id = r.doc_id
                   AND f.stage = 'parse' AND f.reason <> '{FailureReason.TIMEOUT.value}'
                   AND f.content_sha256 = r.content_sha256 AND f.version = v.version)
    ) AS pending
    FROM documents_raw r
    LEFT JOIN parser_versions v ON v.file_type = r.file_type
"""


class ParseTables(Database):
    """What the parse stage reads and writes."""

    def to_parse(self, versions: Mapping[str, str]) -> pa.Array:
        """The ids, by path, of the documents whose bytes or parser version (`versions`: file
        type -> version) changed since they were parsed or failed; as Arrow, a few bytes an
        id, so a first build of a million documents holds about 40 MB here.

        A document that failed with the same bytes and the same parser version would fail
        again, so it is not retried either. A timeout is the exception: it depends on how
        busy the machine was and on the limit, not on the file alone, so a timed-out document
        is tried again on the next run.
        """
        with self._with_versions(versions) as connection:
            table = connection.sql(
                f"SELECT doc_id FROM ({_TO_PARSE}) WHERE pending ORDER BY rel_path"
            ).to_arrow_table()
        return table["doc_id"].combine_chunks()

    def raw_documents_for(self, doc_ids: Sequence[str]) -> list[RawDocument]:
        """The inventory rows of `doc_ids`, in that order (those still inventoried)."""
        with self.connect() as connection:
            connection.register("wanted_documents", key_frame("doc_id", doc_ids))
            try:
                rows = connection.execute(
                    f"SELECT {RAW_COLUMNS} FROM documents_raw "
                    "WHERE doc_id IN (SELECT doc_id FROM wanted_documents)"
                ).fetchall()
            finally:
                connection.unregister("wanted_documents")
        found = {row[0]: row for row in rows}
        return [raw_document(found[doc_id]) for doc_id in doc_ids if doc_id in found]

    @contextmanager
    def _with_versions(self, versions: Mapping[str, str]) -> Iterator[duckdb.DuckDBPyConnection]:
        frame = pd.DataFrame(
            {"file_type": list(versions), "version": list(versions.values())}, dtype="string"
        )
        with self.connect() as connection:
            connection.register("parser_versions", frame)
            try:
                yield connection
            finally:
                connection.unregister("parser_versions")

    def write_parsed(self, documents: Sequence[ParsedDocument]) -> None:
        """Replaces each document's parsed row and clears its parse failure, atomically."""
        if not documents:
            return
        frame = pd.DataFrame(
            [
                {
                    "doc_id": d.doc_id,
                    "content_sha256": d.content_sha256,
                    "title": d.title,
                    "markdown": d.markdown,
                    "page_map": json.dumps([span.model_dump() for span in d.page_map]),
                    "page_count": len({span.page for span in d.page_map}),
                    "parser": d.parser,
                    "parser_version": d.parser_version,
                    "parse_ms": d.parse_ms,
                    "warnings": list(d.warnings),
                }
                for d in documents
            ]
        )
        self._apply_incoming(
            frame,
            "DELETE FROM documents_parsed WHERE doc_id IN (SELECT doc_id FROM incoming)",
            "DELETE FROM documents_failed WHERE stage = 'parse' "
            "AND doc_id IN (SELECT doc_id FROM incoming)",
            "INSERT INTO documents_parsed (doc_id, content_sha256, title, markdown, page_map, "
            "page_count, parser, parser_version, parse_ms, warnings) SELECT doc_id, "
            "content_sha256, title, markdown, page_map, page_count, parser, parser_version, "
            "parse_ms, warnings FROM incoming",
        )

    def write_failures(
        self, failures: Sequence[DocumentFailure], version_by_doc: dict[str, str]
    ) -> None:
        """Records failures; a failed document leaves the stage's output table."""
        if not failures:
            return
        frame = pd.DataFrame(
            [
                {
                    "doc_id": f.doc_id,
                    "stage": f.stage,
                    "rel_path": f.rel_path,
                    "content_sha256": f.content_sha256,
                    "version": version_by_doc.get(f.doc_id, "none"),
                    "reason": f.reason.value,
                    "detail": f.detail,
                    "at": f.at,
                }
                for f in failures
            ]
        )
        self._apply_incoming(
            frame,
            "DELETE FROM documents_failed WHERE (doc_id, stage) IN "
            "(SELECT (doc_id, stage) FROM incoming)",
            "DELETE FROM documents_parsed WHERE doc_id IN "
            "(SELECT doc_id FROM incoming WHERE stage = 'parse')",
            "INSERT INTO documents_failed SELECT * FROM incoming",
        )

    def _apply_incoming(self, frame: pd.DataFrame, *statements: str) -> None:
        """Runs statements over `frame`, registered as `incoming`, in one transaction."""
        with self._transaction(incoming=frame) as connection:
            for statement in statements:
                connection.execute(statement)

    def markdown_sample(self, documents: int, chars: int) -> dict[str, str]:
        """The first `chars` characters of up to `documents` parsed documents drawn at
        random (the same ones for the same table), by path: enough to tell what languages
        a corpus is in without reading all of it."""
        with self.connect() as connection:
            rows = connection.execute(
                # The sample is drawn over the ids alone: a reservoir over the Markdown
                # would read every document's text to keep a few hundred.
                "SELECT r.rel_path, substr(p.markdown, 1, ?) FROM ("
                "SELECT doc_id FROM documents_parsed "
                f"USING SAMPLE reservoir({int(documents)} ROWS) REPEATABLE (0)) s "
                "JOIN documents_parsed p USING (doc_id) "
                "JOIN documents_raw r USING (doc_id) ORDER BY r.rel_path",
                [int(chars)],
            ).fetchall()
        return dict(rows)

    def parsed_documents(self, doc_ids: Sequence[str]) -> dict[str, ParsedDocument]:
        """These parsed documents with their page maps, by doc_id (absent ones left out).

        Read over one connection: opening the database file and closing it again costs
        several times what chunking a document costs, and more as the file grows, so the
        chunk stage reads its documents a batch at a time.
        """
        with self.connect() as connection:
            rows = connection.execute(
                "SELECT doc_id, content_sha256, markdown, page_map, parser, parser_version, "
                "parse_ms, warnings, title FROM documents_parsed "
                "WHERE doc_id IN (SELECT unnest(?::VARCHAR[]))",
                [list(doc_ids)],
            ).fetchall()
        return {
            row[0]: ParsedDocument(
                doc_id=row[0],
                content_sha256=row[1],
                markdown=row[2],
                page_map=[PageSpan(**span) for span in json.loads(row[3])],
                parser=row[4],
                parser_version=row[5],
                parse_ms=row[6],
                warnings=list(row[7]),
                title=row[8],
            )
            for row in rows
        }
