"""What the index, the API and answering read: chunks and documents for indexing, the
caller's documents and groups."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from lorehouse.stores.database import (
    VISIBLE_DOCUMENT,
    Database,
    key_frame,
)


class IndexReads(Database):
    """Reads for the index and the query side."""

    def index_merges(self) -> dict[tuple[str, str], str]:
        """(partition key, table name) -> the stage digest the last index merge took."""
        with self.connect() as connection:
            rows = connection.execute(
                "SELECT partition_key, table_name, digest FROM partition_index_merges"
            ).fetchall()
        return {(key, table): digest for key, table, digest in rows}

    def record_index_merges(
        self,
        digests: dict[tuple[str, str], str],
        replace: bool = False,
        forget: Sequence[str] = (),
    ) -> None:
        """Notes what an index merge took; with `replace`, forgets every earlier record (the
        shared tables were rebuilt from what this merge took alone); the partitions in
        `forget` lose theirs (rows of theirs left the shared tables), so the next merge that
        takes them compares them whole."""
        with self._transaction() as connection:
            if replace:
                connection.execute("DELETE FROM partition_index_merges")
            for key in forget:
                connection.execute(
                    "DELETE FROM partition_index_merges WHERE partition_key = ?", [key]
                )
            if digests:
                connection.executemany(
                    "INSERT OR REPLACE INTO partition_index_merges "
                    "VALUES (?, ?, ?, current_timestamp)",
                    [[key, table, digest] for (key, table), digest in digests.items()],
                )

    def access_lists(self, table: str, key: str, doc_ids: Sequence[str]) -> dict[str, list[str]]:
        """`key` -> access list of the rows of `doc_ids` in `table` (chunks by chunk id,
        documents by document id): what search rows of them may be served under."""
        if not doc_ids:
            return {}
        with self.connect() as connection:
            connection.register("wanted", key_frame("doc_id", doc_ids))
            rows = connection.execute(
                f"SELECT {key}, acl FROM {table} WHERE doc_id IN (SELECT doc_id FROM wanted)"
            ).fetchall()
        return {value: list(acl or []) for value, acl in rows}

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
            "c.heading_path, c.page_start, c.page_end, c.is_table, c.language, c.acl, c.text_chat, "
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
        wanted = key_frame("doc_id", doc_ids)
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

    def documents_by_language(self) -> dict[str, int]:
        """Documents of the document list per language, most first (plottable per run)."""
        with self.connect() as connection:
            rows = connection.execute(
                "SELECT coalesce(language, 'none'), count(*) FROM documents "
                "GROUP BY 1 ORDER BY 2 DESC, 1"
            ).fetchall()
        return {language: int(count) for language, count in rows}

    def visible_documents(
        self, caller_groups: Sequence[str], limit: int, offset: int
    ) -> tuple[int, list[dict]]:
        """(total, one page) of the document list a caller may see, by path.

        Access is decided in the query, like search, so a restricted document is never read
        into the page and then dropped.
        """
        groups = list(caller_groups)
        visible = VISIBLE_DOCUMENT
        with self.connect() as connection:
            total_row = connection.execute(
                f"SELECT count(*) FROM documents d WHERE {visible}", [groups]
            ).fetchone()
            frame = connection.execute(
                "SELECT d.doc_id, d.title, d.rel_path, r.file_type, d.summary, d.n_chunks, "
                "d.n_pages, d.updated_at, d.language "
                "FROM documents d JOIN documents_raw r USING (doc_id) "
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
            WHERE {VISIBLE_DOCUMENT} AND r.nth <= ?
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
