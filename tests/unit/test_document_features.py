"""The features stage rewrites only the documents whose feature rows changed."""

from __future__ import annotations

import pytest

from lorehouse.stages.features import (
    _FRESH,
    FEATURE_TABLES,
    corpus_languages,
    run_document_features,
)
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


GERMAN_TEXT = (
    "# Urlaub\n\nJede Mitarbeiterin und jeder Mitarbeiter hat Anspruch auf dreißig Tage "
    "bezahlten Erholungsurlaub im Jahr, der bis Ende März des Folgejahres genommen wird."
)


def test_a_document_takes_the_language_of_most_of_its_text(store: DuckDBStore) -> None:
    with store.connect() as connection:
        connection.execute(
            "UPDATE chunks SET language = 'de', token_count = 50 WHERE doc_id = 'doc-1'"
        )
        connection.execute("UPDATE chunks SET language = 'en' WHERE chunk_id = 'doc-2-0'")
        connection.execute("UPDATE chunks SET language = 'de' WHERE chunk_id = 'doc-2-1'")
        connection.execute("UPDATE chunks SET token_count = 9 WHERE chunk_id = 'doc-2-1'")
    counts = run_document_features(store)
    assert counts["documents_documents_rewritten"] == 2
    _equal_to_a_rebuild(store)
    with store.connect() as connection:
        languages = dict(connection.execute("SELECT doc_id, language FROM documents").fetchall())
    assert (languages["doc-1"], languages["doc-2"], languages["doc-3"]) == ("de", "de", "en")
    assert store.documents_by_language() == {"en": 10, "de": 2}


def test_a_corpus_in_a_language_not_named_is_found_from_a_sample(store: DuckDBStore) -> None:
    """Under the English default, German documents are told as German by the sample, and
    named once the deployment names German."""
    with store.connect() as connection:
        connection.execute(
            "UPDATE documents_parsed SET markdown = ? WHERE doc_id IN ('doc-1', 'doc-2', 'doc-3')",
            [GERMAN_TEXT],
        )
    found = corpus_languages(store, ("en",))
    assert found.sampled == 12
    assert found.by_language == {"en": 9, "de": 3}
    assert found.unnamed_share == 0.25
    assert sorted(found.unnamed_examples) == ["p/1.md", "p/2.md", "p/3.md"]
    assert corpus_languages(store, ("de", "en")).unnamed_share == 0.0
    assert corpus_languages(store, ("en",), sample=5).sampled == 5
