"""The inventory stage: list the source, record what is there, drop what disappeared.

Only changed files are hashed (size and modification time decide; an S3 object's
LastModified is set by every upload), so an unchanged corpus costs a listing. The listing
and the new inventory are staged in the store batch by batch and swapped in at the end, so
a run holds a batch in memory whatever the corpus size, and a run that fails half way
leaves the last inventory as it was.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

from lorehouse.inventory import (
    AccessRules,
    InventoryTally,
    Listing,
    describe_batch,
    listing_batches,
)
from lorehouse.sources.base import DocumentSource
from lorehouse.sources.composite import connected_sources
from lorehouse.sources.connectors import SourceSync
from lorehouse.stages.progress import ProgressCallback
from lorehouse.stores.duckdb_store import DuckDBStore
from lorehouse.stores.partitions import PartitionLayout, publish_inventory_slices


@dataclass
class InventoryReport:
    """What changed in the source since the last inventory (counts of documents)."""

    documents: int
    added: int
    changed: int
    removed: int
    by_type: Counter[str]
    restricted: int
    hashed: int
    reused: int
    seconds: float
    warnings: list[str] = field(default_factory=list)
    #: Partitions whose documents changed (their inventory slice was written again).
    partitions_changed: list[str] = field(default_factory=list)
    #: Each connected service's sync, by source name (its kind when it is the only source).
    syncs: dict[str, SourceSync] = field(default_factory=dict)


def run_inventory(
    source: DocumentSource,
    store: DuckDBStore,
    max_file_bytes: int,
    on_progress: ProgressCallback | None = None,
    batch_documents: int = 5_000,
    listing_rows: int = 50_000,
    layout: PartitionLayout | None = None,
) -> InventoryReport:
    """Lists the source, records it in documents_raw and drops documents that disappeared.

    `listing_rows` files are staged at a time and `batch_documents` documents described at a
    time: the two batch sizes bound what the run holds. With a `layout`, each partition
    whose documents changed gets its share of the new inventory as a slice to adopt.
    """
    started = time.perf_counter()
    listing = Listing()
    tally = InventoryTally()
    with store.inventory_staging() as staging:
        for batch in listing_batches(source, listing, listing_rows):
            staging.add_listing(batch)
        total = staging.make_plan()
        if total != listing.documents:
            raise RuntimeError(f"the plan holds {total} of {listing.documents} listed documents")
        acls = AccessRules(source, listing.folder_rules, tally.warnings)
        for planned in staging.plan_batches(batch_documents):
            described = describe_batch(
                source, planned, acls, max_file_bytes, tally, on_progress, total
            )
            staging.add_documents(described)
        removed = staging.commit(tally.documents)
    changed = publish_inventory_slices(store, layout) if layout is not None else []
    return InventoryReport(
        documents=tally.documents,
        added=tally.added,
        changed=tally.changed,
        removed=removed,
        by_type=tally.by_type,
        restricted=tally.restricted,
        hashed=tally.hashed,
        reused=tally.reused,
        seconds=time.perf_counter() - started,
        warnings=tally.warnings,
        partitions_changed=changed,
        syncs={
            name: connected.last_sync
            for name, connected in connected_sources(source).items()
            if connected.last_sync is not None
        },
    )
