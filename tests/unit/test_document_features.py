"""The features stage rewrites only the documents whose feature rows changed."""

from __future__ import annotations

import pytest

from lorehouse.stages.features import _FRESH, FEATURE_TABLES, run_document_features
from lorehouse.stores.duckdb_store import DuckDBStore


@pytest.fixture
def store(stage_tables_store: DuckDBStore) -> DuckDBStore:
    run_document_features(stage_tables_store)
    return stage_tables_store


def _equal_to_a_rebuild(store: DuckDBStore) -> None:
    with store.connect() as connection:
        for table in FEATURE_TABLES:
            kept = sorted(map(repr, connection.execute(f"SELECT * FROM {table}").fetchall()))
            rebuilt = sorted(map(repr, connection.execute(_FRESH[table]).fetchall()))
            assert kept == rebuilt, table


def test_a_run_with_nothing_changed_rewrites_nothing(store: DuckDBStore) -> None:
    assert run_document_features(store) == {
        "documents": 12,
        "documents_documents_rewritten": 0,
        "chunk_faqs": 24,
        "chunk_faqs_documents_rewritten": 0,
        "chunk_keywords": 72,
        "chunk_keywords_documents_rewritten": 0,
    }


def test_edits_rewrite_only_their_documents_and_match_a_rebuild(store: DuckDBStore) -> None:
    with store.connect() as connection:
        connection.execute("UPDATE enriched_chunks SET keywords = ['sick'] WHERE doc_id = 'doc-1'")
        connection.execute("UPDATE document_enrichment SET summary = 'New.' WHERE doc_id = 'doc-2'")
        connection.execute("DELETE FROM enriched_chunks WHERE doc_id = 'doc-3'")
        connection.execute("DELETE FROM documents_parsed WHERE doc_id = 'doc-4'")
        connection.execute("DELETE FROM chunks WHERE chunk_id = 'doc-5-1'")
    counts = run_document_features(store)
    _equal_to_a_rebuild(store)
    # documents: doc-2's summary, doc-4 gone, doc-5 one chunk fewer; FAQs: doc-3's gone;
    # keywords: doc-1's changed and doc-3's gone.
    assert counts["documents_documents_rewritten"] == 3
    assert counts["chunk_faqs_documents_rewritten"] == 1
    assert counts["chunk_keywords_documents_rewritten"] == 2
    assert (counts["documents"], counts["chunk_faqs"], counts["chunk_keywords"]) == (11, 22, 62)
    with store.connect() as connection:
        keywords = connection.execute(
            "SELECT keyword FROM chunk_keywords WHERE doc_id = 'doc-1'"
        ).fetchall()
        summary = connection.execute("SELECT summary FROM documents WHERE doc_id = 'doc-2'")
        assert keywords == [("sick",), ("sick",)]
        assert summary.fetchone() == ("New.",)
