"""Eval assets: recall@k of every retriever (and its gate), and LLM-judged answer quality."""

import base64
from pathlib import Path

import dagster as dg

from assets._metadata import markdown_table, progress_logger
from assets.checks import asset_check
from assets.embeddings import search_index
from assets.policies import LLM_RETRY_POLICY
from assets.resources import (
    EnrichmentResource,
    EvalResource,
    FeatureStoreResource,
    VectorIndexResource,
    wiring_for,
)
from evals.answer_eval import NO_JUDGE, AnswerEvalReport
from evals.explain import miss_counts
from evals.golden_set import GoldenSetNotIndexed
from evals.runner import run_answer_eval, run_retrieval_eval
from lorehouse.stages.embedding_map import draw_embedding_map

GATE_K = 8
GATE_MAX_DROP = 0.03


@dg.asset(group_name="evals", kinds={"duckdb"}, deps=[search_index])
def retrieval_eval(
    context: dg.AssetExecutionContext,
    feature_store: FeatureStoreResource,
    vector_index: VectorIndexResource,
    evaluation: EvalResource,
    enrichment: EnrichmentResource,
) -> dg.MaterializeResult:
    """Recall@1..20 and MRR per retriever (modes, rerankers, agentic, naive baseline).

    Skipped, with the reason in its metadata, when the golden set cites none of the indexed
    documents: a corpus of your own scored against the bundled sample's questions is all
    misses, not a measurement.
    """
    try:
        run = run_retrieval_eval(
            wiring_for(feature_store, vector_index, evaluation, enrichment), evaluation.golden_set
        )
    except GoldenSetNotIndexed as error:
        context.log.warning(f"retrieval_eval skipped: {error}")
        return dg.MaterializeResult(
            metadata={"skipped": str(error), "golden_set": evaluation.golden_set.name}
        )
    report = run.report
    cutoffs = [1, 3, 5, 8, 10, 20]
    baseline = report.result("naive").recall_at[GATE_K] if run.naive_windows else None
    # The recall curve as a table the asset's page shows (one row per retriever, one column
    # per cutoff); the default retriever's values are also plotted across runs below.
    columns = [
        dg.TableColumn("retriever", "string", description="retrieval configuration"),
        *(
            dg.TableColumn(
                f"R@{k}",
                "float",
                description=f"share of questions with all evidence in the top {k}",
            )
            for k in cutoffs
        ),
        dg.TableColumn("MRR", "float", description="mean reciprocal rank of the first evidence"),
        dg.TableColumn(
            f"vs naive @{GATE_K}", "float", description="recall points over the naive baseline"
        ),
    ]
    records = [
        dg.TableRecord(
            {
                "retriever": r.retriever,
                **{f"R@{k}": round(r.recall_at[k], 4) for k in cutoffs},
                "MRR": round(r.mrr, 4),
                f"vs naive @{GATE_K}": (
                    None if baseline is None else round(100 * (r.recall_at[GATE_K] - baseline), 1)
                ),
            }
        )
        for r in report.results
    ]
    default = report.result(report.default_retriever)
    misses = default.misses(GATE_K)
    for miss in misses[:10]:
        context.log.info(f"miss@{GATE_K} [{miss.case_type}] {miss.case_id}: {miss.question}")
    return dg.MaterializeResult(
        metadata={
            "run_id": report.run_id,
            "questions": report.n_questions,
            "default_retriever": report.default_retriever,
            f"default_recall_at_{GATE_K}": default.recall_at[GATE_K],
            "index_version": run.index_version,
            "golden_set": evaluation.golden_set.name,
            "results": dg.MetadataValue.table(records, dg.TableSchema(columns)),
            # Numbers Dagster plots across runs (the asset's Plots tab), one series per cutoff.
            **{
                f"recall_at_{k}": dg.MetadataValue.float(round(default.recall_at[k], 4))
                for k in cutoffs
            },
            "mrr": dg.MetadataValue.float(round(default.mrr, 4)),
            f"misses_at_{GATE_K}": dg.MetadataValue.md(
                markdown_table(
                    ["case", "type", "question"],
                    [[m.case_id, m.case_type, m.question] for m in misses[:30]],
                )
            ),
            # Where each missed excerpt got lost, so a drop points at a stage, not a guess.
            **{
                f"missed_excerpts_{retriever}_{reason}": count
                for retriever, per_reason in miss_counts(run.misses).items()
                for reason, count in per_reason.items()
            },
            "why_missed": dg.MetadataValue.md(
                markdown_table(
                    ["retriever", "case", "type", "file", "reason", "detail"],
                    [
                        [m.retriever, m.case_id, m.case_type, m.file, m.reason, m.detail]
                        for m in run.misses[:40]
                    ],
                )
            ),
        }
    )


