"""A partition's rows into the shared stores searches read, as the last step of its run
(published_partition)."""

import dagster as dg

from assets._metadata import markdown_table
from assets.embeddings import chunk_embeddings
from assets.partitioning import INDEX_PARTITIONS, PARTITION_BACKFILL, checked_keys
from assets.policies import SHARED_STORES_POOL
from assets.resources import FeatureStoreResource, VectorIndexResource
from lorehouse.stages.publish import run_publish
from lorehouse.stores.partition_lease import writing_shared_stores


@dg.asset(
    group_name="index",
    kinds={"duckdb", "lancedb"},
    deps=[chunk_embeddings],
    partitions_def=INDEX_PARTITIONS,
    backfill_policy=PARTITION_BACKFILL,
    pool=SHARED_STORES_POOL,
)
def published_partition(
    context: dg.AssetExecutionContext,
    feature_store: FeatureStoreResource,
    vector_index: VectorIndexResource,
) -> dg.MaterializeResult:
    """The partition's stage tables and search rows merged into the shared stores and
    published, so its documents are searchable when its run ends, without waiting for any
    other partition or for a merge of the whole corpus. Its cost follows the partition's
    changes. A new model or layout is the exception: searches keep the current index until
    every partition holds it, and search_index then replaces the shared tables."""
    layout = feature_store.layout()
    keys = checked_keys(context, layout.keys)
    # The pool queues the writers of an instance with storage; the lease holds any two apart.
    with writing_shared_stores(layout.root, context.run_id, context.log.info):
        report = run_publish(
            feature_store.open(),
            vector_index.open(),
            {key: feature_store.open_partition_index(key) for key in keys},
            layout,
        )
    if report.waiting:
        context.log.warning(report.waiting)
    behind = sorted(set(report.merge.behind) | set(report.index.behind))
    return dg.MaterializeResult(
        metadata={
            "published": report.published,
            "waiting_for": report.waiting or "nothing",
            # Not done with the current inventory: search keeps what was last taken of them.
            "partitions_behind": dg.MetadataValue.json(behind),
            "stage_rows_copied": sum(report.merge.rows_by_table.values()),
            "search_rows_copied": dg.MetadataValue.md(
                markdown_table(["table", "rows"], sorted(report.index.copied.items()))
            ),
            "search_rows_deleted": sum(report.index.deleted.values()),
            # Rows of other partitions whose documents left the inventory or changed access.
            "documents_withheld": report.merge.withheld,
            "documents_rewritten": report.features.get("documents_documents_rewritten", 0),
            "published_versions": dg.MetadataValue.json(report.index.published),
            "seconds": round(report.seconds, 2),
        }
    )
