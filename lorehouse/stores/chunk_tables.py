"""The chunk and enrichment stages' tables: `chunks`, `enriched_chunks`, the document list."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import pandas as pd
import pyarrow as pa

from lorehouse.stores.database import (
    Database,
    insert_frame,
    key_frame,
)


class ChunkTables(Database):
    """What the chunk and enrichment stages read and write."""

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
        ids = key_frame("doc_id", doc_ids)
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
            insert_frame(connection, "chunks", "incoming", frame)
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

    # -- enrichment and the document list ------------------------------------------------------

    def documents_to_enrich(self, enricher_version: str) -> tuple[list[str], int]:
        """The chunked documents whose enrichment is not current, in path order, and how many
        are current.

        A document's enrichment is current when it was written from the chunks it has now,
        under the same title, by the same enricher (`enrichment_fingerprint` of those, stored
        with it), and neither it nor any of its chunks failed. Checked here in one query, a
        run that finds nothing changed reads no chunk and rewrites no row, where it had read
        every chunk and rewritten its enrichment to learn that.
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
        a large part of an enrichment run that found nothing to do.
        """
        wanted = key_frame("doc_id", doc_ids)
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
        wanted = key_frame("cache_key", keys)
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
            insert_frame(connection, "enrichment_cache", "new_cache", frame, keep_existing=True)

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
        replaced = key_frame("doc_id", doc_ids)
        with self._transaction(replaced=replaced, **frames) as connection:
            for table in targets:
                connection.execute(
                    f"DELETE FROM {table} WHERE doc_id IN (SELECT doc_id FROM replaced)"
                )
                name = f"new_{table}"
                if name in frames:
                    insert_frame(connection, table, name, frames[name])

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
