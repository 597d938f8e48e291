"""answer_eval on the sample corpus: a judge model behind a real HTTP endpoint grades answers."""

from __future__ import annotations

import shutil
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest

from assets import evals
from evals.golden_files import load_golden
from evals.metrics import normalize
from lorehouse.settings import BUNDLED_SAMPLE_CORPUS, Settings
from lorehouse.stores.duckdb_store import DuckDBStore
from pipelines.resources import build_resources
from tests.dagster.conftest import metadata_of
from tests.provider_server import provider_server

GOLDEN = load_golden(Settings().eval_golden_set)


def _answer_eval(data_dir: Path, **settings: object) -> dg.ExecuteInProcessResult:
    config = Settings(source_uri=str(BUNDLED_SAMPLE_CORPUS), data_dir=data_dir, **settings)
    return dg.materialize(
        [evals.answer_eval],
        resources=build_resources(config),
        instance=dg.DagsterInstance.ephemeral(),
    )


@pytest.fixture
def stores(materialized_sample: Path, tmp_path: Path) -> Path:
    """A private copy of the materialized sample, so eval rows stay in this test."""
    return Path(shutil.copytree(materialized_sample, tmp_path / "data"))


def test_without_a_judge_the_answer_eval_says_skipped_and_is_not_materialized(
    stores: Path,
) -> None:
    result = _answer_eval(stores)
    assert result.success
    # A skipped eval is not a fresh one: no materialization, an observation saying why.
    assert result.asset_materializations_for_node("answer_eval") == []
    [observation] = result.asset_observations_for_node("answer_eval")
    meta = {key: value.value for key, value in observation.metadata.items()}
    assert meta["status"] == "skipped"
    assert "LOREHOUSE_JUDGE_MODEL" in meta["reason"]
    assert DuckDBStore(stores / "lorehouse.duckdb").table("eval_answers").empty


def test_the_judge_grades_every_case_with_the_retrieved_sources(
    stores: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "local-test")
    broken_case = GOLDEN[0]
    with provider_server() as server:
        server.judge_breaks_on = (broken_case.question,)
        result = _answer_eval(
            stores,
            judge_model="openai/local-judge",
            judge_api_base=server.base_url,
            llm_max_attempts=2,
        )
    assert result.success
    meta = metadata_of(result, "answer_eval")
    rows = DuckDBStore(stores / "lorehouse.duckdb").table("eval_answers").set_index("case_id")

    # every case is answered and stored; the one the judge could not grade has no score
    assert set(rows.index) == {case.id for case in GOLDEN}
    failed = rows.loc[broken_case.id]
    assert pd.isna(failed["score"]) and pd.isna(failed["label"])  # NULL, never a made-up score
    assert "invalid output" in failed["judge_error"]
    assert meta["judge_failures"] == 1 and meta["judged"] == len(GOLDEN) - 1

    judged = rows.drop(index=broken_case.id)
    assert judged["score"].between(0, 5).all()
    for _, row in judged.iterrows():
        expected = "correct" if row["score"] >= 4 else "partial" if row["score"] >= 2 else None
        if expected:
            assert row["label"] == expected, row
        else:
            assert row["label"] in ("incorrect", "refused"), row
    # the offline extractive answers repeat their sources' words: most grade well
    assert (judged["label"] == "correct").sum() >= len(judged) // 2
    assert "worst_cases" in meta and "judge's reasoning" in meta["worst_cases"]
    assert "| 5 |" in meta["score_distribution"]

    # the judge saw the retrieved passages, numbered with their files, evidence included
    answerable = [case for case in GOLDEN if case.evidence]
    evidence_seen = 0
    for case in answerable:
        prompt = next(p for p in server.judge_prompts if case.question in p)
        sources = prompt.split("Source passages the assistant retrieved")[1]
        assert "[1] (" in sources, case.id
        evidence_seen += any(
            normalize(item.excerpt)[:40] in normalize(sources) for item in case.evidence
        )
    assert evidence_seen >= 0.75 * len(answerable)
