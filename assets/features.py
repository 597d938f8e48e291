"""Enriched chunks and the document list: the feature tables the query layer reads."""

import dagster as dg

from assets._metadata import markdown_table
from assets.checks import asset_check
from assets.chunks import chunks
from assets.documents import MERGED_PARTITIONS, parsed_documents, raw_documents, schema_check
from assets.partitioning import INDEX_PARTITIONS, PARTITION_BACKFILL, partition_stores
from assets.policies import LLM_RETRY_POLICY, SHARED_STORES_POOL
from assets.resources import EnrichmentResource, FeatureStoreResource
from lorehouse.schemas import (
    CHUNK_FAQS_SCHEMA,
    CHUNK_KEYWORDS_SCHEMA,
    DOCUMENTS_SCHEMA,
    ENRICHED_CHUNKS_SCHEMA,
)
from lorehouse.stages.enrich import combined_reports, run_enrichment
from lorehouse.stages.features import (
    UNNAMED_LANGUAGE_SHARE,
    corpus_languages,
    run_document_features,
)
from lorehouse.stages.partition_merge import run_merge
from lorehouse.stores.partition_lease import writing_shared_stores


@dg.asset(
    group_name="features",
    kinds={"duckdb"},
    deps=[chunks],
    partitions_def=INDEX_PARTITIONS,
    backfill_policy=PARTITION_BACKFILL,
    # A provider outage or rate limit can outlast one run's retries: try the step again later.
    retry_policy=LLM_RETRY_POLICY,
)
def enriched_chunks(
    context: dg.AssetExecutionContext,
    feature_store: FeatureStoreResource,
    enrichment: EnrichmentResource,
) -> dg.MaterializeResult:
    """FAQs, keywords and table summaries per chunk and a summary per document (cached)."""
    reports = []
    rows = 0
    enricher = enrichment.enricher()
    for _, store, progress in partition_stores(context, feature_store, "enriched"):
        reports.append(
            run_enrichment(
                store,
                enricher,
                on_progress=progress,
                batch_documents=enrichment.index_batch_documents,
            )
        )
        rows += store.row_count("enriched_chunks")
    report = combined_reports(enricher, reports)
    for item_id, error in report.failures[:20]:
        context.log.warning(f"enrichment failed for {item_id}: {error}")
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": rows,
            "enrichment_mode": report.mode,
            "model": report.model,
            "chunks": report.chunks,
            "documents": report.documents,
            "documents_up_to_date": report.documents_up_to_date,
            "cache_hits": report.cache_hits,
            "computed": report.computed,
            "llm_calls": report.llm_calls,
            "failures": len(report.failures),
            "tokens_in": report.tokens_in,
            "tokens_out": report.tokens_out,
            "cost_usd": round(report.cost_usd, 6),
            "seconds": round(report.seconds, 2),
            "failed_items": dg.MetadataValue.md(
                markdown_table(
                    ["chunk or document", "error"], [[i, e[:160]] for i, e in report.failures[:30]]
                )
            ),
        }
    )


@dg.asset(
    name=MERGED_PARTITIONS,
    group_name="features",
    kinds={"duckdb"},
    # It copies the stages' tables for the documents the inventory lists, so it follows
    # whichever of them a run selects; after chunk_embeddings too, which writes each
    # partition's file (its document list) while a merge would read it.
    deps=[raw_documents, parsed_documents, chunks, enriched_chunks, "published_partition"],
    pool=SHARED_STORES_POOL,
)
def merged_partitions(
    context: dg.AssetExecutionContext, feature_store: FeatureStoreResource
) -> dg.MaterializeResult:
    """The partitions' stage tables in the shared store, where the feature tables, the search
    index and the API read them: only partitions that changed since their last merge are
    copied, once their run has adopted the current inventory. A partition whose run has not
    (queued, running or failed) keeps what the last merge took, less its documents the
    inventory removed or moved to another access list, and delays no other."""
    store = feature_store.open()
    layout = feature_store.layout()
    with writing_shared_stores(layout.root, context.run_id, context.log.info):
        report = run_merge(store, layout)
    context.log.info(f"merged {len(report.merged)} partitions, {len(report.unchanged)} unchanged")
    if report.behind:
        context.log.warning(
            f"partitions {', '.join(report.behind)} are not done with the current inventory: "
            "search keeps what the last merge took of them until their runs finish"
        )
    return dg.MaterializeResult(
        metadata={
            "partitions_merged": len(report.merged),
            "partitions_unchanged": len(report.unchanged),
            "merged": dg.MetadataValue.json(report.merged),
            "partitions_behind": dg.MetadataValue.json(report.behind),
            "documents_withheld": report.withheld,
            # Files of an earlier bucket count, never read again once the current ones merged.
            "stale_partitions_removed": dg.MetadataValue.json(report.removed),
            "rows_copied": dg.MetadataValue.md(
                markdown_table(["table", "rows"], sorted(report.rows_by_table.items()))
            ),
            "seconds": round(report.seconds, 2),
            "dagster/row_count": store.row_count("documents_parsed"),
        }
    )


