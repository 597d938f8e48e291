"""The index partitions as Dagster sees them: static hash buckets of the documents.

The per-document stages (parse, chunk, enrich) are partitioned by bucket
(`lorehouse.stores.partitions` says why buckets). A backfill launched in the UI runs one
bucket per run, so the run queue and the executor spread buckets over processes or pods,
and a failed bucket is retried alone. The index job, the schedule, the sensor and
`lorehouse materialize` run every bucket in one run, through the range tags below.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import ExitStack

import dagster as dg

from assets._metadata import PartitionProgress
from assets.resources import FeatureStoreResource
from lorehouse.settings import Settings
from lorehouse.stages.progress import ProgressCallback
from lorehouse.stores.duckdb_store import DuckDBStore
from lorehouse.stores.partition_lease import PartitionLease, PartitionLeaseHeld
from lorehouse.stores.partition_remote import (
    ConditionalWritesUnsupported,
    PartitionClaimedElsewhere,
)
from lorehouse.stores.partitions import partition_keys

#: The bucket count the asset modules are declared with; the code location replaces it with
#: the deployment's (`with_index_partitions`), read when the Definitions are built.
DEFAULT_PARTITIONS: int = Settings.model_fields["index_partitions"].default
#: A backfill from the UI runs each bucket as its own run.
PARTITION_BACKFILL = dg.BackfillPolicy.multi_run(1)


def index_partitions_def(partitions: int) -> dg.StaticPartitionsDefinition:
    return dg.StaticPartitionsDefinition(partition_keys(partitions))


INDEX_PARTITIONS = index_partitions_def(DEFAULT_PARTITIONS)


def all_partitions_tags(partitions: int) -> dict[str, str]:
    """Run tags that make one run cover every bucket, in order."""
    keys = partition_keys(partitions)
    return {
        "dagster/asset_partition_range_start": keys[0],
        "dagster/asset_partition_range_end": keys[-1],
    }


def with_index_partitions(
    definitions: Iterable[dg.AssetsDefinition], partitions: int
) -> Sequence[dg.AssetsDefinition]:
    """The assets with the deployment's bucket count on every partitioned one."""
    partitions_def = index_partitions_def(partitions)
    return dg.map_asset_specs(
        lambda spec: (
            spec.replace_attributes(partitions_def=partitions_def)
            if spec.partitions_def is not None
            else spec
        ),
        list(definitions),
    )


def checked_keys(context: dg.AssetExecutionContext, layout_keys: Sequence[str]) -> list[str]:
    """The buckets this run covers, each one the deployment has: a key from another bucket
    count would read and write another layout's files."""
    keys = list(context.partition_keys)
    unknown = [key for key in keys if key not in layout_keys]
    if unknown:
        raise dg.Failure(
            f"partitions {', '.join(unknown)} are not among the {len(layout_keys)} that "
            "LOREHOUSE_INDEX_PARTITIONS sets; materialize the current partitions"
        )
    return keys


def partition_stores(
    context: dg.AssetExecutionContext, feature_store: FeatureStoreResource, what: str
) -> Iterator[tuple[str, DuckDBStore, ProgressCallback]]:
    """(key, its store, its progress callback) for each partition of the run that has work,
    one at a time, under one progress display that ends when the last is done.

    The run holds each partition's lease (`lorehouse.stores.partition_lease`) from before it
    pulls the partition's file until it has pushed it: the run queue's one-run-per-partition limit
    covers only the runs it launches, not `lorehouse materialize` nor a range run over every
    partition, and a Dagster pool limits all partitions together, not each one. A partition
    another run holds fails this run at once, naming that run: every lease is taken before
    any file is pulled, so a refused run has changed nothing.
    """
    layout = feature_store.layout()
    run_keys = checked_keys(context, layout.keys)
    leases = {key: PartitionLease(layout.root, key, context.run_id) for key in run_keys}
    with ExitStack() as held:
        _take(leases, held)
        # Pods that share no volume keep the partitions' files in a bucket: this pod's copies
        # are brought up to it first, and each partition's is published when its work is
        # done, or as far as it got.
        layout.pull(run_keys, inventory=True)
        counts = layout.document_counts(run_keys)
        # A partition with no documents that never had a store has nothing to do or remove.
        keys = [key for key, n in counts.items() if n or layout.store_path(key).exists()]
        for key in set(run_keys) - set(keys):
            leases[key].release()
        progress = PartitionProgress(context, what, {key: counts[key] for key in keys})
        for key in keys:
            try:
                yield key, feature_store.open_partition(key), progress.partition(key)
            finally:
                try:
                    layout.push(key)
                except (PartitionClaimedElsewhere, ConditionalWritesUnsupported) as error:
                    raise dg.Failure(description=str(error)) from error
                finally:
                    leases[key].release()
        progress.finish()


def _take(leases: dict[str, PartitionLease], held: ExitStack) -> None:
    """Takes every lease, each given back when `held` closes; fails naming every partition
    another run holds, having kept none."""
    refused: list[str] = []
    for lease in leases.values():
        try:
            held.enter_context(lease)
        except PartitionLeaseHeld as error:
            refused.append(str(error))
    if refused:
        held.close()
        raise dg.Failure(description="\n".join(refused))
