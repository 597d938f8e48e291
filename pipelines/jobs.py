"""Jobs and schedules: the full index build, and its nightly run."""

from __future__ import annotations

import dagster as dg

from lorehouse.settings import Settings

#: Runs carrying this tag write the stores; pipelines/dagster.yaml lets one run at a time.
INDEX_WRITER_TAG = "lorehouse/writes"
#: What started a run: "cli" or "source_change" (the sensor); the schedule adds Dagster's own.
TRIGGER_TAG = "lorehouse/trigger"

index_job = dg.define_asset_job(
    name="index_job",
    selection=dg.AssetSelection.all(),
    description="Materializes every stage; unchanged documents cost only a hash comparison.",
    # Limited to one run at a time by the instance's tag concurrency limit (dagster.yaml).
    tags={INDEX_WRITER_TAG: "index"},
)


def nightly_reindex_schedule(settings: Settings) -> dg.ScheduleDefinition:
    """index_job on the deployment's cron (LOREHOUSE_REINDEX_CRON), running by default."""
    return dg.ScheduleDefinition(
        name="nightly_reindex_schedule",
        job=index_job,
        cron_schedule=settings.reindex_cron,
        default_status=dg.DefaultScheduleStatus.RUNNING,
    )