@dg.asset(
    group_name="features",
    kinds={"duckdb"},
    deps=[merged_partitions],
    pool=SHARED_STORES_POOL,
)
def document_features(feature_store: FeatureStoreResource) -> dg.MaterializeResult:
    """The document list (title, summary, size, ACL) plus FAQ and keyword tables."""
    store = feature_store.open()
    counts = run_document_features(store)
    preview = store.table("documents", limit=20)
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": counts["documents"],
            "faqs": counts["chunk_faqs"],
            "keywords": counts["chunk_keywords"],
            # A nightly run over a corpus that barely changed rewrites almost nothing.
            "documents_rewritten": counts["documents_documents_rewritten"],
            "faq_documents_rewritten": counts["chunk_faqs_documents_rewritten"],
            "keyword_documents_rewritten": counts["chunk_keywords_documents_rewritten"],
            **{f"documents_{code}": n for code, n in store.documents_by_language().items()},
            "documents_preview": dg.MetadataValue.md(
                markdown_table(
                    ["title", "language", "chunks", "pages", "summary"],
                    [
                        [
                            row.title,
                            row.language or "",
                            row.n_chunks,
                            row.n_pages,
                            (row.summary or "")[:120],
                        ]
                        for row in preview.itertuples()
                    ],
                )
            ),
        }
    )


@asset_check(asset=document_features)
def documents_in_named_languages(feature_store: FeatureStoreResource) -> dg.AssetCheckResult:
    """A sample of the documents is in the languages LOREHOUSE_LANGUAGES names: a corpus in
    another is stemmed, told and embedded as the wrong language, and finds little."""
    named = feature_store.wiring().settings.language_codes
    found = corpus_languages(feature_store.open(), named)
    share = found.unnamed_share
    advice = ""
    if share > UNNAMED_LANGUAGE_SHARE:
        seen = list(found.by_language)
        advice = (
            f"{share:.0%} of the sampled documents are in languages LOREHOUSE_LANGUAGES does "
            f'not name; set LOREHOUSE_LANGUAGES="{" ".join(seen)}" (the most common first) '
            "and materialize again"
        )
    return dg.AssetCheckResult(
        passed=share <= UNNAMED_LANGUAGE_SHARE,
        severity=dg.AssetCheckSeverity.WARN,
        description=advice or None,
        metadata={
            "documents_sampled": found.sampled,
            "unnamed_share": round(share, 3),
            "languages": dg.MetadataValue.json(found.by_language),
            "unnamed_examples": dg.MetadataValue.json(found.unnamed_examples),
        },
    )


@asset_check(asset=MERGED_PARTITIONS)
def enriched_chunks_contract(feature_store: FeatureStoreResource) -> dg.AssetCheckResult:
    """Every chunk has one enrichment row: enriched with keywords, or failed with a reason."""
    return schema_check("enriched_chunks", ENRICHED_CHUNKS_SCHEMA, feature_store)


@asset_check(asset=document_features, blocking=True)
def documents_contract(feature_store: FeatureStoreResource) -> dg.AssetCheckResult:
    """documents: one row per parsed document with a title, chunk and page counts."""
    return schema_check("documents", DOCUMENTS_SCHEMA, feature_store)


@asset_check(asset=document_features)
def chunk_faqs_contract(feature_store: FeatureStoreResource) -> dg.AssetCheckResult:
    """chunk_faqs: real questions attached to chunks."""
    return schema_check("chunk_faqs", CHUNK_FAQS_SCHEMA, feature_store)


@asset_check(asset=document_features)
def chunk_keywords_contract(feature_store: FeatureStoreResource) -> dg.AssetCheckResult:
    """chunk_keywords: non-empty keywords attached to chunks."""
    return schema_check("chunk_keywords", CHUNK_KEYWORDS_SCHEMA, feature_store)
