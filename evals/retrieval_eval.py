"""Retrieval eval: recall@k for k = 1..K and MRR per retriever configuration, by case type.

Configurations are functions from (question, k) to a ranked list of chunks, so the same loop
measures the plain retrieval modes, rerankers, the agentic retrieval of /v1/ask and the
traditional-RAG baseline side by side, on the same questions.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from evals.golden_set import GoldenCase
from evals.metrics import (
    DEFAULT_THRESHOLD,
    RetrievedChunk,
    first_hit_rank,
    mean_reciprocal_rank,
    recall_at,
)
from lorehouse.agents.ask import AskPipeline
from lorehouse.search.hits import SearchHit
from lorehouse.search.retriever import Retriever

Ranker = Callable[[str, int], list[RetrievedChunk]]
DEFAULT_RETRIEVER = "hybrid"
K_MAX = 20


@dataclass(frozen=True)
class RetrieverConfig:
    name: str
    rank: Ranker


@dataclass
class CaseOutcome:
    case_id: str
    case_type: str
    question: str
    first_hit: int | None
    language: str | None = None


@dataclass
class ConfigResult:
    """One configuration's scores over the golden set."""

    retriever: str
    recall_at: dict[int, float]
    mrr: float
    by_type: dict[str, dict[int, float]]
    outcomes: list[CaseOutcome]
    seconds: float
    #: Recall@k per question language, for golden sets whose cases name theirs.
    by_language: dict[str, dict[int, float]] = field(default_factory=dict)

    def misses(self, k: int) -> list[CaseOutcome]:
        return [o for o in self.outcomes if o.first_hit is None or o.first_hit > k]


@dataclass
class RetrievalEvalReport:
    run_id: str
    started_at: datetime
    n_questions: int
    k_max: int
    default_retriever: str
    results: list[ConfigResult] = field(default_factory=list)

    def summary(self) -> dict:
        """The CLI's --json object."""
        return {
            "n_questions": self.n_questions,
            "default_retriever": self.default_retriever,
            "results": [
                {
                    "retriever": r.retriever,
                    "recall_at": {str(k): round(v, 4) for k, v in r.recall_at.items()},
                    "mrr": round(r.mrr, 4),
                    **(
                        {
                            "by_language": {
                                language: {str(k): round(v, 4) for k, v in recalls.items()}
                                for language, recalls in r.by_language.items()
                            }
                        }
                        if r.by_language
                        else {}
                    ),
                }
                for r in self.results
            ],
        }

    def result(self, name: str) -> ConfigResult:
        return next(r for r in self.results if r.retriever == name)


def as_retrieved(hits: Sequence[SearchHit]) -> list[RetrievedChunk]:
    return [_retrieved(hit) for hit in hits]


def _retrieved(hit: SearchHit) -> RetrievedChunk:
    """A hit as the matcher reads it: a passage spans the positions of the chunks it joins.

    Those are consecutive chunks of one document, in reading order, and hold the chunk that
    ranked (whose position the hit carries). The eval searches as a caller who sees every
    document, so none of them is left out of the passage.
    """
    if len(hit.passage_chunk_ids) < 2:
        return RetrievedChunk(hit.chunk_id, hit.rel_path, hit.position, hit.text_chat)
    first = hit.position - hit.passage_chunk_ids.index(hit.chunk_id)
    last = first + len(hit.passage_chunk_ids) - 1
    return RetrievedChunk(hit.chunk_id, hit.rel_path, first, hit.text_chat, last)


def search_config(
    retriever: Retriever, mode: str, rerank: str, caller_groups: Sequence[str]
) -> RetrieverConfig:
    """A retrieval mode with a reranker, named e.g. `hybrid` or `hybrid+cohere/rerank-v3.5`."""
    name = mode if rerank == "none" else f"{mode}+{rerank}"

    def rank(question: str, k: int) -> list[RetrievedChunk]:
        result = retriever.search(
            question, top_k=k, mode=mode, caller_groups=caller_groups, rerank=rerank
        )
        return as_retrieved(result.hits)

    return RetrieverConfig(name, rank)


def agentic_config(pipeline: AskPipeline, caller_groups: Sequence[str]) -> RetrieverConfig:
    """The retrieval of /v1/ask (optimizer, source identifier, per-query search, union)."""

    def rank(question: str, k: int) -> list[RetrievedChunk]:
        prepared = pipeline.prepare(question, [], None, k, caller_groups, None)
        return as_retrieved(prepared.ranked[:k])

    return RetrieverConfig("agentic", rank)


def evaluate(
    cases: Sequence[GoldenCase],
    configs: Sequence[RetrieverConfig],
    k_max: int = K_MAX,
    threshold: float = DEFAULT_THRESHOLD,
    default_retriever: str = DEFAULT_RETRIEVER,
) -> RetrievalEvalReport:
    """Scores every configuration on the cases that have evidence."""
    retrievable = [case for case in cases if case.retrievable]
    report = RetrievalEvalReport(
        run_id=uuid.uuid4().hex[:12],
        started_at=datetime.now(UTC),
        n_questions=len(retrievable),
        k_max=k_max,
        default_retriever=default_retriever,
    )
    for config in configs:
        started = time.perf_counter()
        outcomes = []
        for case in retrievable:
            ranking = config.rank(case.question, k_max)
            rank = first_hit_rank(case.evidence_items(), ranking, threshold)
            outcomes.append(CaseOutcome(case.id, case.type, case.question, rank, case.language))
        ranks = [o.first_hit for o in outcomes]
        by_type = _recall_by(outcomes, lambda o: o.case_type, k_max)
        by_language = _recall_by(
            [o for o in outcomes if o.language], lambda o: o.language or "", k_max
        )
        report.results.append(
            ConfigResult(
                retriever=config.name,
                recall_at={k: recall_at(ranks, k) for k in range(1, k_max + 1)},
                mrr=mean_reciprocal_rank(ranks),
                by_type=by_type,
                outcomes=outcomes,
                seconds=time.perf_counter() - started,
                by_language=by_language,
            )
        )
    return report


def _recall_by(
    outcomes: Sequence[CaseOutcome], group: Callable[[CaseOutcome], str], k_max: int
) -> dict[str, dict[int, float]]:
    """Recall@k for k = 1..k_max of each group of outcomes (a case type, a language)."""
    groups = sorted({group(o) for o in outcomes})
    return {
        name: {
            k: recall_at([o.first_hit for o in outcomes if group(o) == name], k)
            for k in range(1, k_max + 1)
        }
        for name in groups
    }


def report_rows(report: RetrievalEvalReport, index_version: str, golden_set: str) -> list[dict]:
    """Long-format rows for DuckDB `eval_retrieval`: one per retriever, case type and k."""
    rows = []
    for result in report.results:
        series = {"all": result.recall_at, **result.by_type}
        for case_type, recalls in series.items():
            outcomes = [o for o in result.outcomes if case_type in ("all", o.case_type)]
            mrr = mean_reciprocal_rank([o.first_hit for o in outcomes])
            for k, recall in recalls.items():
                rows.append(
                    {
                        "run_id": report.run_id,
                        "evaluated_at": report.started_at,
                        "index_version": index_version,
                        "golden_set": golden_set,
                        "retriever": result.retriever,
                        "case_type": case_type,
                        "k": k,
                        "recall": recall,
                        "mrr": mrr,
                        "n_questions": len(outcomes),
                        "is_default": result.retriever == report.default_retriever,
                    }
                )
    return rows
