"""The enrichment stage: summaries, keywords and FAQs for every current chunk and document.

What an enrichment is (LLM or extractive, cached by text, prompt and model) lives in
`lorehouse.enrichment`; this runner feeds it the store's chunks a batch of documents at a
time and writes each batch's results, so a run's memory depends on the batch, not on the
corpus.
"""

from __future__ import annotations

import time

from lorehouse.chunking import BREADCRUMB_SEPARATOR
from lorehouse.enrichment import ChunkInput, DocumentInput, Enricher, EnrichmentReport
from lorehouse.stages.progress import ProgressCallback
from lorehouse.stores.duckdb_store import DuckDBStore

#: Report fields that add up across batches.
_COUNTS = ("chunks", "documents", "cache_hits", "computed", "llm_calls", "tokens_in", "tokens_out")


def run_enrichment(
    store: DuckDBStore,
    enricher: Enricher,
    on_progress: ProgressCallback | None = None,
    batch_documents: int = 500,
) -> EnrichmentReport:
    """Enriches every current chunk and document, `batch_documents` documents at a time.

    Each batch is read, enriched (cached answers are reused, new ones cached as they come)
    and written in one transaction per batch; then the enrichment of documents that lost
    their chunks is dropped.
    """
    started = time.perf_counter()
    report = EnrichmentReport(mode=enricher.mode, model=enricher.model)
    doc_ids = store.chunked_document_ids()
    for start in range(0, len(doc_ids), batch_documents):
        batch = doc_ids[start : start + batch_documents]
        done_before = report.computed  # progress counts answers computed, batch after batch

        def progress(done: int, total: int, before: int = done_before) -> None:
            if on_progress is not None:
                on_progress(before + done, before + total)

        result = enricher.enrich(
            _documents(store, batch),
            store.cached_enrichments,
            store.add_enrichment_cache,
            on_progress=progress,
        )
        store.replace_enrichment(batch, result.chunk_rows, result.document_rows)
        _add(report, result.report)
    store.drop_enrichment_of_unchunked()
    report.seconds = time.perf_counter() - started
    return report


def _documents(store: DuckDBStore, doc_ids: list[str]) -> list[DocumentInput]:
    return [
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
        for doc_id, rel_path, title, rows in store.chunks_by_document(doc_ids)
    ]


def _add(total: EnrichmentReport, batch: EnrichmentReport) -> None:
    for name in _COUNTS:
        setattr(total, name, getattr(total, name) + getattr(batch, name))
    total.cost_usd += batch.cost_usd
    total.failures.extend(batch.failures)
