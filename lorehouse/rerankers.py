"""Second-stage rerankers behind one interface: none, late interaction, a litellm rerank model.

No cross-encoder ships as an offline package. Offline, `maxsim` reorders the first stage's
best candidates by late interaction over the bundled MiniLM's token vectors: it gained on
every set measured, but encodes each candidate at query time (about 1.5 s a query on 2
cores), so it is asked for, not the default; a hosted reranker (Cohere, Voyage, Together, a
self-hosted Infinity server...) plugs in through litellm's rerank API when one is
configured. A field-level rank fusion was offered offline and removed: it lowered recall on
every set it was measured on (BENCHMARKS.md, "Retrieval quality").
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
MAXSIM = "maxsim"
#: Candidates late interaction reorders: the first stage's best 30 (the rest keep their
#: order behind them). Each costs one pass of the encoder over its text.
MAXSIM_DEPTH = 30
#: Weight of the MaxSim ranking against the first stage's 1 when the two are fused by
#: reciprocal rank: 2 was best on both dev sets (BENCHMARKS.md, "Retrieval quality").
MAXSIM_WEIGHT = 2.0


@dataclass
class Candidate:
    """A chunk on its way through retrieval, with one score per stage that ranked it."""

    row: dict
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


class TokenEncoder(Protocol):
    """What late interaction needs of an encoder: per text, its tokens' unit vectors."""

    def token_vectors(self, texts: Sequence[str], batch_size: int = 32) -> list[np.ndarray]: ...


class LateInteractionReranker:
    """MaxSim over token vectors (ColBERT's late interaction), fused with the first stage.

    A passage's score is the mean, over the query's tokens, of each token's best cosine with
    a token of the passage: every word of the question looks for its own match, which one
    averaged vector per passage blurs (a paraphrase that matches three words of ten). The
    MaxSim order of the first `depth` candidates is fused by reciprocal rank with their
    first-stage order, MaxSim weighing `weight`.
    """

    name = MAXSIM

    def __init__(
        self, encoder: TokenEncoder, depth: int = MAXSIM_DEPTH, weight: float = MAXSIM_WEIGHT
    ) -> None:
        self.encoder = encoder
        self.depth = depth
        self.weight = weight

    def rerank(
        self, query: str, query_vector: np.ndarray, candidates: list[Candidate]
    ) -> list[Candidate]:
        head, tail = candidates[: self.depth], candidates[self.depth :]
        if not head:
            return candidates
        # Small batches: passages differ in length, and padding them to the longest of 32
        # doubled the encoder's time.
        query_tokens, *passages = self.encoder.token_vectors(
            [query, *(c.row.get("text_embed") or c.row["text_chat"] for c in head)], batch_size=8
        )
        for candidate, tokens in zip(head, passages, strict=True):
            similarity = query_tokens @ tokens.T if len(tokens) else np.zeros((1, 1))
            candidate.scores["maxsim"] = float(similarity.max(axis=1).mean())
        by_maxsim = sorted(head, key=lambda c: (-c.scores["maxsim"], c.chunk_id))
        fused = reciprocal_rank_fusion(
            [[c.chunk_id for c in head], [c.chunk_id for c in by_maxsim]],
            weights=[1.0, self.weight],
        )
        for candidate in head:
            candidate.scores["rerank"] = fused[candidate.chunk_id]
        return [*by_score(head, "rerank"), *tail]


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


def evaluated_rerankers(configured: str | None) -> list[str]:
    """Rerankers an eval scores: none, and the configured default when it is another.

    Each costs a retriever's worth of queries, so the eval measures what is deployed;
    `LOREHOUSE_RERANK=maxsim` measures late interaction.
    """
    return [NONE] if not configured or configured == NONE else [NONE, configured]


def available_rerankers(configured: str | None) -> list[str]:
    """Names a request may ask for: the offline ones plus a configured litellm model."""
    names = [NONE, MAXSIM]
    if configured and configured not in names:
        names.append(configured)
    return names


def build_reranker(
    name: str, api_base: str | None = None, timeout_seconds: float = 30.0
) -> Reranker:
    """The reranker a name stands for; anything but none and maxsim is a litellm model."""
    if name == NONE:
        return NoReranker()
    if name == MAXSIM:
        from lorehouse.embedding import default_embedder

        return LateInteractionReranker(default_embedder())
    if "/" not in name:
        raise ValueError(f"unknown reranker {name!r}: use none, maxsim or a litellm rerank model")
    return LiteLLMReranker(name, api_base=api_base, timeout_seconds=timeout_seconds)