@dg.asset(group_name="evals", kinds={"lancedb"}, deps=[search_index])
def embedding_map(
    context: dg.AssetExecutionContext, vector_index: VectorIndexResource
) -> dg.MaterializeResult:
    """A sample of the chunk vectors laid out in two dimensions (t-SNE), coloured by language
    and by folder: whether the model keeps the corpus's languages and topics apart, at a
    glance. Bounded: at most MAP_SAMPLE chunks, whatever the corpus's size."""
    lorehouse = vector_index.wiring()
    drawn = draw_embedding_map(lorehouse.chunk_index())
    if drawn is None:
        return dg.MaterializeResult(metadata={"skipped": "fewer than two chunks to lay out"})
    context.log.info(f"laid out {drawn.points} chunks in {drawn.seconds:.1f} s")

    def picture(svg: str) -> str:
        return f"![map](data:image/svg+xml;base64,{base64.b64encode(svg.encode()).decode()})"

    return dg.MaterializeResult(
        metadata={
            "by_language": dg.MetadataValue.md(picture(drawn.by_language)),
            "by_folder": dg.MetadataValue.md(picture(drawn.by_folder)),
            "languages": dg.MetadataValue.md(
                markdown_table(["language", "chunks"], [list(i) for i in drawn.languages.items()])
            ),
            "folders": dg.MetadataValue.md(
                markdown_table(["folder", "chunks"], [list(i) for i in drawn.folders.items()])
            ),
            "chunks_drawn": dg.MetadataValue.int(drawn.points),
            "seconds": dg.MetadataValue.float(round(drawn.seconds, 2)),
        }
    )


