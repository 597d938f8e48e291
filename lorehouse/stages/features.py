"""The features stage: the tables the API and analysts query, derived from the stage tables.

`documents` (one row per parsed document with its title, summary, chunk count, access and
language),
`chunk_faqs` and `chunk_keywords` (one row per FAQ or keyword) are kept equal to what the
stage tables say. Each run computes every table's rows afresh, finds the documents whose rows
differ (a fingerprint per document on both sides), and deletes then inserts only those
documents' rows, all in one transaction: a reader never sees a half-updated table, and a
nightly run over a corpus that barely changed writes almost nothing.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from lorehouse.language import SAMPLE_CHARS, shared_detector
from lorehouse.search.bm25 import SNOWBALL_LANGUAGES
from lorehouse.stores.duckdb_store import DuckDBStore

FEATURE_TABLES = ("documents", "chunk_faqs", "chunk_keywords")

#: Each feature table's rows as the stage tables say they should be, in the table's column
#: order and types (equal rows must hash alike on both sides).
_FRESH = {
    "documents": (
        "SELECT p.doc_id, "
        "coalesce(p.title, e.generated_title, r.rel_path) AS title, r.source_uri, r.rel_path, "
        "e.summary, "
        "(SELECT count(*) FROM chunks c WHERE c.doc_id = p.doc_id)::INTEGER AS n_chunks, "
        "p.page_count AS n_pages, r.acl_groups AS acl, p.content_sha256, e.enrichment_mode, "
        "greatest(p.parsed_at, coalesce((SELECT max(chunked_at) FROM chunks c "
        "WHERE c.doc_id = p.doc_id), p.parsed_at)) AS updated_at, "
        "(SELECT c.language FROM chunks c WHERE c.doc_id = p.doc_id AND c.language IS NOT NULL "
        "GROUP BY c.language ORDER BY sum(c.token_count) DESC, c.language LIMIT 1) AS language "
        "FROM documents_parsed p JOIN documents_raw r USING (doc_id) "
        "LEFT JOIN document_enrichment e USING (doc_id)"
    ),
    "chunk_faqs": "SELECT chunk_id, doc_id, unnest(faqs) AS question FROM enriched_chunks",
    "chunk_keywords": "SELECT chunk_id, doc_id, unnest(keywords) AS keyword FROM enriched_chunks",
}


def _fingerprints(relation: str) -> str:
    """Per document: how many rows, and the sum of their rows' hashes (order-free, so two
    sides holding the same rows in any order agree)."""
    return (
        f"SELECT doc_id, count(*) AS n, sum(hash(row_)::HUGEINT) AS f "
        f"FROM {relation} row_ GROUP BY doc_id"
    )


def _sync(table: str) -> list[str]:
    """Statements that make `table` equal to its fresh rows, rewriting changed documents only."""
    fresh, changed = f"fresh_{table}", f"changed_{table}"
    return [
        # Created from the query itself: DuckDB 2.0.0 groups no rows of a temporary table
        # created empty and then filled within the same transaction.
        f"CREATE OR REPLACE TEMP TABLE {fresh} AS {_FRESH[table]}",
        f"CREATE OR REPLACE TEMP TABLE {changed} AS "
        f"SELECT coalesce(a.doc_id, b.doc_id) AS doc_id "
        f"FROM ({_fingerprints(fresh)}) a FULL OUTER JOIN ({_fingerprints(table)}) b "
        "ON a.doc_id = b.doc_id WHERE a.n IS DISTINCT FROM b.n OR a.f IS DISTINCT FROM b.f",
        f"DELETE FROM {table} WHERE doc_id IN (SELECT doc_id FROM {changed})",
        f"INSERT INTO {table} SELECT * FROM {fresh} WHERE doc_id IN (SELECT doc_id FROM {changed})",
    ]


#: Every table synced, then what is there and what changed (the temporary tables end with
#: the transaction's connection).
_STATEMENTS = [statement for table in FEATURE_TABLES for statement in _sync(table)] + [
    "SELECT "
    + ", ".join(
        f"(SELECT count(*) FROM {table}), (SELECT count(*) FROM changed_{table})"
        for table in FEATURE_TABLES
    )
]

#: Changes whenever the statements do, so the asset shows as changed code.
FEATURES_VERSION = hashlib.sha256("\n".join(_STATEMENTS).encode()).hexdigest()[:12]


def run_document_features(store: DuckDBStore) -> dict[str, int]:
    """Brings the feature tables in line with the stage tables. Returns each table's row
    count, and under `<table>_documents_rewritten` how many documents' rows it rewrote."""
    (summary,) = store.execute_in_transaction(_STATEMENTS)
    counts: dict[str, int] = {}
    for position, table in enumerate(FEATURE_TABLES):
        counts[table] = int(summary[2 * position])
        counts[f"{table}_documents_rewritten"] = int(summary[2 * position + 1])
    return counts


#: Documents read to tell a corpus's languages: a share of a few percent shows in 200.
LANGUAGE_SAMPLE_DOCUMENTS = 200
#: The share of sampled documents in languages the deployment does not name above which it
#: is told to name them: below it, a few quoted pages or a stray file.
UNNAMED_LANGUAGE_SHARE = 0.1


@dataclass(frozen=True)
class CorpusLanguages:
    """What a sample of the documents says of the corpus's languages."""

    #: Sampled documents per language, told among every language BM25 can stem.
    by_language: dict[str, int]
    #: Sampled documents in languages the deployment does not name, by path (a few).
    unnamed_examples: dict[str, str]
    sampled: int
    named: tuple[str, ...]

    @property
    def unnamed_share(self) -> float:
        unnamed = sum(n for code, n in self.by_language.items() if code not in self.named)
        return unnamed / self.sampled if self.sampled else 0.0


def corpus_languages(
    store: DuckDBStore, named: Sequence[str], sample: int = LANGUAGE_SAMPLE_DOCUMENTS
) -> CorpusLanguages:
    """The languages of a sample of the parsed documents, told among all the languages
    Lorehouse stems, not only the `named` ones (LOREHOUSE_LANGUAGES): a German corpus under
    the English default reads as English to everything else, since one named language is
    never told, and is found here.

    A document's first pages are long enough to tell among a dozen languages with
    confidence; a document too short to tell counts as the first named language.
    """
    detector = shared_detector((named[0], *(c for c in SNOWBALL_LANGUAGES if c != named[0])))
    texts = store.markdown_sample(sample, SAMPLE_CHARS)
    languages = {path: detector.detect(text) for path, text in texts.items()}
    unnamed = {path: code for path, code in languages.items() if code not in named}
    return CorpusLanguages(
        by_language=dict(Counter(languages.values()).most_common()),
        unnamed_examples=dict(list(unnamed.items())[:10]),
        sampled=len(texts),
        named=tuple(named),
    )
