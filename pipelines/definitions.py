"""The Lorehouse code location: every asset, check, job, schedule and resource."""

import dagster as dg

from assets import chunks, documents, embeddings, evals, features, freshness
from lorehouse.settings import Settings, get_settings
from pipelines.jobs import index_job, nightly_reindex_schedule
from pipelines.resources import build_resources
from pipelines.sensors import source_change_sensor


def _ingest_definitions() -> dg.Definitions:
    return dg.Definitions(
        assets=dg.load_assets_from_modules([documents, chunks, features, embeddings, evals]),
        asset_checks=dg.load_asset_checks_from_modules(
            [documents, chunks, features, embeddings, evals, freshness]
        ),
    )


def _automation_definitions() -> dg.Definitions:
    return dg.Definitions(
        jobs=[index_job],
        schedules=[nightly_reindex_schedule],
        sensors=[source_change_sensor],
    )


def _executor(settings: Settings) -> dg.ExecutorDefinition:
    """In-process by default: stages run one after another and parsing has its own process
    pool, so one process loses nothing and keeps steps from queueing on the DuckDB file lock.
    Multiprocess runs each step (and check) in its own process, as a cluster executor would."""
    if settings.dagster_executor == "multiprocess":
        return dg.multiprocess_executor.configured({"max_concurrent": settings.workers})
    return dg.in_process_executor


# Per-area definitions are built in functions: Dagster loads a module only when exactly one
# Definitions object sits at its top level.
defs = dg.Definitions.merge(
    _ingest_definitions(),
    _automation_definitions(),
    dg.Definitions(resources=build_resources(get_settings()), executor=_executor(get_settings())),
)
