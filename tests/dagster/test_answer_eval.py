"""answer_eval on the sample corpus: the judge-free measures offline, and a judge model behind
a real HTTP endpoint grading answers."""

from __future__ import annotations

import shutil
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest

from assets import evals
from assets.resources import build_resources
from evals.golden_files import load_golden
from evals.metrics import normalize
from lorehouse.settings import BUNDLED_SAMPLE_CORPUS, Settings
from lorehouse.stores.duckdb_store import DuckDBStore
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


def _rows_of(stores: Path, run_id: str) -> pd.DataFrame:
    """The stored rows of one answer-eval run (the materialized sample holds one already)."""
    rows = DuckDBStore(stores / "lorehouse.duckdb").table("eval_answers")
    return rows[rows["run_id"] == run_id]


@pytest.fixture
def stores(materialized_sample: Path, tmp_path: Path) -> Path:
    """A private copy of the materialized sample, so eval rows stay in this test."""
    return Path(shutil.copytree(materialized_sample, tmp_path / "data"))


def test_without_a_judge_the_answer_eval_materializes_the_judge_free_measures(
    stores: Path,
) -> None:
    """Offline, the asset still tells how the answers read: leads that state a fact, key
    facts shown, lead length and declines, as numbers the UI plots; no score is made up."""
    result = _answer_eval(stores)
    assert result.success
    meta = metadata_of(result, "answer_eval")
    assert meta["status"].startswith("judge-free")
    assert "mean_score" not in meta and "judge_model" not in meta
    for measure in ("lead_states_fact", "shown_key_facts", "wrongly_declined"):
        assert 0.0 <= meta[measure] <= 1.0, measure
    assert meta["lead_states_fact"] > 0.3  # the sample corpus's leads mostly state the fact
    assert meta["median_lead_words"] > 0
    assert meta["cases"] == len(GOLDEN)
    assert "| case type |" in meta["by_type"]
    rows = _rows_of(stores, meta["run_id"])
    assert set(rows["case_id"]) == {case.id for case in GOLDEN}
    assert rows["score"].isna().all() and (rows["judge_model"] == "none").all()


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
    rows = _rows_of(stores, meta["run_id"]).set_index("case_id")

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
