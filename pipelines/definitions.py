"""The Lorehouse code location: every asset, check, job, schedule and resource."""

import dagster as dg

from assets import chunks, documents, embeddings, evals, features
from lorehouse.settings import get_settings
from pipelines.jobs import index_job, nightly_reindex_schedule
from pipelines.resources import build_resources
from pipelines.sensors import source_change_sensor


def _ingest_definitions() -> dg.Definitions:
    return dg.Definitions(
        assets=dg.load_assets_from_modules([documents, chunks, features, embeddings, evals]),
        asset_checks=dg.load_asset_checks_from_modules(
            [documents, chunks, features, embeddings, evals]
        ),
    )


def _automation_definitions() -> dg.Definitions:
    return dg.Definitions(
        jobs=[index_job], schedules=[nightly_reindex_schedule], sensors=[source_change_sensor]
    )


# Per-area definitions are built in functions: Dagster loads a module only when exactly one
# Definitions object sits at its top level.
defs = dg.Definitions.merge(
    _ingest_definitions(),
    _automation_definitions(),
    # Stages run one after another and parsing has its own process pool; running the steps
    # in one process also keeps them from contending for the DuckDB file lock.
    dg.Definitions(resources=build_resources(get_settings()), executor=dg.in_process_executor),
)
