"""retrieval_eval: recall@k of every retriever on the golden set, and the gate on it."""

import base64
from pathlib import Path

import dagster as dg

from assets.embeddings import chunk_embeddings
from assets.progress import markdown_table
from evals.runner import run_retrieval_eval
from pipelines.resources import (
    EnrichmentResource,
    EvalResource,
    FeatureStoreResource,
    VectorIndexResource,
)

GATE_K = 8
GATE_MAX_DROP = 0.03


@dg.asset(group_name="evals", kinds={"duckdb"}, deps=[chunk_embeddings])
def retrieval_eval(
    context: dg.AssetExecutionContext,
    feature_store: FeatureStoreResource,
    vector_index: VectorIndexResource,
    evaluation: EvalResource,
    enrichment: EnrichmentResource,
) -> dg.MaterializeResult:
    """Recall@1..20 and MRR per retriever (modes, rerankers, agentic, naive baseline)."""
    run = run_retrieval_eval(
        feature_store.open(),
        vector_index.open(),
        vector_index.embedder(),
        Path(evaluation.golden_set),
        Path(evaluation.plot_dir),
        candidates=evaluation.search_candidates,
        rerank=evaluation.rerank,
        rerank_api_base=evaluation.rerank_api_base,
        llm_client=enrichment.llm_client(),
    )
    report = run.report
    cutoffs = [1, 3, 5, 8, 10, 20]
    baseline = report.result("naive").recall_at[GATE_K] if run.naive_windows else None
    rows = [
        [
            r.retriever,
            *(f"{r.recall_at[k]:.2f}" for k in cutoffs),
            f"{r.mrr:.3f}",
            "" if baseline is None else f"{100 * (r.recall_at[GATE_K] - baseline):+.0f}",
        ]
        for r in report.results
    ]
    default = report.result(report.default_retriever)
    misses = default.misses(GATE_K)
    for miss in misses[:10]:
        context.log.info(f"miss@{GATE_K} [{miss.case_type}] {miss.case_id}: {miss.question}")
    image = base64.b64encode(run.plot_png).decode()
    return dg.MaterializeResult(
        metadata={
            "run_id": report.run_id,
            "questions": report.n_questions,
            "default_retriever": report.default_retriever,
            f"default_recall_at_{GATE_K}": default.recall_at[GATE_K],
            "index_version": run.index_version,
            "golden_set": Path(evaluation.golden_set).name,
            "results": dg.MetadataValue.md(
                markdown_table(
                    ["retriever", *(f"R@{k}" for k in cutoffs), "MRR", f"vs naive @{GATE_K} (pts)"],
                    rows,
                )
            ),
            "recall_chart": dg.MetadataValue.md(
                f"![recall against cutoff](data:image/png;base64,{image})"
            ),
            "chart_file": dg.MetadataValue.path(str(run.plot_path)),
            f"misses_at_{GATE_K}": dg.MetadataValue.md(
                markdown_table(
                    ["case", "type", "question"],
                    [[m.case_id, m.case_type, m.question] for m in misses[:30]],
                )
            ),
        }
    )


@dg.asset_check(asset=retrieval_eval)
def recall_gate(
    feature_store: FeatureStoreResource, evaluation: EvalResource
) -> dg.AssetCheckResult:
    """Recall@8 of the default retriever may not fall more than 3 points below the last run."""
    history = feature_store.open().recall_history(GATE_K, Path(evaluation.golden_set).name)
    severity = (
        dg.AssetCheckSeverity.ERROR if evaluation.gate == "error" else dg.AssetCheckSeverity.WARN
    )
    if len(history) < 2:
        return dg.AssetCheckResult(
            passed=True, metadata={"note": "first run on this golden set: nothing to compare"}
        )
    (_, retriever, current), (_, _, previous) = history[0], history[1]
    drop = previous - current
    return dg.AssetCheckResult(
        passed=drop <= GATE_MAX_DROP,
        severity=severity,
        metadata={
            "retriever": retriever,
            f"recall_at_{GATE_K}": current,
            "previous": previous,
            "drop_points": round(100 * drop, 1),
        },
    )
