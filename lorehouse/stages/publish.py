"""The publish stage: a partition's run puts its own rows into the shared stores searches
read, as its last step, so they are searchable when the run ends.

Before, a partition's rows reached search through a separate run over the whole corpus (the
merge chain), started once the sensor saw the partition done. Here the partition's run does
the same merge for its own bucket alone: its stage tables into the shared DuckDB store
(`run_merge` for its key), the feature tables brought in line (whose cost follows the
documents rewritten), its search rows into the shared LanceDB tables (`run_index_merge` for
that partition), and one commit publishing the tables' versions. Nothing waits for another
partition, and what it costs follows the partition's changes.

The shared stores take one writer at a time: the publishing step is in a Dagster pool with
the other writers of the shared stores (`assets.policies.SHARED_STORES_POOL`), so a publish
queues behind another rather than contend for the DuckDB file, and the four tables'
versions are published together, each publish seeing the last one's commits.

What a partition cannot do alone stays with the merge of every partition (`search_index`,
`merged_partitions`): replacing the shared tables with a new model's or layout's rows (only
once every partition holds them), and removing an earlier bucket count's files.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from lorehouse.stages.features import run_document_features
from lorehouse.stages.index_merge import IndexMergeReport, run_index_merge
from lorehouse.stages.partition_merge import run_merge
from lorehouse.stores.duckdb_store import DuckDBStore
from lorehouse.stores.lance_index import ChunkIndex
from lorehouse.stores.partitions import MergeReport, PartitionLayout, PartitionsBehind


@dataclass
class PublishReport:
    """What a publish merged into each shared store, for asset metadata."""

    partitions: list[str] = field(default_factory=list)
    merge: MergeReport = field(default_factory=MergeReport)
    features: dict[str, int] = field(default_factory=dict)
    index: IndexMergeReport = field(default_factory=IndexMergeReport)
    #: Why the search rows were not published (a new model or layout waiting for every
    #: partition); empty when they were.
    waiting: str = ""
    seconds: float = 0.0

    @property
    def published(self) -> bool:
        """Whether searches now read these partitions' rows."""
        return not self.waiting and not (set(self.partitions) & set(self.index.behind))


def run_publish(
    store: DuckDBStore,
    index: ChunkIndex,
    partitions: Mapping[str, ChunkIndex],
    layout: PartitionLayout,
) -> PublishReport:
    """Merges `partitions` (the run's own, by key) into the shared `store` and `index` and
    publishes the index's versions. A partition whose vectors are not done (its embedding
    run failed before it recorded them) keeps what the last merge took of it, less its rows
    whose access list changed, as in the merge of every partition."""
    started = time.perf_counter()
    keys = sorted(partitions)
    report = PublishReport(partitions=keys)
    whole = set(keys) == set(layout.keys)
    report.merge = run_merge(store, layout, None if whole else keys)
    report.features = run_document_features(store)
    try:
        report.index = run_index_merge(store, index, partitions, layout, whole=whole)
    except PartitionsBehind as waiting:
        report.waiting = str(waiting)
    report.seconds = time.perf_counter() - started
    return report
