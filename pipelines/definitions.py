"""The Lorehouse code location: every asset, check, job, schedule and resource.

Settings are read once, here, when the Definitions are built: the resources, the schedule's
cron, the sensor's interval, the indexing assets' freshness window and the stages' code
versions all come from them.
"""

import dagster as dg

from assets import chunks, documents, embeddings, evals, features, freshness, publish
from assets.checks import checks_of
from assets.partitioning import with_index_partitions
from assets.policies import index_freshness
from assets.resources import build_resources
from lorehouse.settings import Settings, get_settings
from lorehouse.wiring import Lorehouse
from pipelines.asset_attributes import code_versions, column_schemas, with_attributes
from pipelines.jobs import (
    index_job,
    inventory_job,
    merge_job,
    nightly_reindex_schedule,
    partitions_job,
    publish_job,
)
from pipelines.sensors import changed_partitions_sensor, source_change_sensor, upload_sensor

ASSET_MODULES = [documents, chunks, features, embeddings, publish, evals]
#: The evals are not held to the nightly freshness window; every indexing stage is.
NOT_INDEXING = "evals"


def _ingest_definitions(settings: Settings) -> dg.Definitions:
    freshness_policy = index_freshness(settings)
    lorehouse = Lorehouse(settings)
    versions = code_versions(lorehouse)
    schemas = column_schemas(lorehouse)

    def described(spec: dg.AssetSpec) -> dg.AssetSpec:
        spec = with_attributes(spec, versions, schemas)
        if spec.group_name == NOT_INDEXING:
            return spec
        return spec.replace_attributes(freshness_policy=freshness_policy)

    assets = dg.map_asset_specs(
        described,
        with_index_partitions(
            dg.load_assets_from_modules(ASSET_MODULES), settings.index_partitions
        ),
    )
    return dg.Definitions(
        assets=assets,
        asset_checks=checks_of([*ASSET_MODULES, freshness]),
    )


def _automation_definitions(settings: Settings) -> dg.Definitions:
    partitions, publish = partitions_job(settings), publish_job(settings)
    merge = merge_job(settings)
    lorehouse = Lorehouse(settings)
    return dg.Definitions(
        jobs=[index_job(settings), inventory_job(settings), partitions, publish, merge],
        schedules=[nightly_reindex_schedule(settings)],
        sensors=[
            source_change_sensor(settings),
            changed_partitions_sensor(settings, partitions, publish, merge),
            *(
                [upload_sensor(settings, lorehouse.upload_source)]
                if lorehouse.upload_folder() is not None
                else []
            ),
        ],
    )


def _executor(settings: Settings) -> dg.ExecutorDefinition:
    """In-process by default: stages run one after another and parsing has its own process
    pool, so one process loses nothing and keeps steps from queueing on the DuckDB file lock.
    Multiprocess runs each step (an asset, or one asset's checks) in its own process, as a
    cluster executor would. Its processes fork from a server that has imported the code
    location once, so a step starts without paying again for the imports, which take far
    longer than the fork."""
    if settings.dagster_executor == "multiprocess":
        return dg.multiprocess_executor.configured(
            {
                "max_concurrent": settings.workers,
                "start_method": {"forkserver": {"preload_modules": [__name__]}},
            }
        )
    return dg.in_process_executor


def build_definitions(settings: Settings) -> dg.Definitions:
    """The code location for a deployment described by `settings`."""
    return dg.Definitions.merge(
        _ingest_definitions(settings),
        _automation_definitions(settings),
        dg.Definitions(resources=build_resources(settings), executor=_executor(settings)),
    )


# Dagster loads a module only when exactly one Definitions object sits at its top level.
defs = build_definitions(get_settings())
