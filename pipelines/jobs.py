"""Jobs and schedules: the full index build, and its nightly run."""

from __future__ import annotations

import dagster as dg

from assets.partitioning import all_partitions_tags
from lorehouse.settings import Settings

#: Runs carrying this tag write the stores; pipelines/dagster.yaml lets one run at a time.
INDEX_WRITER_TAG = "lorehouse/writes"
#: What started a run: "cli" or "source_change" (the sensor); the schedule adds Dagster's own.
TRIGGER_TAG = "lorehouse/trigger"
INDEX_JOB = "index_job"


def index_job(partitions: int) -> dg.UnresolvedAssetJobDefinition:
    """Every stage over every partition, in one run.

    The partitions run one after another within it, each in its own store file; spreading
    them over processes or pods is a backfill of the partitioned assets from the UI (one run
    per partition, `PARTITION_BACKFILL`), followed by this job, which then finds every
    partition current and merges.
    """
    return dg.define_asset_job(
        name=INDEX_JOB,
        selection=dg.AssetSelection.all(),
        description="Materializes every stage of every partition; unchanged documents cost "
        "only a hash comparison.",
        # Limited to one run at a time by the instance's tag concurrency limit (dagster.yaml).
        tags={INDEX_WRITER_TAG: "index", **all_partitions_tags(partitions)},
    )


def nightly_reindex_schedule(settings: Settings) -> dg.ScheduleDefinition:
    """index_job on the deployment's cron (LOREHOUSE_REINDEX_CRON), running by default."""
    return dg.ScheduleDefinition(
        name="nightly_reindex_schedule",
        job_name=INDEX_JOB,
        cron_schedule=settings.reindex_cron,
        default_status=dg.DefaultScheduleStatus.RUNNING,
    )
