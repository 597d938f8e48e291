"""The enrichment stage: summaries, keywords and FAQs for every current chunk and document.

What an enrichment is (LLM or extractive, cached by text, prompt and model) lives in
`lorehouse.enrichment`; this runner feeds it the store's chunks and writes the results.
"""

from __future__ import annotations

from lorehouse.chunking import BREADCRUMB_SEPARATOR
from lorehouse.enrichment import ChunkInput, DocumentInput, Enricher, EnrichmentReport
from lorehouse.stages.progress import ProgressCallback
from lorehouse.stores.duckdb_store import DuckDBStore


def run_enrichment(
    store: DuckDBStore, enricher: Enricher, on_progress: ProgressCallback | None = None
) -> EnrichmentReport:
    """Enriches every current chunk and document from the store and writes the results."""
    documents = [
        DocumentInput(
            doc_id=doc_id,
            rel_path=rel_path,
            title=title,
            chunks=[
                ChunkInput(
                    chunk_id=row["chunk_id"],
                    doc_id=doc_id,
                    breadcrumb=BREADCRUMB_SEPARATOR.join(row["heading_path"]),
                    text_chat=row["text_chat"],
                    text_embed=row["text_embed"],
                    is_table=bool(row["is_table"]),
                )
                for row in rows
            ],
        )
        for doc_id, rel_path, title, rows in store.chunks_by_document()
    ]
    result = enricher.enrich(
        documents, store.cached_enrichments, store.add_enrichment_cache, on_progress=on_progress
    )
    # The cache already holds every new answer; this swaps in the enriched tables at once.
    store.write_enrichment(result.chunk_rows, result.document_rows)
    return result.report
