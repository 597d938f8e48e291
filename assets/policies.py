"""Expectations every indexing asset shares, declared once and applied when the Definitions
are built (so the settings they read are those of the deployment being loaded)."""

from __future__ import annotations

from datetime import timedelta

import dagster as dg

from lorehouse.settings import Settings


def index_freshness(settings: Settings) -> dg.FreshnessPolicy:
    """A stage not materialized within this window shows as stale in the Dagster UI: the
    nightly reindex failed or did not run. Evaluated by Dagster's freshness daemon."""
    return dg.FreshnessPolicy.time_window(fail_window=timedelta(hours=settings.index_max_age_hours))


#: For assets that call an LLM: the step retried twice, 30 s then 90 s later (Dagster's
#: exponential backoff waits (2^n - 1) x 30 s), when a provider outage outlasts the client's
#: own retries.
LLM_RETRY_POLICY = dg.RetryPolicy(max_retries=2, delay=30, backoff=dg.Backoff.EXPONENTIAL)

#: The Dagster pool of every step that writes the shared stores (the inventory, a partition
#: publishing its rows, the merges of every partition). pipelines/dagster.yaml gives pools
#: one slot, so those steps run one at a time across every run, whoever launched it (a step
#: run in process claims its slot too), and queue rather than contend for the DuckDB file or
#: publish the index's versions over each other.
SHARED_STORES_POOL = "lorehouse_shared_stores"
