"""Expectations every indexing asset shares, declared once."""

from __future__ import annotations

from datetime import timedelta

import dagster as dg

from lorehouse.settings import get_settings

#: A stage not materialized within this window shows as stale in the Dagster UI: the nightly
#: reindex failed or did not run. Evaluated by Dagster's freshness daemon, no sensor needed.
INDEX_FRESHNESS = dg.FreshnessPolicy.time_window(
    fail_window=timedelta(hours=get_settings().index_max_age_hours)
)
