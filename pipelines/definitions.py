"""The Lorehouse code location: every asset, check, job, schedule and resource."""

from __future__ import annotations

import dagster as dg

from assets import documents
from lorehouse.settings import get_settings
from pipelines.jobs import index_job, nightly_reindex_schedule
from pipelines.resources import build_resources

ingest_defs = dg.Definitions(
    assets=dg.load_assets_from_modules([documents]),
    asset_checks=dg.load_asset_checks_from_modules([documents]),
)

automation_defs = dg.Definitions(jobs=[index_job], schedules=[nightly_reindex_schedule])

defs = dg.Definitions.merge(
    ingest_defs,
    automation_defs,
    dg.Definitions(resources=build_resources(get_settings())),
)
