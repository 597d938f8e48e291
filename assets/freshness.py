"""Is the index current? Stage freshness, source syncs, the source against the index, failed
documents.

Four signals a data engineer looks for in the Dagster UI after a night they were not watching:
a stage that has not succeeded for longer than the reindex interval allows (the nightly run
failed or never ran: `INDEX_FRESHNESS`, a freshness policy on every indexing asset), a
connected service that has not answered its syncs, files in the source the index has not
caught up with, and documents that failed and will stay unsearchable until someone looks at
them.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc

from assets._metadata import markdown_table
from assets.checks import asset_check
from assets.documents import MERGED_PARTITIONS, raw_documents
from assets.embeddings import search_index
from assets.resources import DocumentSourceResource, FeatureStoreResource
from lorehouse.display import printable
from lorehouse.inventory import LISTING_SCHEMA, Listing, listing_batches
from lorehouse.sources.composite import connected_sources
from lorehouse.sources.connectors import ConnectorState


@asset_check(asset=search_index)
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


@asset_check(asset=raw_documents)
def sources_synced(document_source: DocumentSourceResource) -> dg.AssetCheckResult:
    """Every connected service answered its last sync, and recently enough.

    Each source keeps its own pace (`LOREHOUSE_SOURCE_SYNC_MINUTES`); one that cannot be
    reached keeps its last listing while the others go on, so a service down for a night
    fails nothing else. This check is where that shows: a warning while a source's last
    sync failed, an error once it has gone longer than the reindex interval
    (`LOREHOUSE_INDEX_MAX_AGE_HOURS`) plus its own pace without a sync, because a sharing
    change at the source (someone losing access) takes effect only at a sync. Reads the
    saved sync states only; nothing is asked of the services.
    """
    settings = document_source.wiring().settings
    now = datetime.now(UTC)
    rows: list[list[object]] = []
    stale: list[str] = []
    failing: list[str] = []
    ages: list[float] = []
    for name, source in sorted(connected_sources(document_source.open()).items()):
        state = ConnectorState.load(source.state_path)
        allowed = timedelta(hours=settings.index_max_age_hours) + (source.sync_every or timedelta())
        age = now - state.synced_at if state.synced_at else None
        if age is None or age > allowed:
            stale.append(name)
        if state.error:
            failing.append(name)
        if age is not None:
            ages.append(age.total_seconds() / 3600)
        rows.append(
            [
                name,
                source.connector.kind,
                state.synced_at.isoformat(timespec="seconds") if state.synced_at else "never",
                f"{allowed.total_seconds() / 3600:g} h",
                printable(state.error or ""),
            ]
        )
    return dg.AssetCheckResult(
        passed=not stale and not failing,
        severity=dg.AssetCheckSeverity.ERROR if stale else dg.AssetCheckSeverity.WARN,
        metadata={
            "connected_sources": len(rows),
            "stale_sources": len(stale),
            "failing_sources": len(failing),
            "hours_since_oldest_sync": round(max(ages, default=0.0), 2),
            "sources": dg.MetadataValue.md(
                markdown_table(["source", "kind", "last answered", "allowed age", "error"], rows)
            ),
        },
    )


@asset_check(asset=MERGED_PARTITIONS)
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