@asset_check(asset=retrieval_eval)
def recall_gate(
    feature_store: FeatureStoreResource, evaluation: EvalResource
) -> dg.AssetCheckResult:
    """Recall@8 of the default retriever may not fall more than 3 points below the last run."""
    history = feature_store.open().recall_history(GATE_K, evaluation.golden_set.name)
    severity = (
        dg.AssetCheckSeverity.ERROR
        if evaluation.eval_gate == "error"
        else dg.AssetCheckSeverity.WARN
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


@dg.asset(
    group_name="evals",
    kinds={"duckdb"},
    deps=[search_index],
    retry_policy=LLM_RETRY_POLICY,
)
def answer_eval(
    context: dg.AssetExecutionContext,
    feature_store: FeatureStoreResource,
    vector_index: VectorIndexResource,
    evaluation: EvalResource,
    enrichment: EnrichmentResource,
) -> dg.MaterializeResult:
    """/v1/ask answers every golden question; each answer is scored by how a person reads it.

    The judge-free measures always run: whether the lead states a reference fact, the key
    facts the lead and excerpts state, the lead's length, and the declines, right and wrong.
    With a judge model configured (LOREHOUSE_JUDGE_MODEL) it also grades each answer 0-5
    with its reasoning. A score is never invented: without a judge there is none. Skipped,
    with the reason in its metadata, when the golden set cites none of the indexed documents.
    """
    lorehouse = wiring_for(feature_store, vector_index, evaluation, enrichment)
    judged = lorehouse.settings.judge_model is not None
    if not judged:
        context.log.info("answer_eval: no judge model; judge-free measures only")
    logger = progress_logger(context, "answers judged" if judged else "answers scored")
    try:
        report = run_answer_eval(lorehouse, evaluation.golden_set, on_case=logger)
    except GoldenSetNotIndexed as error:
        # Another corpus's questions would only measure that they are not answered here.
        context.log.warning(f"answer_eval skipped: {error}")
        return dg.MaterializeResult(
            metadata={"skipped": str(error), "golden_set": evaluation.golden_set.name}
        )
    return dg.MaterializeResult(metadata=answer_eval_metadata(report, evaluation.golden_set))


def _plotted(value: float | int | None) -> dg.MetadataValue | str:
    """A measure as a number Dagster plots, or "none" when no case measured it."""
    return "none" if value is None else dg.MetadataValue.float(float(value))


def _shown(value: float | int | None) -> str:
    return "" if value is None else f"{value:g}" if isinstance(value, int) else f"{value:.2f}"


def answer_eval_metadata(report: AnswerEvalReport, golden_set: Path) -> dict[str, object]:
    """The judge-free measures by case type; with a judge, its score distribution, labels,
    mean by case type and the worst cases, for the asset page."""
    mean = report.mean_score()
    distribution = report.score_distribution()
    widest = max(distribution.values(), default=0) or 1
    worst = report.worst(10)
    failures = [o for o in report.outcomes if o.score is None]
    judged = report.judge_model != NO_JUDGE
    lead = report.lead_summary()
    facts = report.key_fact_summary()
    offline: dict[str, object] = {
        "status": "judged" if judged else "judge-free measures (no judge model)",
        "run_id": report.run_id,
        "golden_set": Path(golden_set).name,
        "cases": len(report.outcomes),
        # What a person reads: numbers Dagster plots across runs.
        "lead_states_fact": _plotted(lead["lead_states_fact"]),
        "lead_from_evidence": _plotted(lead["lead_from_evidence"]),
        "shown_key_facts": _plotted(lead["shown_key_facts"]),
        "median_lead_words": _plotted(lead["median_lead_words"]),
        "wrongly_declined": _plotted(lead["wrongly_declined"]),
        "unanswerable_declined": _plotted(lead["unanswerable_declined"]),
        # Of the leads the answer asserts (not passages only): how many answerable questions
        # get one, how often it states a key fact, and how many unanswerable ones get one.
        "coverage": _plotted(lead["coverage"]),
        "asserted_precision": _plotted(lead["asserted_precision"]),
        "near_misses_asserted": _plotted(lead["near_misses_asserted"]),
        "key_facts_mean_share": _plotted(facts.get("mean_share")),
        "by_type": dg.MetadataValue.md(
            markdown_table(
                [
                    "case type",
                    "answers",
                    "lead states a fact",
                    "lead from the evidence",
                    "key facts shown",
                    "lead words",
                ],
                [
                    [
                        case_type,
                        measures["answers"],
                        _shown(measures["lead_states_fact"]),
                        _shown(measures["lead_from_evidence"]),
                        _shown(measures["shown_key_facts"]),
                        _shown(measures["median_lead_words"]),
                    ]
                    for case_type, measures in lead["by_type"].items()
                ],
            )
        ),
    }
    if not judged:
        return offline
    return {
        **offline,
        "judge_model": report.judge_model,
        "judged": len(report.judged),
        "judge_failures": len(failures),
        "mean_score": dg.MetadataValue.float(round(mean, 3)) if mean is not None else "none",
        "score_distribution": dg.MetadataValue.md(
            markdown_table(
                ["score", "cases", ""],
                [[k, v, "#" * round(20 * v / widest)] for k, v in distribution.items()],
            )
        ),
        "labels": dg.MetadataValue.md(
            markdown_table(["label", "cases"], [[k, v] for k, v in report.label_counts().items()])
        ),
        "mean_score_by_type": dg.MetadataValue.md(
            markdown_table(
                ["case type", "mean score"],
                [[k, f"{v:.2f}"] for k, v in report.mean_by_type().items()],
            )
        ),
        "worst_cases": dg.MetadataValue.md(
            markdown_table(
                ["case", "type", "score", "label", "question", "answer", "judge's reasoning"],
                [
                    [
                        o.case_id,
                        o.case_type,
                        o.score,
                        o.label,
                        o.question,
                        o.answer[:200],
                        o.reasoning or "",
                    ]
                    for o in worst
                ],
            )
        ),
        "judge_errors": dg.MetadataValue.md(
            markdown_table(
                ["case", "error"], [[o.case_id, o.judge_error or ""] for o in failures[:20]]
            )
        ),
    }
