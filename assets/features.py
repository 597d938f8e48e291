"""Enriched chunks and the document list: the feature tables the query layer reads."""

import dagster as dg
import pandera.pandas as pa

from assets._metadata import markdown_table, progress_logger
from assets.chunks import chunks
from assets.documents import schema_check
from lorehouse.stages.enrich import run_enrichment
from lorehouse.stages.features import run_document_features
from pipelines.resources import EnrichmentResource, FeatureStoreResource


@dg.asset(group_name="features", kinds={"duckdb"}, deps=[chunks])
def enriched_chunks(
    context: dg.AssetExecutionContext,
    feature_store: FeatureStoreResource,
    enrichment: EnrichmentResource,
) -> dg.MaterializeResult:
    """FAQs, keywords and table summaries per chunk and a summary per document (cached)."""
    store = feature_store.open()
    report = run_enrichment(
        store, enrichment.enricher(), on_progress=progress_logger(context, "enriched")
    )
    for item_id, error in report.failures[:20]:
        context.log.warning(f"enrichment failed for {item_id}: {error}")
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": store.row_count("enriched_chunks"),
            "enrichment_mode": report.mode,
            "model": report.model,
            "chunks": report.chunks,
            "documents": report.documents,
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
    group_name="features",
    kinds={"duckdb"},
    deps=[enriched_chunks],
)
def document_features(feature_store: FeatureStoreResource) -> dg.MaterializeResult:
    """The document list (title, summary, size, ACL) plus FAQ and keyword tables."""
    store = feature_store.open()
    counts = run_document_features(store)
    preview = store.table("documents").head(20)
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": counts["documents"],
            "faqs": counts["chunk_faqs"],
            "keywords": counts["chunk_keywords"],
            "documents_preview": dg.MetadataValue.md(
                markdown_table(
                    ["title", "chunks", "pages", "summary"],
                    [
                        [row.title, row.n_chunks, row.n_pages, (row.summary or "")[:120]]
                        for row in preview.itertuples()
                    ],
                )
            ),
        }
    )


_ENRICHED_CHUNKS = pa.DataFrameSchema(
    {
        "chunk_id": pa.Column(str, unique=True),
        "status": pa.Column(str, pa.Check.isin(["enriched", "failed"])),
        "enrichment_mode": pa.Column(str, pa.Check.isin(["llm", "extractive"])),
        "keywords": pa.Column(object),
    },
    checks=pa.Check(
        lambda f: (f["status"] == "failed") | (f["keywords"].map(len) > 0),
        error="an enriched chunk has no keywords",
    ),
    strict=False,
)
_DOCUMENTS = pa.DataFrameSchema(
    {
        "doc_id": pa.Column(str, unique=True),
        "title": pa.Column(str, pa.Check.str_length(min_value=1)),
        "n_chunks": pa.Column(int, pa.Check.ge(0), coerce=True),
        "n_pages": pa.Column(int, pa.Check.ge(1), coerce=True),
        "content_sha256": pa.Column(str, pa.Check.str_matches(r"^[0-9a-f]{64}$")),
    },
    strict=False,
)
_FAQS = pa.DataFrameSchema(
    {"chunk_id": pa.Column(str), "question": pa.Column(str, pa.Check.str_length(min_value=5))},
    strict=False,
)
_KEYWORDS = pa.DataFrameSchema(
    {"chunk_id": pa.Column(str), "keyword": pa.Column(str, pa.Check.str_length(min_value=1))},
    strict=False,
)


@dg.asset_check(asset=enriched_chunks)
def enriched_chunks_contract(feature_store: FeatureStoreResource) -> dg.AssetCheckResult:
    """Every chunk has one enrichment row: enriched with keywords, or failed with a reason."""
    return schema_check("enriched_chunks", _ENRICHED_CHUNKS, feature_store)


@dg.asset_check(asset=document_features, blocking=True)
def documents_contract(feature_store: FeatureStoreResource) -> dg.AssetCheckResult:
    """documents: one row per parsed document with a title, chunk and page counts."""
    return schema_check("documents", _DOCUMENTS, feature_store)


@dg.asset_check(asset=document_features)
def chunk_faqs_contract(feature_store: FeatureStoreResource) -> dg.AssetCheckResult:
    """chunk_faqs: real questions attached to chunks."""
    return schema_check("chunk_faqs", _FAQS, feature_store)


@dg.asset_check(asset=document_features)
def chunk_keywords_contract(feature_store: FeatureStoreResource) -> dg.AssetCheckResult:
    """chunk_keywords: non-empty keywords attached to chunks."""
    return schema_check("chunk_keywords", _KEYWORDS, feature_store)
