"""The DuckDB feature store: document inventory, parsed Markdown, failures and chunks.

Each method opens a short-lived connection, so the Dagster webserver, a materialization and
the CLI can take turns on one database file instead of holding a lock for a whole run.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import cast

import duckdb
import pandas as pd
import pyarrow as pa

from lorehouse.models import (
    DocumentFailure,
    FailureReason,
    FileType,
    PageSpan,
    ParsedDocument,
    RawDocument,
)
from lorehouse.sources.base import SIDECAR_SUFFIX

_SCHEMA = """
CREATE TABLE IF NOT EXISTS documents_raw (
    doc_id VARCHAR PRIMARY KEY,
    source_uri VARCHAR NOT NULL,
    rel_path VARCHAR NOT NULL,
    file_type VARCHAR NOT NULL,
    size_bytes BIGINT NOT NULL,
    content_sha256 VARCHAR NOT NULL,
    modified_at TIMESTAMPTZ NOT NULL,
    acl_groups VARCHAR[] NOT NULL,
    inventoried_at TIMESTAMPTZ NOT NULL DEFAULT current_timestamp
);
CREATE TABLE IF NOT EXISTS documents_parsed (
    doc_id VARCHAR PRIMARY KEY,
    content_sha256 VARCHAR NOT NULL,
    title VARCHAR,
    markdown VARCHAR NOT NULL,
    page_map JSON NOT NULL,
    page_count INTEGER NOT NULL,
    parser VARCHAR NOT NULL,
    parser_version VARCHAR NOT NULL,
    parse_ms DOUBLE NOT NULL,
    warnings VARCHAR[] NOT NULL,
    parsed_at TIMESTAMPTZ NOT NULL DEFAULT current_timestamp
);
CREATE TABLE IF NOT EXISTS documents_failed (
    doc_id VARCHAR NOT NULL,
    stage VARCHAR NOT NULL,
    rel_path VARCHAR NOT NULL,
    content_sha256 VARCHAR NOT NULL,
    version VARCHAR NOT NULL,
    reason VARCHAR NOT NULL,
    detail VARCHAR NOT NULL,
    "at" TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (doc_id, stage)
);
CREATE TABLE IF NOT EXISTS chunks (
    chunk_id VARCHAR PRIMARY KEY,
    doc_id VARCHAR NOT NULL,
    position INTEGER NOT NULL,
    heading_path VARCHAR[] NOT NULL,
    text_embed VARCHAR NOT NULL,
    text_chat VARCHAR NOT NULL,
    page_start INTEGER,
    page_end INTEGER,
    is_table BOOLEAN NOT NULL,
    token_count INTEGER NOT NULL,
    acl VARCHAR[] NOT NULL,
    source_fingerprint VARCHAR NOT NULL,
    chunked_at TIMESTAMPTZ NOT NULL DEFAULT current_timestamp
);
-- Parsed documents whose current parse yields no chunk (an empty page, a lone heading):
-- without a row here they would have no chunk carrying the fingerprint, and every run would
-- chunk them again.
CREATE TABLE IF NOT EXISTS chunkless_documents (
    doc_id VARCHAR PRIMARY KEY,
    source_fingerprint VARCHAR NOT NULL
);
CREATE TABLE IF NOT EXISTS enrichment_cache (
    cache_key VARCHAR PRIMARY KEY,
    kind VARCHAR NOT NULL,
    model VARCHAR NOT NULL,
    payload JSON NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT current_timestamp
);
CREATE TABLE IF NOT EXISTS enriched_chunks (
    chunk_id VARCHAR PRIMARY KEY,
    doc_id VARCHAR NOT NULL,
    summary VARCHAR,
    faqs VARCHAR[] NOT NULL,
    keywords VARCHAR[] NOT NULL,
    enrichment_mode VARCHAR NOT NULL,
    model VARCHAR NOT NULL,
    prompt_version VARCHAR NOT NULL,
    status VARCHAR NOT NULL,
    error VARCHAR
);
CREATE TABLE IF NOT EXISTS document_enrichment (
    doc_id VARCHAR PRIMARY KEY,
    summary VARCHAR,
    generated_title VARCHAR,
    enrichment_mode VARCHAR NOT NULL,
    model VARCHAR NOT NULL,
    status VARCHAR NOT NULL,
    error VARCHAR,
    input_fingerprint VARCHAR
);
-- Each index partition's last merge into this store: what its stage tables held then.
CREATE TABLE IF NOT EXISTS partition_merges (
    partition_key VARCHAR PRIMARY KEY,
    digest VARCHAR NOT NULL,
    merged_at TIMESTAMPTZ NOT NULL
);
CREATE TABLE IF NOT EXISTS documents (
    doc_id VARCHAR PRIMARY KEY,
    title VARCHAR NOT NULL,
    source_uri VARCHAR NOT NULL,
    rel_path VARCHAR NOT NULL,
    summary VARCHAR,
    n_chunks INTEGER NOT NULL,
    n_pages INTEGER NOT NULL,
    acl VARCHAR[] NOT NULL,
    content_sha256 VARCHAR NOT NULL,
    enrichment_mode VARCHAR,
    updated_at TIMESTAMPTZ NOT NULL
);
CREATE TABLE IF NOT EXISTS chunk_faqs (
    chunk_id VARCHAR NOT NULL,
    doc_id VARCHAR NOT NULL,
    question VARCHAR NOT NULL
);
CREATE TABLE IF NOT EXISTS eval_retrieval (
    run_id VARCHAR NOT NULL,
    evaluated_at TIMESTAMPTZ NOT NULL,
    index_version VARCHAR NOT NULL,
    golden_set VARCHAR NOT NULL,
    retriever VARCHAR NOT NULL,
    case_type VARCHAR NOT NULL,
    k INTEGER NOT NULL,
    recall DOUBLE NOT NULL,
    mrr DOUBLE NOT NULL,
    n_questions INTEGER NOT NULL,
    is_default BOOLEAN NOT NULL
);
CREATE TABLE IF NOT EXISTS eval_retrieval_misses (
    run_id VARCHAR NOT NULL,
    golden_set VARCHAR NOT NULL,
    retriever VARCHAR NOT NULL,
    case_id VARCHAR NOT NULL,
    case_type VARCHAR NOT NULL,
    question VARCHAR NOT NULL,
    file VARCHAR NOT NULL,
    excerpt VARCHAR NOT NULL,
    reason VARCHAR NOT NULL,
    detail VARCHAR NOT NULL,
    rank_vector INTEGER,
    rank_bm25 INTEGER,
    rank_hybrid INTEGER
);
CREATE TABLE IF NOT EXISTS answer_feedback (
    -- a reader's verdict on one answer, kept for review as a golden-set candidate
    answer_id VARCHAR NOT NULL,
    given_at TIMESTAMPTZ NOT NULL,
    caller VARCHAR NOT NULL,
    rating VARCHAR NOT NULL,
    comment VARCHAR,
    question VARCHAR NOT NULL,
    answer VARCHAR NOT NULL,
    -- the cited chunks, as (chunk id, file) in citation order
    cited_chunk_ids VARCHAR[] NOT NULL,
    cited_files VARCHAR[] NOT NULL
);
CREATE TABLE IF NOT EXISTS eval_answers (
    run_id VARCHAR NOT NULL,
    evaluated_at TIMESTAMPTZ NOT NULL,
    golden_set VARCHAR NOT NULL,
    case_id VARCHAR NOT NULL,
    case_type VARCHAR NOT NULL,
    question VARCHAR NOT NULL,
    reference_answer VARCHAR NOT NULL,
    answer VARCHAR NOT NULL,
    answer_mode VARCHAR NOT NULL,
    degraded BOOLEAN NOT NULL,
    n_citations INTEGER NOT NULL,
    judge_model VARCHAR NOT NULL,
    -- NULL score and label: the judge failed for this case; judge_error says why
    score INTEGER,
    label VARCHAR,
    reasoning VARCHAR,
    judge_error VARCHAR,
    answer_seconds DOUBLE NOT NULL,
    -- the offline metric: the reference's numbers and named terms, and those stated
    key_facts INTEGER DEFAULT 0,
    key_facts_found INTEGER DEFAULT 0,
    declined BOOLEAN DEFAULT false,
    -- the lead (the answer's first statement): its words and the reference facts it states,
    -- and the facts the lead and the excerpts state together
    lead VARCHAR DEFAULT '',
    lead_words INTEGER DEFAULT 0,
    lead_key_facts_found INTEGER DEFAULT 0,
    shown_key_facts_found INTEGER DEFAULT 0
);
CREATE TABLE IF NOT EXISTS chunk_keywords (
    chunk_id VARCHAR NOT NULL,
    doc_id VARCHAR NOT NULL,
    keyword VARCHAR NOT NULL
);
"""


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


_OPENING = threading.Lock()
#: Counting a caller's verdicts and storing the next one take turns within a process: its
#: threads share one DuckDB instance, where two transactions could both count one below the
#: quota and both insert. Other processes wait for the file's lock anyway.
_FEEDBACK_WRITES = threading.Lock()


@dataclass(frozen=True)
class FeedbackQuota:
    """At most `verdicts` from one caller within any `window`.

    Every verdict is a golden-set candidate that a person reviews, so one caller must not be
    able to queue more of them than reviewers can read.
    """

    verdicts: int
    window: timedelta


class DuckDBStore:
    """Reads and writes the Lorehouse tables in one DuckDB file."""

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

    # -- documents_raw -------------------------------------------------------------------------

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
                rows = _first_rows(connection, result, shown)
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

    # -- documents_parsed / documents_failed ---------------------------------------------------

    def adopt_inventory(self, inventory_slice: Path) -> int:
        """Makes this store's inventory the rows of a Parquet slice (a partition's share of
        the global inventory, `lorehouse.stores.partitions`), in one transaction, and returns
        how many documents left it: their parsed rows and failures go with them, as the
        global inventory's own swap does."""
        source = "read_parquet('" + str(inventory_slice.resolve()).replace("'", "''") + "')"
        with self._transaction() as connection:
            return _replace_inventory(connection, f"(SELECT * FROM {source})")

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
            connection.register("wanted_documents", _key_frame("doc_id", doc_ids))
            try:
                rows = connection.execute(
                    f"SELECT {RAW_COLUMNS} FROM documents_raw "
                    "WHERE doc_id IN (SELECT doc_id FROM wanted_documents)"
                ).fetchall()
            finally:
                connection.unregister("wanted_documents")
        found = {row[0]: row for row in rows}
        return [_raw_document(found[doc_id]) for doc_id in doc_ids if doc_id in found]

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

    def parsed_documents(self, doc_ids: Sequence[str]) -> dict[str, ParsedDocument]:
        """These parsed documents with their page maps, by doc_id (absent ones left out).

        Read over one connection: opening the database file and closing it again costs
        several times what chunking a document costs, and more as the file grows, so the
        chunk stage reads its documents a batch at a time
        (docs/experiments/2026-11-26-scale-20000-documents.md).
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

    # -- chunks ---------------------------------------------------------------------------------

    def to_chunk(self, chunker_version: str) -> pa.Table:
        """(doc_id, fingerprint, acl) of every parsed document not chunked from its current
        parse with this chunker, by doc_id; as Arrow, so a first build of a million documents
        holds about 150 MB here, and an unchanged corpus nothing.

        A document's fingerprint is its content hash, parser version and chunker version;
        its chunks carry the fingerprint they were cut from, and a document cut into no chunk
        has it in `chunkless_documents`.
        """
        fingerprint = "p.content_sha256 || '|' || p.parser_version || '|' || $version"
        with self.connect() as connection:
            return connection.sql(
                f"SELECT p.doc_id, {fingerprint} AS fingerprint, r.acl_groups AS acl "
                "FROM documents_parsed p JOIN documents_raw r USING (doc_id) "
                "WHERE NOT EXISTS (SELECT 1 FROM chunks c WHERE c.doc_id = p.doc_id "
                f"AND c.source_fingerprint = {fingerprint}) "
                "AND NOT EXISTS (SELECT 1 FROM chunkless_documents e WHERE e.doc_id = p.doc_id "
                f"AND e.source_fingerprint = {fingerprint}) ORDER BY p.doc_id",
                params={"version": chunker_version},
            ).to_arrow_table()

    def replace_chunks(
        self,
        doc_ids: Sequence[str],
        frame: pd.DataFrame,
        chunkless: Mapping[str, str] | None = None,
    ) -> None:
        """Swaps the chunks of these documents for `frame`'s rows in one transaction;
        `chunkless` maps those of them cut into no chunk to the fingerprint they were cut from.
        """
        ids = _key_frame("doc_id", doc_ids)
        chunkless = chunkless or {}
        empty = pa.table(
            {
                "doc_id": pa.array(list(chunkless), pa.string()),
                "source_fingerprint": pa.array(list(chunkless.values()), pa.string()),
            }
        )
        with self._transaction(incoming=frame, replaced=ids, empty=empty) as connection:
            connection.execute("DELETE FROM chunks WHERE doc_id IN (SELECT doc_id FROM replaced)")
            connection.execute(
                "DELETE FROM chunkless_documents WHERE doc_id IN (SELECT doc_id FROM replaced)"
            )
            _insert_frame(connection, "chunks", "incoming", frame)
            connection.execute(
                "INSERT INTO chunkless_documents SELECT doc_id, source_fingerprint FROM empty"
            )

    def drop_unparsed_chunks(self) -> int:
        """Deletes chunks of documents no longer parsed (removed, or now failing); returns how
        many documents lost theirs."""
        gone = "SELECT doc_id FROM chunks EXCEPT SELECT doc_id FROM documents_parsed"
        with self._transaction() as connection:
            ((documents,),) = connection.execute(f"SELECT count(*) FROM ({gone})").fetchall()
            connection.execute(f"DELETE FROM chunks WHERE doc_id IN ({gone})")
            connection.execute(
                "DELETE FROM chunkless_documents "
                "WHERE doc_id NOT IN (SELECT doc_id FROM documents_parsed)"
            )
        return int(documents)

    def relabel_chunks(self) -> int:
        """Gives chunks their document's current access groups where these changed (an access
        file edited, a sharing change at the source); returns how many documents' chunks
        were re-labelled. Their text, enrichment and vectors stay: only who may read moved,
        and a lost access takes effect without parsing or embedding anything again."""
        moved = (
            "SELECT DISTINCT c.doc_id FROM chunks c JOIN documents_raw r USING (doc_id) "
            "WHERE list_sort(c.acl) IS DISTINCT FROM list_sort(r.acl_groups)"
        )
        with self._transaction() as connection:
            ((documents,),) = connection.execute(f"SELECT count(*) FROM ({moved})").fetchall()
            if documents:
                connection.execute(
                    "UPDATE chunks SET acl = r.acl_groups FROM documents_raw r "
                    f"WHERE chunks.doc_id = r.doc_id AND chunks.doc_id IN ({moved})"
                )
        return int(documents)

    # -- enrichment and the document list -------------------------------------------------------

    def documents_to_enrich(self, enricher_version: str) -> tuple[list[str], int]:
        """The chunked documents whose enrichment is not current, in path order, and how many
        are current.

        A document's enrichment is current when it was written from the chunks it has now,
        under the same title, by the same enricher (`enrichment_fingerprint` of those, stored
        with it), and neither it nor any of its chunks failed. Checked here in one query, a
        run that finds nothing changed reads no chunk and rewrites no row, where it had read
        every chunk and rewritten its enrichment to learn that
        (docs/experiments/2026-11-26-enrichment-fingerprints.md).
        """
        with self.connect() as connection:
            rows = connection.execute(
                "WITH current_input AS ("
                "  SELECT c.doc_id, md5(? || '|' || coalesce(p.title, '') || '|' || "
                "    string_agg(c.chunk_id, ',' ORDER BY c.position)) AS fingerprint "
                "  FROM chunks c JOIN documents_parsed p USING (doc_id) GROUP BY c.doc_id, p.title"
                ") "
                "SELECT r.doc_id, coalesce(e.status = 'enriched' "
                "  AND e.input_fingerprint = i.fingerprint "
                "  AND NOT EXISTS (SELECT 1 FROM enriched_chunks x "
                "                  WHERE x.doc_id = r.doc_id AND x.status <> 'enriched'), false) "
                "FROM documents_raw r JOIN current_input i USING (doc_id) "
                "LEFT JOIN document_enrichment e USING (doc_id) ORDER BY r.rel_path",
                [enricher_version],
            ).fetchall()
        return [doc_id for doc_id, current in rows if not current], sum(c for _, c in rows)

    def chunks_by_document(
        self, doc_ids: Sequence[str]
    ) -> list[tuple[str, str, str | None, list[dict]]]:
        """(doc_id, rel_path, title, chunks in order) for these chunked documents.

        Grouped from Arrow rows in Python: pandas' groupby with a `to_dict` per document took
        a large part of an enrichment run that found nothing to do
        (docs/experiments/2026-11-26-scale-20000-documents.md).
        """
        wanted = _key_frame("doc_id", doc_ids)
        with self.connect() as connection:
            connection.register("wanted", wanted)
            try:
                query = (
                    "SELECT c.doc_id, r.rel_path, p.title, c.chunk_id, c.heading_path, "
                    "c.text_chat, c.text_embed, c.is_table FROM chunks c "
                    "JOIN documents_raw r USING (doc_id) JOIN documents_parsed p USING (doc_id) "
                    "WHERE c.doc_id IN (SELECT doc_id FROM wanted) ORDER BY r.rel_path, c.position"
                )
                rows = connection.sql(query).to_arrow_table().to_pylist()
            finally:
                connection.unregister("wanted")
        # Rows arrive by path, and a path is one document's: each document's rows are adjacent.
        return [
            (doc_id, chunks[0]["rel_path"], chunks[0]["title"], chunks)
            for doc_id, group in itertools.groupby(rows, key=lambda row: row["doc_id"])
            for chunks in [list(group)]
        ]

    def cached_enrichments(self, keys: Sequence[str]) -> dict[str, str]:
        """Cached payloads (JSON text) for the keys that have one."""
        if not keys:
            return {}
        wanted = _key_frame("cache_key", keys)
        with self._transaction(wanted=wanted) as connection:
            rows = connection.execute(
                "SELECT cache_key, payload FROM enrichment_cache "
                "WHERE cache_key IN (SELECT cache_key FROM wanted)"
            ).fetchall()
        return {row[0]: row[1] for row in rows}

    def add_enrichment_cache(self, rows: Sequence[dict]) -> None:
        """Adds answers to the enrichment cache; keys already cached keep their answer."""
        if not rows:
            return
        frame = pd.DataFrame(list(rows))
        with self._transaction(new_cache=frame) as connection:
            _insert_frame(connection, "enrichment_cache", "new_cache", frame, keep_existing=True)

    def replace_enrichment(
        self, doc_ids: Sequence[str], chunk_rows: Sequence[dict], document_rows: Sequence[dict]
    ) -> None:
        """Swaps these documents' enriched chunks and document enrichment in one transaction:
        a reader sees each document's old enrichment or its new one, never a mix."""
        targets = {"enriched_chunks": chunk_rows, "document_enrichment": document_rows}
        # DuckDB cannot register a frame without columns, so empty row lists are left out.
        frames = {
            f"new_{table}": pd.DataFrame(list(rows)) for table, rows in targets.items() if rows
        }
        replaced = _key_frame("doc_id", doc_ids)
        with self._transaction(replaced=replaced, **frames) as connection:
            for table in targets:
                connection.execute(
                    f"DELETE FROM {table} WHERE doc_id IN (SELECT doc_id FROM replaced)"
                )
                name = f"new_{table}"
                if name in frames:
                    _insert_frame(connection, table, name, frames[name])

    def drop_enrichment_of_unchunked(self) -> int:
        """Deletes the enrichment of documents that no longer have chunks; returns the rows."""
        tables = ("enriched_chunks", "document_enrichment")
        with self._transaction() as connection:
            dropped = 0
            for table in tables:
                row = connection.execute(
                    f"SELECT count(*) FROM {table} "
                    "WHERE doc_id NOT IN (SELECT DISTINCT doc_id FROM chunks)"
                ).fetchone()
                dropped += int(row[0]) if row else 0
                connection.execute(
                    f"DELETE FROM {table} WHERE doc_id NOT IN (SELECT DISTINCT doc_id FROM chunks)"
                )
        return dropped

    def execute_in_transaction(self, statements: Sequence[str]) -> list[tuple]:
        """Runs SQL statements as one transaction: readers see all of them or none. Returns
        the rows of the last statement (a summary of what the others did, if it is a query);
        temporary tables they create last until then."""
        rows: list[tuple] = []
        with self._transaction() as connection:
            for statement in statements:
                rows = connection.execute(statement).fetchall()
        return rows

    def document_ids_for_index(self) -> list[str]:
        """Every document of the `documents` table, in path order (the index's batches)."""
        with self.connect() as connection:
            rows = connection.execute("SELECT doc_id FROM documents ORDER BY rel_path").fetchall()
        return [row[0] for row in rows]

    def chunks_for_index(self, doc_ids: Sequence[str] | None = None) -> pd.DataFrame:
        """Every chunk (of `doc_ids`, when given) with what the search index stores beside
        it: title, file, enrichment."""
        return self._for_documents(
            "SELECT c.chunk_id, c.doc_id, d.title, r.rel_path, r.source_uri, r.file_type, "
            "c.position, "
            "c.heading_path, c.page_start, c.page_end, c.is_table, c.acl, c.text_chat, "
            "c.text_embed, e.summary, coalesce(e.faqs, []) AS faqs, "
            "coalesce(e.keywords, []) AS keywords "
            "FROM chunks c JOIN documents d USING (doc_id) "
            "JOIN documents_raw r USING (doc_id) "
            "LEFT JOIN enriched_chunks e USING (chunk_id) "
            "{where} ORDER BY r.rel_path, c.position",
            "c.doc_id",
            doc_ids,
        )

    def _for_documents(
        self,
        query: str,
        doc_column: str,
        doc_ids: Sequence[str] | None,
        parameters: Sequence[object] = (),
    ) -> pd.DataFrame:
        """`query` with its `{where}` limited to `doc_ids` (all documents when None)."""
        if doc_ids is None:
            with self.connect() as connection:
                return connection.execute(query.format(where=""), list(parameters)).df()
        wanted = _key_frame("doc_id", doc_ids)
        with self.connect() as connection:
            connection.register("wanted_documents", wanted)
            try:
                where = f"WHERE {doc_column} IN (SELECT doc_id FROM wanted_documents)"
                return connection.execute(query.format(where=where), list(parameters)).df()
            finally:
                connection.unregister("wanted_documents")

    def parsed_for_baseline(self) -> pd.DataFrame:
        """Every parsed document's whole Markdown with its path and ACL (for baselines)."""
        with self.connect() as connection:
            return connection.execute(
                "SELECT p.doc_id, r.rel_path, r.acl_groups AS acl, p.markdown "
                "FROM documents_parsed p JOIN documents_raw r USING (doc_id) ORDER BY r.rel_path"
            ).df()

    def documents_for_index(
        self, doc_ids: Sequence[str] | None = None, faqs_per_document: int = 12
    ) -> pd.DataFrame:
        """Each document's (of `doc_ids`, when given) profile inputs: title, summary and some
        of its chunks' FAQs."""
        return self._for_documents(
            "SELECT d.doc_id, d.title, d.rel_path, d.acl, d.summary, "
            "coalesce(list(f.question ORDER BY f.chunk_id, f.question) "
            "FILTER (WHERE f.question IS NOT NULL)[1:?], []) AS faqs "
            "FROM documents d LEFT JOIN chunk_faqs f USING (doc_id) "
            "{where} GROUP BY ALL ORDER BY d.rel_path",
            "d.doc_id",
            doc_ids,
            [faqs_per_document],
        )

    def access_groups(self) -> list[str]:
        """Every access group any document names (an evaluation sees all of them)."""
        with self.connect() as connection:
            rows = connection.execute(
                "SELECT DISTINCT unnest(acl_groups) FROM documents_raw ORDER BY 1"
            ).fetchall()
        return [row[0] for row in rows]

    def append_eval_retrieval(self, frame: pd.DataFrame) -> None:
        """Adds one eval run's rows; runs are kept, so recall can be compared across runs."""
        with self._transaction(incoming=frame) as connection:
            _insert_frame(connection, "eval_retrieval", "incoming", frame)

    def append_eval_retrieval_misses(self, frame: pd.DataFrame) -> None:
        """Adds why one eval run's misses were missed, one row per evidence excerpt."""
        with self._transaction(incoming=frame) as connection:
            _insert_frame(connection, "eval_retrieval_misses", "incoming", frame)

    def add_feedback(
        self, row: dict[str, object], quota: FeedbackQuota | None = None
    ) -> datetime | None:
        """Stores one reader's verdict on an answer (see the answer_feedback table).

        With a `quota`, the verdict is stored only while its caller gave fewer than
        `quota.verdicts` in the `quota.window` before its `given_at`. Returns None when it was
        stored; else nothing is stored and the answer is when the caller's next verdict will
        be taken.
        """
        with _FEEDBACK_WRITES, self._transaction() as connection:
            if quota is not None:
                # The caller's quota-th latest verdict inside the window: while there is one,
                # the quota is used up, until that verdict leaves the window.
                used_up = connection.execute(
                    "SELECT given_at FROM answer_feedback WHERE caller = ? AND given_at > ? "
                    "ORDER BY given_at DESC LIMIT 1 OFFSET ?",
                    [
                        row["caller"],
                        cast(datetime, row["given_at"]) - quota.window,
                        quota.verdicts - 1,
                    ],
                ).fetchone()
                if used_up is not None:
                    return cast(datetime, used_up[0]) + quota.window
            connection.execute(
                "INSERT INTO answer_feedback (answer_id, given_at, caller, rating, comment, "
                "question, answer, cited_chunk_ids, cited_files) "
                "VALUES ($answer_id, $given_at, $caller, $rating, $comment, $question, $answer, "
                "$cited_chunk_ids, $cited_files)",
                row,
            )
        return None

    def feedback(self) -> pd.DataFrame:
        """Every verdict given, oldest first."""
        with self.connect() as connection:
            return connection.execute("SELECT * FROM answer_feedback ORDER BY given_at").df()

    def append_eval_answers(self, frame: pd.DataFrame) -> None:
        """Adds one answer-eval run's judged cases; runs are kept for comparison."""
        with self._transaction(incoming=frame) as connection:
            _insert_frame(connection, "eval_answers", "incoming", frame)

    def recall_history(self, k: int, golden_set: str) -> list[tuple[str, str, float]]:
        """(run_id, retriever, recall@k) of the default retriever per run, newest first."""
        with self.connect() as connection:
            rows = connection.execute(
                "SELECT run_id, retriever, recall FROM eval_retrieval WHERE is_default "
                "AND k = ? AND case_type = 'all' AND golden_set = ? ORDER BY evaluated_at DESC",
                [k, golden_set],
            ).fetchall()
        return [(row[0], row[1], float(row[2])) for row in rows]

    def visible_documents(
        self, caller_groups: Sequence[str], limit: int, offset: int
    ) -> tuple[int, list[dict]]:
        """(total, one page) of the document list a caller may see, by path.

        Access is decided in the query, like search, so a restricted document is never read
        into the page and then dropped.
        """
        groups = list(caller_groups)
        visible = _VISIBLE_DOCUMENT
        with self.connect() as connection:
            total_row = connection.execute(
                f"SELECT count(*) FROM documents d WHERE {visible}", [groups]
            ).fetchone()
            frame = connection.execute(
                "SELECT d.doc_id, d.title, d.rel_path, r.file_type, d.summary, d.n_chunks, "
                "d.n_pages, d.updated_at FROM documents d JOIN documents_raw r USING (doc_id) "
                f"WHERE {visible} ORDER BY d.rel_path LIMIT ? OFFSET ?",
                [groups, limit, offset],
            ).df()
        total = int(total_row[0]) if total_row else 0
        return total, frame.to_dict("records")

    def question_candidates(self, caller_groups: Sequence[str], per_document: int) -> list[dict]:
        """Each visible document's questions (its chunks' FAQs: kind 0; headings phrased as
        questions: kind 1) and section headings (kind 2), at most `per_document` of each, in
        reading order, newest documents first: what suggested questions are drawn from.
        Access is decided in the query, as for the document list."""
        query = f"""
            WITH asked AS (
                SELECT f.doc_id, trim(f.question) AS text, 0 AS kind, min(c.position) AS position
                FROM chunk_faqs f JOIN chunks c USING (chunk_id)
                GROUP BY ALL
                UNION ALL
                SELECT c.doc_id, trim(c.heading_path[-1]) AS text,
                    CASE WHEN trim(c.heading_path[-1]) LIKE '%?' THEN 1 ELSE 2 END AS kind,
                    min(c.position) AS position
                FROM chunks c WHERE len(c.heading_path) > 0
                GROUP BY ALL
            ), ranked AS (
                SELECT a.*, row_number() OVER (
                    PARTITION BY a.doc_id, a.kind = 2 ORDER BY a.kind, a.position, a.text
                ) AS nth
                FROM asked a WHERE a.text <> ''
            )
            SELECT d.doc_id, d.title, d.rel_path, r.text, r.kind, r.nth
            FROM ranked r JOIN documents d USING (doc_id)
            WHERE {_VISIBLE_DOCUMENT} AND r.nth <= ?
            ORDER BY d.updated_at DESC, d.rel_path, r.kind, r.nth
        """
        with self.connect() as connection:
            frame = connection.execute(query, [list(caller_groups), per_document]).df()
        return frame.to_dict("records")

    def indexed_content_sha256(self, doc_id: str) -> str | None:
        """The content digest of the bytes a document's chunks were built from; None when the
        document is not in the feature tables. The API serves an original only while the file
        still holds these bytes."""
        with self.connect() as connection:
            row = connection.execute(
                "SELECT content_sha256 FROM documents WHERE doc_id = ?", [doc_id]
            ).fetchone()
        return str(row[0]) if row else None

    # -- reporting -----------------------------------------------------------------------------

    def table(
        self, name: str, columns: Sequence[str] = ("*",), limit: int | None = None
    ) -> pd.DataFrame:
        """A table (its `columns`, at most `limit` rows) as a DataFrame, for reports and tests.

        Whole tables grow with the corpus: a stage or check reads only the columns it needs,
        or goes through `table_batches`.
        """
        selected = ", ".join("*" if c == "*" else f'"{_column(c)}"' for c in columns)
        bound = f" LIMIT {int(limit)}" if limit is not None else ""
        with self.connect() as connection:
            return connection.execute(f"SELECT {selected} FROM {_known(name)}{bound}").df()

    def column_values(self, name: str, column: str) -> pa.ChunkedArray:
        """One column of a whole table as Arrow (a few bytes a value, not a Python object)."""
        query = f'SELECT "{_column(column)}" FROM {_known(name)}'
        with self.connect() as connection:
            return connection.sql(query).to_arrow_table()[column]

    def table_batches(self, name: str, rows_per_batch: int) -> Iterator[pd.DataFrame]:
        """A whole table in batches of at most `rows_per_batch` rows (by row id), so that
        reading it costs the memory of a batch, not of the table. Each batch opens its own
        short connection, as every read here does, so no one waits long for the file."""
        with self.connect() as connection:
            row = connection.execute(f"SELECT max(rowid) FROM {_known(name)}").fetchone()
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
        quoted = f'"{_column(column)}"'
        with self.connect() as connection:
            return connection.execute(
                f"SELECT {quoted}, count(*) AS n FROM {_known(name)} GROUP BY {quoted} "
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
            row = connection.execute(f"SELECT count(*) FROM {_known(name)}").fetchone()
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
            rows = result.fetchall() if limit is None else _first_rows(connection, result, limit)
        return [
            DocumentStatus(
                doc_id=row[0],
                rel_path=row[1],
                file_type=row[2],
                status=row[3],
                reason=row[4],
                detail=row[5],
                acl_groups=list(row[6]),
                title=row[7],
            )
            for row in rows
        ]

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
#: S3 object's LastModified moves with every upload, so on S3 this follows the content too.
_UNCHANGED = "l.size_bytes = r.size_bytes AND l.modified_at = r.modified_at"


class InventoryStaging:
    """One inventory run's tables: the listing as staged, the plan (each document in path
    order with what the last inventory knew of it) and the rows of the new inventory.

    Every step is its own short transaction and moves one batch, so the memory of a run is
    a batch's; DuckDB does the joins and the one sort, spilling to disk past its limit.
    """

    def __init__(self, store: DuckDBStore, token: str) -> None:
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


def _first_rows(
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


def _raw_document(row: Sequence) -> RawDocument:
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

# Columns added to tables after their first release; CREATE TABLE IF NOT EXISTS leaves a
# table made by an older version as it was.
_MIGRATIONS = """
ALTER TABLE eval_answers ADD COLUMN IF NOT EXISTS key_facts INTEGER DEFAULT 0;
ALTER TABLE eval_answers ADD COLUMN IF NOT EXISTS key_facts_found INTEGER DEFAULT 0;
ALTER TABLE eval_answers ADD COLUMN IF NOT EXISTS declined BOOLEAN DEFAULT false;
ALTER TABLE eval_answers ADD COLUMN IF NOT EXISTS lead VARCHAR DEFAULT '';
ALTER TABLE eval_answers ADD COLUMN IF NOT EXISTS lead_words INTEGER DEFAULT 0;
ALTER TABLE eval_answers ADD COLUMN IF NOT EXISTS lead_key_facts_found INTEGER DEFAULT 0;
ALTER TABLE eval_answers ADD COLUMN IF NOT EXISTS shown_key_facts_found INTEGER DEFAULT 0;
ALTER TABLE document_enrichment ADD COLUMN IF NOT EXISTS input_fingerprint VARCHAR;
"""
_TABLES = frozenset(re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", _SCHEMA))


def _key_frame(column: str, keys: Sequence[str]) -> pd.DataFrame:
    """One text column of keys to join against. Typed as text so that an empty list still
    compares with the VARCHAR key columns (pandas would type it as a number)."""
    return pd.DataFrame({column: pd.Series(list(keys), dtype="string")})


def _insert_frame(
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


def _known(table: str) -> str:
    """Table names are interpolated into SQL, so only the store's own are accepted."""
    if table not in _TABLES:
        raise ValueError(f"unknown table {table!r}")
    return table


def _column(name: str) -> str:
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
_VISIBLE_DOCUMENT = "(len(d.acl) = 0 OR list_has_any(d.acl, ?::VARCHAR[]))"
_STAGING_TABLE = re.compile(r"inventory_staging_[0-9a-f]{12}_(listing|plan|next)")


def _staging_table(name: str) -> str:
    """Staging table names are interpolated into SQL, so only the inventory's own pass."""
    if not _STAGING_TABLE.fullmatch(name):
        raise ValueError(f"not an inventory staging table: {name!r}")
    return name
