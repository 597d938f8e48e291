"""The enrichment stage: summaries, keywords and FAQs for every current chunk and document.

What an enrichment is (LLM or extractive, cached by text, prompt and model) lives in
`lorehouse.enrichment`; this runner feeds it the store's chunks a batch of documents at a
time and writes each batch's results, so a run's memory depends on the batch, not on the
corpus.
"""

from __future__ import annotations

import hashlib
import time

from lorehouse.enrichment import ChunkInput, DocumentInput, Enricher, EnrichmentReport
from lorehouse.stages.progress import ProgressCallback
from lorehouse.stores.duckdb_store import DuckDBStore
from lorehouse.text import BREADCRUMB_SEPARATOR

#: Report fields that add up across batches.
_COUNTS = ("chunks", "documents", "cache_hits", "computed", "llm_calls", "tokens_in", "tokens_out")


def run_enrichment(
    store: DuckDBStore,
    enricher: Enricher,
    on_progress: ProgressCallback | None = None,
    batch_documents: int = 500,
) -> EnrichmentReport:
    """Enriches the chunks and documents whose enrichment is not current,
    `batch_documents` documents at a time.

    A document enriched from the chunks it has now by the same enricher is left as it is
    (counted in `documents_up_to_date`); one whose chunks changed, or whose enrichment failed,
    is enriched again. Each batch is read, enriched (cached answers are reused, new ones
    cached as they come) and written in one transaction per batch, with the fingerprint of
    what it was enriched from; then the enrichment of documents that lost their chunks is
    dropped.
    """
    started = time.perf_counter()
    report = EnrichmentReport(mode=enricher.mode, model=enricher.model)
    doc_ids, report.documents_up_to_date = store.documents_to_enrich(enricher.version)
    for start in range(0, len(doc_ids), batch_documents):
        batch = doc_ids[start : start + batch_documents]
        done_before = report.computed  # progress counts answers computed, batch after batch

        def progress(done: int, total: int, before: int = done_before) -> None:
            if on_progress is not None:
                on_progress(before + done, before + total)

        documents = _documents(store, batch)
        result = enricher.enrich(
            documents, store.cached_enrichments, store.add_enrichment_cache, on_progress=progress
        )
        fingerprints = {
            document.doc_id: enrichment_fingerprint(enricher.version, document)
            for document in documents
        }
        for row in result.document_rows:
            row["input_fingerprint"] = fingerprints[row["doc_id"]]
        store.replace_enrichment(batch, result.chunk_rows, result.document_rows)
        _add(report, result.report)
    store.drop_enrichment_of_unchunked()
    report.seconds = time.perf_counter() - started
    return report


def enrichment_fingerprint(enricher_version: str, document: DocumentInput) -> str:
    """What a document's enrichment was made from: the enricher, the title and the chunks (a
    chunk id hashes the chunk's text and position). `DuckDBStore.documents_to_enrich`
    computes the same in SQL to find the documents whose enrichment is not current."""
    chunk_ids = ",".join(chunk.chunk_id for chunk in document.chunks)
    text = f"{enricher_version}|{document.title or ''}|{chunk_ids}"
    return hashlib.md5(text.encode(), usedforsecurity=False).hexdigest()


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


def combined_reports(enricher: Enricher, reports: list[EnrichmentReport]) -> EnrichmentReport:
    """Several runs' reports (one per partition, maybe none) as one."""
    total = EnrichmentReport(mode=enricher.mode, model=enricher.model)
    for report in reports:
        _add(total, report)
        total.documents_up_to_date += report.documents_up_to_date
        total.seconds += report.seconds
    return total


def _add(total: EnrichmentReport, batch: EnrichmentReport) -> None:
    for name in _COUNTS:
        setattr(total, name, getattr(total, name) + getattr(batch, name))
    total.cost_usd += batch.cost_usd
    total.failures.extend(batch.failures)
