"""Runs the retrieval eval against the materialized stores of a deployment.

Shared by `lorehouse eval retrieval` and the `retrieval_eval` asset, so both measure exactly
the same configurations and store the same rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from evals.golden_set import load_golden
from evals.naive import NaiveIndex, build_naive_index, naive_search
from evals.retrieval_eval import (
    K_MAX,
    RetrievalEvalReport,
    RetrieverConfig,
    agentic_config,
    evaluate,
    recall_plot_png,
    report_rows,
    search_config,
)
from lorehouse.agents.pipeline import AskPipeline
from lorehouse.components import embedder_from, llm_client_for, open_chunk_index
from lorehouse.embedding_providers import Embedder
from lorehouse.llm import LLMClient
from lorehouse.rerankers import available_rerankers
from lorehouse.retrieval import Retriever
from lorehouse.settings import Settings
from lorehouse.stores.duckdb_store import DuckDBStore
from lorehouse.stores.lance_index import ChunkIndex


@dataclass
class RetrievalEvalRun:
    report: RetrievalEvalReport
    plot_png: bytes
    plot_path: Path
    index_version: str
    naive_windows: int


def run_retrieval_eval(
    store: DuckDBStore,
    index: ChunkIndex,
    embedder: Embedder,
    golden_path: Path,
    plot_dir: Path,
    *,
    candidates: int = 50,
    rerank: str = "none",
    rerank_api_base: str | None = None,
    llm_client: LLMClient | None = None,
    k_max: int = K_MAX,
    include_agentic: bool = True,
    include_naive: bool = True,
) -> RetrievalEvalRun:
    """Evaluates every configuration, stores the rows in DuckDB and writes the chart PNG."""
    retriever = Retriever(index, embedder, candidates, rerank_api_base=rerank_api_base)
    retriever.check_model()
    groups = store.access_groups()  # the eval sees every document
    configs: list[RetrieverConfig] = [
        search_config(retriever, "vector", "none", groups),
        search_config(retriever, "bm25", "none", groups),
    ]
    configs += [
        search_config(retriever, "hybrid", name, groups) for name in available_rerankers(rerank)
    ]
    if include_agentic:
        pipeline = AskPipeline(retriever, index.documents(), embedder, llm_client)
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
    report = evaluate(load_golden(golden_path), configs, k_max=k_max, default_retriever=default)
    version = str(index.table().version)
    store.append_eval_retrieval(pd.DataFrame(report_rows(report, version, golden_path.name)))
    png = recall_plot_png(report)
    plot_path = plot_dir / f"retrieval-{report.run_id}.png"
    plot_path.parent.mkdir(parents=True, exist_ok=True)
    plot_path.write_bytes(png)
    return RetrievalEvalRun(report, png, plot_path, version, windows)


def run_for_settings(
    settings: Settings,
    golden_path: Path,
    k_max: int = K_MAX,
    include_agentic: bool = True,
    include_naive: bool = True,
) -> RetrievalEvalRun:
    """The eval against the stores and models a Settings object describes (the CLI's path)."""
    return run_retrieval_eval(
        DuckDBStore(settings.duckdb_path),
        open_chunk_index(settings),
        embedder_from(settings),
        golden_path,
        settings.data_dir / "evals",
        candidates=settings.search_candidates,
        rerank=settings.rerank,
        rerank_api_base=settings.rerank_api_base,
        llm_client=llm_client_for(settings) if include_agentic else None,
        k_max=k_max,
        include_agentic=include_agentic,
        include_naive=include_naive,
    )
