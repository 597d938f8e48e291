"""retrieval_eval on the sample corpus: the stored run, its recall table, the recall gate."""

from __future__ import annotations

import shutil
from pathlib import Path

import dagster as dg
import pytest

from assets import evals
from assets.checks import checks_of
from assets.resources import build_resources
from lorehouse.settings import BUNDLED_SAMPLE_CORPUS, Settings
from lorehouse.stores.duckdb_store import DuckDBStore
from tests.dagster.conftest import metadata_of
from tests.provider_server import provider_server


def _evaluate(data_dir: Path, **settings: object) -> dg.ExecuteInProcessResult:
    config = Settings(source_uri=str(BUNDLED_SAMPLE_CORPUS), data_dir=data_dir, **settings)
    return dg.materialize(
        [evals.retrieval_eval, *checks_of([evals])],
        resources=build_resources(config),
        instance=dg.DagsterInstance.ephemeral(),
    )


def _gate(result: dg.ExecuteInProcessResult) -> dg.AssetCheckEvaluation:
    (evaluation,) = result.get_asset_check_evaluations()
    return evaluation


def test_the_gate_fires_when_the_retriever_is_degraded_on_purpose(
    materialized_sample: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A copy of the session's stores: the eval writes its runs beside them.
    shutil.copytree(materialized_sample, data_dir)
    first = _evaluate(data_dir)
    assert first.success
    meta = metadata_of(first, "retrieval_eval")
    assert meta["questions"] == 12  # the unanswerable case counts in answer eval only
    assert meta["default_recall_at_8"] >= 0.9
    # The recall curve as a table the UI shows, a row per retriever, a column per cutoff.
    table = meta["results"]
    by_retriever = {record.data["retriever"]: record.data for record in table.records}
    assert {"naive", "agentic", "hybrid+maxsim"} <= set(by_retriever)
    assert [c.name for c in table.schema.columns][:3] == ["retriever", "R@1", "R@3"]
    assert all(c.description for c in table.schema.columns)
    assert by_retriever["hybrid+maxsim"]["R@8"] == meta["default_recall_at_8"]
    # Recall at each cutoff as numbers Dagster plots across runs.
    assert [type(meta[f"recall_at_{k}"]) for k in (1, 3, 5, 8, 10, 20)] == [float] * 6
    assert meta["recall_at_8"] == meta["default_recall_at_8"]
    assert 0 < meta["mrr"] <= 1
    rows = DuckDBStore(data_dir / "lorehouse.duckdb").table("eval_retrieval")
    # hybrid is scored alone and with the default reranker, which is what /v1/search serves
    assert meta["default_retriever"] == "hybrid+maxsim"
    assert set(rows["retriever"]) == {
        "vector",
        "bm25",
        "hybrid",
        "hybrid+maxsim",
        "agentic",
        "naive",
    }
    assert set(rows["k"]) == set(range(1, 21))

    monkeypatch.setenv("COHERE_API_KEY", "local-test")
    with provider_server() as server:
        server.rerank_inverted = True  # ranks the best candidates last
        degraded = {
            "rerank": "cohere/rerank-english-v3.0",
            "rerank_api_base": server.base_url.removesuffix("/v1"),
        }
        warned = _gate(_evaluate(data_dir, **degraded))
        assert not warned.passed
        assert warned.severity == dg.AssetCheckSeverity.WARN
        assert warned.metadata["drop_points"].value > 3

        recovered = _gate(_evaluate(data_dir))
        assert recovered.passed

        failed = _gate(_evaluate(data_dir, eval_gate="error", **degraded))
        assert not failed.passed
        assert failed.severity == dg.AssetCheckSeverity.ERROR


def test_a_golden_set_of_another_corpus_is_skipped_with_its_reason(
    materialized_sample: Path, data_dir: Path, tmp_path: Path
) -> None:
    shutil.copytree(materialized_sample, data_dir)
    golden = tmp_path / "other_corpus.jsonl"
    golden.write_text(
        '{"id": "x-1", "question": "How many weeks of leave?", "answer": "12 weeks.", '
        '"type": "lookup", "evidence": [{"file": "elsewhere/handbook.md", '
        '"excerpt": "Teammates may take up to 12 weeks of leave a year."}]}\n'
    )
    result = _evaluate(data_dir, eval_golden_set=golden)
    assert result.success
    meta = metadata_of(result, "retrieval_eval")
    assert "elsewhere/handbook.md" in meta["skipped"]
    assert "LOREHOUSE_EVAL_GOLDEN_SET" in meta["skipped"]
    assert "default_recall_at_8" not in meta
    rows = DuckDBStore(data_dir / "lorehouse.duckdb").table("eval_retrieval")
    assert "other_corpus.jsonl" not in set(rows["golden_set"])
