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

from assets._metadata import markdown_table
from assets.documents import parsed_documents
from assets.embeddings import chunk_embeddings
from lorehouse.sources.base import is_sidecar
from pipelines.resources import DocumentSourceResource, FeatureStoreResource


@dg.asset_check(asset=chunk_embeddings)
def index_matches_source(
    document_source: DocumentSourceResource, feature_store: FeatureStoreResource
) -> dg.AssetCheckResult:
    """Every file in the source is indexed as it is now: none added, changed or removed since.

    Compares a listing (paths, sizes, modification times; no file is read) with the last
    inventory, so it is cheap enough to run between reindexes; a failure means search
    answers from an older state of the source until the next run.
    """
    files = [f for f in document_source.open().list_files() if not is_sidecar(f.rel_path)]
    # The same test as the inventory's `is_unchanged` (size and modification time), in SQL.
    listing = pa.table(
        {
            "rel_path": pa.array([f.rel_path for f in files], pa.string()),
            "size_bytes": pa.array([f.size_bytes for f in files], pa.int64()),
            "modified_at": pa.array([f.modified_at for f in files], pa.timestamp("us", "UTC")),
        }
    )
    del files
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


@dg.asset_check(asset=parsed_documents)
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
