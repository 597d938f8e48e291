"""The features stage: the tables the API and analysts query, derived from the stage tables.

`documents` (one row per parsed document with its title, summary, chunk count and access),
`chunk_faqs` and `chunk_keywords` (one row per FAQ or keyword) are rebuilt in one
transaction, so a reader never sees a half-built table.
"""

from __future__ import annotations

import hashlib

from lorehouse.stores.duckdb_store import DuckDBStore

FEATURE_TABLES = ("documents", "chunk_faqs", "chunk_keywords")

_REBUILD = [
    "DELETE FROM documents",
    "INSERT INTO documents SELECT p.doc_id, "
    "coalesce(p.title, e.generated_title, r.rel_path), r.source_uri, r.rel_path, "
    "e.summary, (SELECT count(*) FROM chunks c WHERE c.doc_id = p.doc_id), "
    "p.page_count, r.acl_groups, p.content_sha256, e.enrichment_mode, "
    "greatest(p.parsed_at, coalesce((SELECT max(chunked_at) FROM chunks c "
    "WHERE c.doc_id = p.doc_id), p.parsed_at)) "
    "FROM documents_parsed p JOIN documents_raw r USING (doc_id) "
    "LEFT JOIN document_enrichment e USING (doc_id)",
    "DELETE FROM chunk_faqs",
    "INSERT INTO chunk_faqs SELECT chunk_id, doc_id, unnest(faqs) FROM enriched_chunks",
    "DELETE FROM chunk_keywords",
    "INSERT INTO chunk_keywords SELECT chunk_id, doc_id, unnest(keywords) FROM enriched_chunks",
]


#: Changes whenever the statements do, so the asset shows as changed code.
FEATURES_VERSION = hashlib.sha256("\n".join(_REBUILD).encode()).hexdigest()[:12]


def run_document_features(store: DuckDBStore) -> dict[str, int]:
    """Rebuilds the feature tables from the stage tables; returns each table's row count."""
    store.execute_in_transaction(_REBUILD)
    return {name: store.row_count(name) for name in FEATURE_TABLES}
