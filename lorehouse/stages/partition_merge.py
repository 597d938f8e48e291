"""The merge stage: the index partitions' stage tables into the shared store.

The per-document stages run per partition, each in a store file it owns
(`lorehouse.stores.partitions`); the feature tables, the search index and the API read one
shared store. This stage brings the partitions that changed into it, so a nightly run over a
corpus that barely changed copies one partition's rows or none.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from lorehouse.stores.duckdb_store import DuckDBStore
from lorehouse.stores.partitions import (
    MergeReport,
    PartitionLayout,
    merge_partitions,
    remove_stale_partitions,
)


def run_merge(
    shared: DuckDBStore, layout: PartitionLayout, keys: Sequence[str] | None = None
) -> MergeReport:
    """Merges every partition of `keys` (all by default) whose stage tables changed since its
    last merge, then, after a merge of all of them with every one current, removes the
    files an earlier bucket count left."""
    started = time.perf_counter()
    report = merge_partitions(shared, layout, keys)
    if keys is None and not report.behind:
        report.removed = remove_stale_partitions(layout)
    report.seconds = time.perf_counter() - started
    return report
