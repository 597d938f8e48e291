"""Is the index current? Stage freshness, the source against the index, failed documents.

Three signals a data engineer looks for in the Dagster UI after a night they were not watching:
a stage that has not succeeded for longer than the reindex interval allows (the nightly run
failed or never ran: `INDEX_FRESHNESS`, a freshness policy on every indexing asset), files in
the source the index has not caught up with, and documents that failed and will stay
unsearchable until someone looks at them.
"""

from __future__ import annotations

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc

from assets._metadata import markdown_table
from assets.documents import MERGED_PARTITIONS
from assets.embeddings import search_index
from lorehouse.inventory import LISTING_SCHEMA, Listing, listing_batches
from pipelines.resources import DocumentSourceResource, FeatureStoreResource


@dg.asset_check(asset=search_index)
def index_matches_source(
    document_source: DocumentSourceResource, feature_store: FeatureStoreResource
) -> dg.AssetCheckResult:
    """Every file in the source is indexed as it is now: none added, changed or removed since.

    Compares a listing (paths, sizes, modification times; no file is read) with the last
    inventory, so it is cheap enough to run between reindexes; a failure means search
    answers from an older state of the source until the next run.
    """
    # The inventory's own listing and its test for a file it need not read again (size and
    # modification time, `_UNCHANGED` in the store): Arrow batches, about 100 bytes a file.
    batches = list(listing_batches(document_source.open(), Listing()))
    whole = pa.concat_tables(batches) if batches else LISTING_SCHEMA.empty_table()
    listing = whole.filter(~pc.field("sidecar"))
    del batches, whole
    counts, rows = feature_store.open().inventory_differences(listing, shown=50)
    return dg.AssetCheckResult(
        passed=not any(counts.values()),
        severity=dg.AssetCheckSeverity.WARN,
        metadata={
            **counts,
            "not_yet_indexed": dg.MetadataValue.md(
                markdown_table(["file", "state"], [list(row) for row in rows])
            ),
        },
    )


@dg.asset_check(asset=MERGED_PARTITIONS)
def no_failed_documents(feature_store: FeatureStoreResource) -> dg.AssetCheckResult:
    """Warns while any document is unsearchable because a stage failed on it, listing why."""
    store = feature_store.open()
    failed_count = store.status_totals()["failed"]
    failed = store.document_statuses(status="failed", limit=50)
    return dg.AssetCheckResult(
        passed=failed_count == 0,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={
            "failed_documents": failed_count,
            "failures": dg.MetadataValue.md(
                markdown_table(
                    ["file", "reason", "detail"],
                    [[s.rel_path, s.reason, (s.detail or "")[:160]] for s in failed],
                )
            ),
        },
    )
