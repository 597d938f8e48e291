"""The source change sensor: a reindex run whenever files are added, changed or removed."""

from __future__ import annotations

import dagster as dg

from lorehouse.settings import Settings
from lorehouse.sources.manifest import Manifest, take_manifest
from pipelines.jobs import INDEX_JOB, TRIGGER_TAG
from pipelines.resources import DocumentSourceResource


def source_change_sensor(settings: Settings) -> dg.SensorDefinition:
    """The sensor, polling as often as LOREHOUSE_SOURCE_POLL_SECONDS says; stopped until
    turned on in the UI (listing a large bucket has a cost)."""
    return dg.sensor(
        name="source_change_sensor",
        job_name=INDEX_JOB,
        minimum_interval_seconds=settings.source_poll_seconds,
        default_status=dg.DefaultSensorStatus.STOPPED,
        description="Lists the source; requests index_job when a file is added, changed or "
        "removed.",
    )(evaluate_source_change)


def evaluate_source_change(
    context: dg.SensorEvaluationContext, document_source: DocumentSourceResource
) -> dg.SensorResult | dg.SkipReason:
    """Cursor: the last manifest (path -> size, ETag or mtime, digest), compressed.

    The run key is the new manifest's fingerprint, so one state of the source is indexed
    once even if the sensor sees it twice before the cursor is saved.
    """
    previous = Manifest.decode(context.cursor)
    current, changes = take_manifest(document_source.open(), previous)
    cursor = current.encode()
    if not changes:
        if cursor != context.cursor:
            context.update_cursor(cursor)  # keeps refreshed change tokens of touched files
        return dg.SkipReason(
            f"no file added, changed or removed ({len(current.files)} files, "
            f"{changes.files_hashed} hashed)"
        )
    context.log.info(f"source changed: {changes.describe()}")
    return dg.SensorResult(
        run_requests=[
            dg.RunRequest(
                run_key=current.fingerprint(),
                tags={
                    TRIGGER_TAG: "source_change",
                    "lorehouse/added": str(len(changes.added)),
                    "lorehouse/changed": str(len(changes.changed)),
                    "lorehouse/removed": str(len(changes.removed)),
                },
            )
        ],
        cursor=cursor,
    )
