"""An asset's checks run in one step, and each keeps its own result and blocking flag."""

import sys

import dagster as dg

from assets.checks import asset_check, checks_of
from pipelines.definitions import defs
from pipelines.jobs import INDEX_JOB


@dg.asset
def upstream() -> int:
    return 1


@dg.asset(deps=[upstream])
def downstream() -> int:
    return 2


class Threshold(dg.ConfigurableResource):
    rows: int


@asset_check(asset=upstream, blocking=True)
def upstream_has_rows(threshold: Threshold) -> dg.AssetCheckResult:
    """Fails while the threshold is above zero."""
    return dg.AssetCheckResult(passed=threshold.rows <= 0, metadata={"rows": threshold.rows})


@asset_check(asset=upstream)
def upstream_is_fresh() -> dg.AssetCheckResult:
    """Always passes: a non-blocking neighbour of the blocking check."""
    return dg.AssetCheckResult(passed=True)


def _run(rows: int, selection: list[dg.AssetCheckKey] | None = None) -> dg.ExecuteInProcessResult:
    module = sys.modules[__name__]
    definitions = dg.Definitions(
        assets=[upstream, downstream],
        asset_checks=checks_of([module]),
        resources={"threshold": Threshold(rows=rows)},
    )
    job = dg.define_asset_job(
        "checked",
        selection=dg.AssetSelection.all()
        if selection is None
        else dg.AssetSelection.checks(*selection),
    )
    return (
        dg.Definitions.merge(definitions, dg.Definitions(jobs=[job]))
        .resolve_job_def("checked")
        .execute_in_process(raise_on_error=False)
    )


def test_a_failed_blocking_check_stops_what_follows_and_its_neighbour_still_reports() -> None:
    result = _run(rows=3)
    evaluations = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert evaluations == {"upstream_has_rows": False, "upstream_is_fresh": True}
    materialized = {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}
    assert materialized == {"upstream"}

    passing = _run(rows=0)
    assert passing.success
    assert {e.asset_key.to_user_string() for e in passing.get_asset_materialization_events()} == {
        "upstream",
        "downstream",
    }


def test_one_check_runs_alone() -> None:
    result = _run(
        rows=0, selection=[dg.AssetCheckKey(dg.AssetKey("upstream"), "upstream_is_fresh")]
    )
    assert [e.check_name for e in result.get_asset_check_evaluations()] == ["upstream_is_fresh"]
    assert not result.get_asset_materialization_events()


def test_the_index_job_runs_each_assets_checks_in_one_step() -> None:
    """Under the multiprocess executor, or a pod per step, every step loads the code
    location: fifteen checks cost five steps, one per checked asset."""
    job = defs.resolve_job_def(INDEX_JOB)
    check_steps = [node.name for node in job.graph.nodes if node.name.endswith("_checks")]
    assert sorted(check_steps) == [
        "document_features_checks",
        "merged_partitions_checks",
        "raw_documents_checks",
        "retrieval_eval_checks",
        "search_index_checks",
    ]
    assert len(defs.resolve_asset_graph().asset_check_keys) == 15
