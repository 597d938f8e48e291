"""The inventory stage: list the source, record what is there, drop what disappeared.

Only changed files are hashed (size and modification time decide; an S3 object's
LastModified is set by every upload), so an unchanged corpus costs a listing.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

from lorehouse.inventory import take_inventory
from lorehouse.sources.base import DocumentSource
from lorehouse.stages.progress import ProgressCallback
from lorehouse.stores.duckdb_store import DuckDBStore


@dataclass
class InventoryReport:
    """What changed in the source since the last inventory."""

    documents: int
    added: list[str]
    changed: list[str]
    removed: list[str]
    by_type: Counter[str]
    restricted: int
    hashed: int
    seconds: float
    warnings: list[str] = field(default_factory=list)


def run_inventory(
    source: DocumentSource,
    store: DuckDBStore,
    max_file_bytes: int,
    on_progress: ProgressCallback | None = None,
) -> InventoryReport:
    """Lists the source, records it in documents_raw and drops documents that disappeared."""
    started = time.perf_counter()
    previous = store.raw_documents()
    inventory = take_inventory(source, previous, max_file_bytes, on_progress)
    removed = store.replace_inventory(inventory.documents)
    added = [d.doc_id for d in inventory.documents if d.doc_id not in previous]
    changed = [
        d.doc_id
        for d in inventory.documents
        if d.doc_id in previous and previous[d.doc_id].content_sha256 != d.content_sha256
    ]
    return InventoryReport(
        documents=len(inventory.documents),
        added=added,
        changed=changed,
        removed=removed,
        by_type=Counter(d.file_type.value for d in inventory.documents),
        restricted=sum(1 for d in inventory.documents if d.acl_groups),
        hashed=inventory.hashed,
        seconds=time.perf_counter() - started,
        warnings=inventory.warnings,
    )
