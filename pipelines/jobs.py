"""Jobs and schedules: the full index build, its steps as separate runs, and the nightly run.

Two ways to build the index, over the same assets:
- `index_job` runs every stage of every partition in one run: what `lorehouse materialize`
  and `make demo` launch, simplest on one machine.
- `inventory_job`, then one `partitions_job` run per changed partition, each publishing its
  own rows into the shared stores as its last step (`published_partition`), so they are
  searchable when it ends: what the nightly schedule and the change sensor launch
  (`changed_partitions_sensor` chains them). Only the partitions whose documents changed
  run, each as its own run, so the run queue spreads them over processes or pods and a
  failed one is retried alone. Where partition pods share no volume with the shared DuckDB
  file (`LOREHOUSE_PARTITIONS_URI`), a partition publishes in a `publish_job` run of its
  own, on the writer's pod. `merge_job` then checks and evaluates the whole index once the
  partitions launched are done; no partition waits for it.
"""

from __future__ import annotations

import json

import dagster as dg

from assets.partitioning import all_partitions_tags
from lorehouse.settings import Settings

#: What a run writes: "index" (the shared stores), "publish" (one partition into them) or
#: "partition" (one partition's own files, then its publish; pipelines/dagster.yaml caps how
#: many run side by side). The shared-store steps themselves queue in a Dagster pool.
INDEX_WRITER_TAG = "lorehouse/writes"
#: What started a run: "cli", "schedule", "source_change" or "changed_partitions".
TRIGGER_TAG = "lorehouse/trigger"
INDEX_JOB = "index_job"
INVENTORY_JOB = "inventory_job"
PARTITIONS_JOB = "partitions_job"
MERGE_JOB = "merge_job"
PUBLISH_JOB = "publish_job"
#: The inventory, unpartitioned: it lists the source and hands each partition its slice.
INVENTORY_ASSET = dg.AssetKey("raw_documents")
#: The per-document stages, partitioned by bucket, in the order they run, then the step that
#: publishes a partition's rows into the shared stores.
PARTITIONED_ASSETS = tuple(
    dg.AssetKey(name)
    for name in (
        "parsed_documents",
        "chunks",
        "enriched_chunks",
        "chunk_embeddings",
        "published_partition",
    )
)
#: The last stage that builds a partition's rows in its own files.
BUILT_ASSET = dg.AssetKey("chunk_embeddings")
#: The last partitioned step: a partition is done (searchable) when this asset's partition is.
LAST_PARTITIONED_ASSET = PARTITIONED_ASSETS[-1]
#: The tag Dagster's Kubernetes run launcher and executor read a run's pod config from.
K8S_CONFIG_TAG = "dagster-k8s/config"


def writer_tags(settings: Settings) -> dict[str, str]:
    """The tags of the runs that write the shared stores: the writer tag that tells them apart
    in the UI and the run queue, and the deployment's Kubernetes config for them (the volume that
    holds the shared DuckDB file), which partition runs keeping their files in a bucket do not
    get."""
    tags = {INDEX_WRITER_TAG: "index"}
    if settings.writer_run_k8s_config:
        tags[K8S_CONFIG_TAG] = json.dumps(settings.writer_run_k8s_config)
    return tags


def index_job(settings: Settings) -> dg.UnresolvedAssetJobDefinition:
    """Every stage over every partition, in one run.

    The partitions run one after another within it, each in its own store file. A partition
    whose documents did not change costs a hash comparison.
    """
    return dg.define_asset_job(
        name=INDEX_JOB,
        selection=dg.AssetSelection.all(),
        description="Materializes every stage of every partition; unchanged documents cost "
        "only a hash comparison.",
        # Its shared-store steps take the pool's one slot in turn with every other run's.
        tags={**writer_tags(settings), **all_partitions_tags(settings.index_partitions)},
    )


def inventory_job(settings: Settings) -> dg.UnresolvedAssetJobDefinition:
    """The inventory alone: its materialization names the partitions that changed."""
    return dg.define_asset_job(
        name=INVENTORY_JOB,
        selection=dg.AssetSelection.assets(INVENTORY_ASSET),
        description="Lists the source and publishes each changed partition's inventory "
        "slice; changed_partitions_sensor then runs those partitions and the merge.",
        tags=writer_tags(settings),
    )


def publishes_in_partition_runs(settings: Settings) -> bool:
    """Whether a partition's own run publishes its rows: only where its pod can reach the
    shared DuckDB file. With LOREHOUSE_PARTITIONS_URI, partition pods share no volume with
    it, and `publish_job` runs on the writer's pod instead."""
    return not settings.partitions_uri


def partitions_job(settings: Settings) -> dg.UnresolvedAssetJobDefinition:
    """The per-document stages of one partition (a run per partition key), then its publish
    where the run can reach the shared stores."""
    own = PARTITIONED_ASSETS if publishes_in_partition_runs(settings) else PARTITIONED_ASSETS[:-1]
    return dg.define_asset_job(
        name=PARTITIONS_JOB,
        selection=dg.AssetSelection.assets(*own),
        description="Parses, chunks, enriches and embeds one partition's new and changed "
        "documents in that partition's own files, then publishes them to search.",
        tags={INDEX_WRITER_TAG: "partition"},
    )


def publish_job(settings: Settings) -> dg.UnresolvedAssetJobDefinition:
    """One partition's publish alone, on the writer's pod: what changed_partitions_sensor
    runs after a partition run that could not reach the shared stores."""
    return dg.define_asset_job(
        name=PUBLISH_JOB,
        selection=dg.AssetSelection.assets(LAST_PARTITIONED_ASSET),
        description="Publishes one partition's rows into the shared stores search reads.",
        tags={**writer_tags(settings), INDEX_WRITER_TAG: "publish"},
    )


def merge_job(settings: Settings) -> dg.UnresolvedAssetJobDefinition:
    """Everything downstream of the partitions: the merges of every partition (what one
    partition cannot publish alone: a new model or layout, an earlier bucket count's files),
    the whole index's checks and the evals."""
    return dg.define_asset_job(
        name=MERGE_JOB,
        selection=dg.AssetSelection.all()
        - dg.AssetSelection.assets(INVENTORY_ASSET, *PARTITIONED_ASSETS),
        description="Merges whatever the partitions could not publish alone, checks the "
        "whole index and evaluates it.",
        tags=writer_tags(settings),
    )


def nightly_reindex_schedule(settings: Settings) -> dg.ScheduleDefinition:
    """inventory_job on the deployment's cron (LOREHOUSE_REINDEX_CRON), running by default;
    changed_partitions_sensor carries on from it."""
    return dg.ScheduleDefinition(
        name="nightly_reindex_schedule",
        job_name=INVENTORY_JOB,
        cron_schedule=settings.reindex_cron,
        default_status=dg.DefaultScheduleStatus.RUNNING,
        tags={TRIGGER_TAG: "schedule"},
    )
