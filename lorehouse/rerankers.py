"""Second-stage rerankers behind one interface: none, or a litellm rerank model.

No cross-encoder ships as an offline package, so offline the first stage's order is final
(`none`); a hosted reranker (Cohere, Voyage, Together, a self-hosted Infinity server...)
plugs in through litellm's rerank API when one is configured. A field-level rank fusion
was offered offline and removed: it lowered recall on every set it was measured on
(BENCHMARKS.md, "Retrieval quality").
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

log = logging.getLogger(__name__)

#: The constant of reciprocal rank fusion (Cormack et al.): damps the weight of top ranks so
#: one retriever's first hit cannot outvote agreement among the others.
RRF_K = 60
NONE = "none"


@dataclass
class Candidate:
    """A chunk on its way through retrieval, with one score per stage that ranked it."""

    row: dict
    vector: np.ndarray | None
    scores: dict[str, float] = field(default_factory=dict)

    @property
    def chunk_id(self) -> str:
        return self.row["chunk_id"]


class RerankFailure(RuntimeError):
    """A rerank provider failed; retrieval keeps the first-stage order and says so."""


class Reranker(Protocol):
    """Reorders candidates for a query and records its own score on each."""

    name: str

    def rerank(
        self, query: str, query_vector: np.ndarray, candidates: list[Candidate]
    ) -> list[Candidate]: ...


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[str]],
    k: int = RRF_K,
    weights: Sequence[float] | None = None,
) -> dict[str, float]:
    """Sum of weight / (k + rank) over the rankings that contain each id (rank counted from 1).

    Weights default to 1 for every ranking.
    """
    fused: dict[str, float] = {}
    for ranking, weight in zip(rankings, weights or [1.0] * len(rankings), strict=True):
        for rank, item in enumerate(ranking, start=1):
            fused[item] = fused.get(item, 0.0) + weight / (k + rank)
    return fused


def by_score(candidates: list[Candidate], stage: str) -> list[Candidate]:
    """Candidates ordered by one stage's score; ties broken by chunk id for stable output."""
    return sorted(candidates, key=lambda c: (-c.scores.get(stage, 0.0), c.chunk_id))


class NoReranker:
    """Keeps the first stage's order."""

    name = NONE

    def rerank(
        self, query: str, query_vector: np.ndarray, candidates: list[Candidate]
    ) -> list[Candidate]:
        return candidates


class LiteLLMReranker:
    """A hosted cross-encoder through litellm.rerank (cohere/rerank-..., voyage/..., ...)."""

    def __init__(
        self, model: str, api_base: str | None = None, timeout_seconds: float = 30.0
    ) -> None:
        self.name = model
        self.api_base = api_base
        self.timeout_seconds = timeout_seconds

    def rerank(
        self, query: str, query_vector: np.ndarray, candidates: list[Candidate]
    ) -> list[Candidate]:
        if not candidates:
            return candidates
        from lorehouse.llm import litellm_module, provider_error

        try:
            response = litellm_module().rerank(
                model=self.name,
                query=query,
                documents=[c.row["text_chat"] for c in candidates],
                top_n=len(candidates),
                return_documents=False,
                api_base=self.api_base,
                timeout=self.timeout_seconds,
            )
        # litellm's provider errors (rate limits, timeouts, 5xx, auth) all derive from openai's.
        except provider_error() as error:
            raise RerankFailure(f"{self.name}: {type(error).__name__}: {error}") from error
        for result in response.results or []:
            position = int(result["index"])
            if 0 <= position < len(candidates):
                candidates[position].scores["rerank"] = float(result["relevance_score"])
        return by_score(candidates, "rerank")


def available_rerankers(configured: str | None) -> list[str]:
    """Names a request may ask for: the offline ones plus a configured litellm model."""
    names = [NONE]
    if configured and configured not in names:
        names.append(configured)
    return names


def build_reranker(
    name: str, api_base: str | None = None, timeout_seconds: float = 30.0
) -> Reranker:
    """The reranker a name stands for; anything but none is a litellm rerank model."""
    if name == NONE:
        return NoReranker()
    if "/" not in name:
        raise ValueError(f"unknown reranker {name!r}: use none or a litellm rerank model")
    return LiteLLMReranker(name, api_base=api_base, timeout_seconds=timeout_seconds)
