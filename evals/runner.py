"""Runs the retrieval eval against the materialized stores of a deployment.

Shared by `lorehouse eval retrieval` and the `retrieval_eval` asset, so both measure exactly
the same configurations and store the same rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from evals.answer_eval import AnswerEvalReport, evaluate_answers
from evals.beir import BeirReport, evaluate_rankers, index_dataset, load_beir, search_ranker
from evals.explain import EvidenceMiss, MissExplainer, miss_rows
from evals.golden_files import load_golden
from evals.golden_set import GoldenCase, GoldenSetNotIndexed
from evals.metrics import same_file
from evals.naive import NaiveIndex, build_naive_index, naive_search
from evals.retrieval_eval import (
    K_MAX,
    RetrievalEvalReport,
    RetrieverConfig,
    agentic_config,
    as_retrieved,
    evaluate,
    report_rows,
    search_config,
)
from lorehouse.agents.ask import AskPipeline, AskResponse
from lorehouse.search.rerankers import evaluated_rerankers
from lorehouse.search.retriever import Retriever
from lorehouse.search.tables import sql_in
from lorehouse.settings import Settings
from lorehouse.stages.progress import ProgressCallback
from lorehouse.stores.duckdb_store import DuckDBStore
from lorehouse.stores.lance_index import ChunkIndex
from lorehouse.wiring import Lorehouse


@dataclass
class RetrievalEvalRun:
    report: RetrievalEvalReport
    index_version: str
    naive_windows: int
    #: Why each evidence excerpt of a case missed at EXPLAIN_K was missed (default retriever
    #: and the agentic retrieval).
    misses: list[EvidenceMiss] = field(default_factory=list)


#: The cutoff misses are explained at: the context /v1/ask reads by default.
EXPLAIN_K = 8


def run_retrieval_eval(
    lorehouse: Lorehouse,
    golden_path: Path,
    *,
    k_max: int = K_MAX,
    include_agentic: bool = True,
    include_naive: bool = True,
) -> RetrievalEvalRun:
    """Evaluates every configuration and stores the rows in DuckDB.

    Every retriever is the deployment's own (`lorehouse.retriever()`, the default reranker
    being what /v1/ask's searches use), and the agentic configuration is `/v1/ask`'s pipeline
    with its options and LLM, so the eval measures what the API does.
    """
    store = lorehouse.feature_store()
    cases = load_golden(golden_path)
    check_cited_files_indexed(store, cases, golden_path)
    index = lorehouse.chunk_index()
    embedder = lorehouse.embedder()
    retriever = lorehouse.retriever()
    rerank = retriever.default_rerank
    retriever.check_model()
    groups = store.access_groups()  # the eval sees every document
    configs: list[RetrieverConfig] = [
        search_config(retriever, "vector", "none", groups),
        search_config(retriever, "bm25", "none", groups),
    ]
    configs += [
        search_config(retriever, "hybrid", name, groups) for name in evaluated_rerankers(rerank)
    ]
    pipeline = lorehouse.ask_pipeline()
    if include_agentic:
        configs.append(agentic_config(pipeline, groups))
    windows = 0
    if include_naive:
        naive = index.sibling(NaiveIndex)
        windows = build_naive_index(store, naive, embedder)
        configs.append(
            RetrieverConfig("naive", lambda q, k: naive_search(naive, embedder, q, k, groups))
        )

    # The default retriever is what /v1/search does by default: hybrid plus the default reranker.
    default = "hybrid" if rerank == "none" else f"hybrid+{rerank}"
    report = evaluate(cases, configs, k_max=k_max, default_retriever=default)
    version = str(index.table().version)
    store.append_eval_retrieval(pd.DataFrame(report_rows(report, version, golden_path.name)))
    explained = [config for config in configs if config.name in (default, "agentic")]
    misses = explain_misses(store, retriever, pipeline, groups, report, explained, cases)
    store.append_eval_retrieval_misses(miss_rows(misses, report.run_id, golden_path.name))
    return RetrievalEvalRun(report, version, windows, misses)


def check_cited_files_indexed(
    store: DuckDBStore, cases: Sequence[GoldenCase], golden_path: Path
) -> None:
    """Raises GoldenSetNotIndexed when no file the golden set cites is indexed.

    Scored against another corpus (the sample golden set over a store of your own documents),
    every case is a miss: a run of recall 0 that spends minutes matching excerpts against
    every chunk, and a gate comparing it with the next.
    """
    indexed = [path for _, path in store.document_names(store.document_ids_for_index()).values()]
    if not indexed:
        raise GoldenSetNotIndexed("no document is indexed: the source has no documents")
    cited = sorted({item.file for case in cases for item in case.evidence})
    if not cited:
        return
    if not any(same_file(path, file) for file in cited for path in indexed):
        raise GoldenSetNotIndexed(
            f"{golden_path.name} cites {len(cited)} files ({cited[0]!r}, ...) and none of them "
            f"is among the {len(indexed)} indexed documents: score a golden set written from this "
            "corpus (--golden; LOREHOUSE_EVAL_GOLDEN_SET for the retrieval_eval asset)"
        )


def explain_misses(
    store: DuckDBStore,
    retriever: Retriever,
    pipeline: AskPipeline,
    groups: Sequence[str],
    report: RetrievalEvalReport,
    configs: Sequence[RetrieverConfig],
    cases: Sequence[GoldenCase],
) -> list[EvidenceMiss]:
    """Why each case missed at EXPLAIN_K by `configs` was missed, excerpt by excerpt."""
    by_id = {case.id: case for case in cases}
    explainer: MissExplainer | None = None
    misses: list[EvidenceMiss] = []
    for config in configs:
        for outcome in report.result(config.name).misses(EXPLAIN_K):
            explainer = explainer or MissExplainer(store, retriever, groups)
            case = by_id[outcome.case_id]
            required = None
            if config.name == "agentic":
                prepared = pipeline.prepare(case.question, [], None, EXPLAIN_K, groups, None)
                ranking = as_retrieved(prepared.ranked)
                if prepared.trace.sources_required and prepared.trace.sources != "all":
                    required = list(prepared.trace.sources)
            else:
                ranking = config.rank(case.question, EXPLAIN_K)
            misses += explainer.explain(config.name, case, ranking, EXPLAIN_K, required)
    return misses


def run_for_settings(
    settings: Settings,
    golden_path: Path,
    k_max: int = K_MAX,
    include_agentic: bool = True,
    include_naive: bool = True,
) -> RetrievalEvalRun:
    """The eval against the stores and models a Settings object describes (the CLI's path)."""
    return run_retrieval_eval(
        Lorehouse(settings),
        golden_path,
        k_max=k_max,
        include_agentic=include_agentic,
        include_naive=include_naive,
    )


def run_beir_for_settings(
    settings: Settings,
    directory: Path,
    split: str = "test",
    store_dir: Path | None = None,
    max_queries: int | None = None,
    on_embed_progress: ProgressCallback | None = None,
    on_query: ProgressCallback | None = None,
) -> BeirReport:
    """Indexes a BEIR dataset into its own LanceDB store, then scores every retriever mode.

    The store defaults to `<data_dir>/beir/<dataset>`, apart from the deployment's own index,
    and is kept, so a second run over the same dataset and model embeds nothing.
    """
    dataset = load_beir(directory, split, max_queries)
    store_dir = store_dir or settings.data_dir / "beir" / dataset.name
    # The deployment's retriever and models over the dataset's own store.
    lorehouse = Lorehouse(settings).with_index_at(store_dir / "lancedb")
    index = lorehouse.chunk_index()
    indexed = index_dataset(
        dataset,
        index,
        lorehouse.embedder(),
        settings.embed_batch_size,
        on_embed_progress,
        lorehouse.token_encoder(),
        settings.index_sentence_windows,
    )
    retriever = lorehouse.retriever()
    rankers = [
        ("vector", search_ranker(retriever, "vector", "none")),
        ("bm25", search_ranker(retriever, "bm25", "none")),
    ] + [
        ("hybrid" if name == "none" else f"hybrid+{name}", search_ranker(retriever, "hybrid", name))
        for name in evaluated_rerankers(settings.rerank)
    ]
    report = BeirReport(
        dataset=dataset.name,
        split=split,
        n_documents=len(dataset.corpus),
        n_queries=len(dataset.queries),
        index_seconds=indexed.seconds,
        documents_embedded=indexed.embedded,
        sentence_windows_embedded=indexed.sentence_windows_embedded,
        token_vectors_embedded=indexed.token_vectors_embedded,
    )
    report.results = evaluate_rankers(dataset, rankers, on_query=on_query)
    return report


def run_answer_eval(
    lorehouse: Lorehouse,
    golden_path: Path,
    *,
    limit: int | None = None,
    on_case: ProgressCallback | None = None,
) -> AnswerEvalReport:
    """Asks every golden question as /v1/ask would (its pipeline, options and LLM), scores its
    key facts, has the judge (when one is configured) grade it, and stores the rows."""
    store = lorehouse.feature_store()
    # Before the index is opened: over no documents there is no index to open.
    cases = load_golden(golden_path)[:limit]
    check_cited_files_indexed(store, cases, golden_path)
    index = lorehouse.chunk_index()
    lorehouse.retriever().check_model()
    groups = store.access_groups()  # the eval sees every document
    pipeline = lorehouse.ask_pipeline()

    def ask(question: str) -> tuple[AskResponse, str]:
        response = pipeline.ask(question, caller_groups=groups)
        return response, context_text(index, response.trace.context_chunk_ids)

    report = evaluate_answers(
        cases, ask, lorehouse.judge_llm(), lorehouse.settings.llm_concurrency, on_case
    )
    store.append_eval_answers(pd.DataFrame(report.rows(golden_path.name)))
    return report


def context_text(index: ChunkIndex, chunk_ids: Sequence[str]) -> str:
    """The passages an answer was written from, numbered in context order, for the judge."""
    if not chunk_ids:
        return ""
    rows = index.rows(
        sql_in("chunk_id", chunk_ids), ["chunk_id", "rel_path", "text_chat"], len(chunk_ids)
    )
    by_id = {row["chunk_id"]: row for row in rows}
    return "\n\n".join(
        f"[{number}] ({by_id[chunk_id]['rel_path']}) {by_id[chunk_id]['text_chat']}"
        for number, chunk_id in enumerate(chunk_ids, start=1)
        if chunk_id in by_id
    )


def run_answer_eval_for_settings(
    settings: Settings,
    golden_path: Path,
    limit: int | None = None,
    on_case: ProgressCallback | None = None,
) -> AnswerEvalReport:
    """The answer eval against the stores, models and judge a Settings object describes.

    Without a judge model the answers are scored by the offline key-fact metric alone.
    """
    return run_answer_eval(Lorehouse(settings), golden_path, limit=limit, on_case=on_case)
