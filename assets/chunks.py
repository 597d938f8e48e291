"""The chunks asset: hierarchical, table-aware chunks of every parsed document."""

import statistics

import dagster as dg

from assets._metadata import markdown_table
from assets.checks import asset_check
from assets.documents import MERGED_PARTITIONS, parsed_documents, schema_check
from assets.partitioning import INDEX_PARTITIONS, PARTITION_BACKFILL, partition_stores
from assets.resources import ChunkingResource, FeatureStoreResource
from lorehouse.schemas import chunks_schema
from lorehouse.stages.chunk import ChunkReport, run_chunking


@dg.asset(
    group_name="features",
    kinds={"duckdb"},
    deps=[parsed_documents],
    partitions_def=INDEX_PARTITIONS,
    backfill_policy=PARTITION_BACKFILL,
)
def chunks(
    context: dg.AssetExecutionContext,
    feature_store: FeatureStoreResource,
    chunking: ChunkingResource,
) -> dg.MaterializeResult:
    """Section -> block -> sentence -> word chunks with heading paths, pages and two texts."""
    report = ChunkReport()
    rows = 0
    chunker = chunking.chunker()
    for _, store, progress in partition_stores(context, feature_store, "chunked"):
        report.absorb(run_chunking(store, chunker, on_progress=progress))
        rows += store.row_count("chunks")
    tokens = report.token_counts
    histogram = _token_histogram(tokens, chunking.chunk_max_tokens)
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": rows,
            "documents_chunked": report.documents_chunked,
            "documents_unchanged": report.documents_skipped,
            "documents_dropped": report.documents_dropped,
            "documents_relabeled": report.documents_relabeled,
            "chunks_written": report.chunks_written,
            "table_chunks_written": report.table_chunks_written,
            "median_tokens": statistics.median(tokens) if tokens else 0,
            "max_tokens_limit": chunking.chunk_max_tokens,
            "seconds": round(report.seconds, 2),
            "token_histogram": dg.MetadataValue.md(histogram),
        }
    )


def _token_histogram(tokens: list[int], limit: int, bins: int = 8) -> str:
    """Chunk sizes of this run as a Markdown bar chart: a pile-up at the limit means cutting."""
    if not tokens:
        return "no chunks written this run"
    width = max(1, -(-limit // bins))
    counts = [0] * bins
    for value in tokens:
        counts[min(bins - 1, (value - 1) // width)] += 1
    peak = max(counts)
    rows = [
        [f"{i * width + 1}-{min(limit, (i + 1) * width)}", n, "█" * round(30 * n / peak)]
        for i, n in enumerate(counts)
    ]
    return markdown_table(["tokens", "chunks", ""], rows)


@asset_check(asset=MERGED_PARTITIONS, blocking=True)
def chunks_contract(
    feature_store: FeatureStoreResource, chunking: ChunkingResource
) -> dg.AssetCheckResult:
    """No empty chunk, none over the token limit, positions 0..n-1 in every document."""
    return schema_check("chunks", chunks_schema(chunking.chunk_max_tokens), feature_store)
