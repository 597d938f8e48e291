"""Second-stage rerankers behind one interface: none, late interaction, a litellm rerank model.

No cross-encoder ships as an offline package. Offline, `maxsim` (the default) reorders the
first stage's best candidates by late interaction over the bundled MiniLM's token vectors,
which the embedding stage stores per chunk, so a query reads them instead of encoding its
candidates, which cost many times the rest of a search. A hosted reranker (Cohere, Voyage,
Together, a self-hosted Infinity server...) plugs in through litellm's rerank API when one is
configured. A field-level rank fusion was offered offline and removed: it lowered recall on
every set it was measured on.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from lorehouse.embedding.base import embed_key
from lorehouse.search.ranking import RankingProfile, reciprocal_rank_fusion
from lorehouse.search.tables import IndexNotBuilt
from lorehouse.search.token_vectors import (
    TokenEncoder,
    maxsim_of_packed,
    pack,
    packed_model_name,
)

log = logging.getLogger(__name__)

NONE = "none"
MAXSIM = "maxsim"


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
    """Reorders candidates for a query and records its own score on each.

    `reads` is how many of the first stage's best candidates it needs with their text (None:
    all of them); retrieval reads the stored rows of only those, so a search without a
    reranker reads only the rows it returns.
    """

    name: str
    reads: int | None

    def rerank(
        self, query: str, query_vector: np.ndarray, candidates: list[Candidate]
    ) -> list[Candidate]: ...


def by_score(candidates: list[Candidate], stage: str) -> list[Candidate]:
    """Candidates ordered by one stage's score; ties broken by chunk id for stable output."""
    return sorted(candidates, key=lambda c: (-c.scores.get(stage, 0.0), c.chunk_id))


class NoReranker:
    """Keeps the first stage's order."""

    name = NONE
    reads = 0

    def rerank(
        self, query: str, query_vector: np.ndarray, candidates: list[Candidate]
    ) -> list[Candidate]:
        return candidates


class TokenVectorStore(Protocol):
    """Where late interaction finds passages' token vectors computed at index time."""

    def packed(self, chunk_ids: Sequence[str]) -> dict[str, tuple[str, np.ndarray]]: ...


class LateInteractionReranker:
    """MaxSim over token vectors (ColBERT's late interaction), fused with the first stage.

    A passage's score is the mean, over the query's tokens, of each token's best cosine with
    a token of the passage: every word of the question looks for its own match, which one
    averaged vector per passage blurs (a paraphrase that matches three words of ten). The
    MaxSim order of the first `depth` candidates is fused by reciprocal rank with their
    first-stage order, MaxSim weighing `weight`.

    Passages' token vectors are read from `store` when it holds them for the passage's
    current text; any other passage (an index built without them, a row the embedding stage
    has not reached yet) is encoded here, as it would be without a store.
    """

    name = MAXSIM

    def __init__(
        self,
        encoder: TokenEncoder,
        store: TokenVectorStore | None = None,
        depth: int = RankingProfile.maxsim_depth,
        weight: float = RankingProfile.maxsim_weight,
    ) -> None:
        self.encoder = encoder
        self.store = store
        self.depth = depth
        self.reads = depth
        self.weight = weight
        self.packed_name = packed_model_name(encoder.name)

    def rerank(
        self, query: str, query_vector: np.ndarray, candidates: list[Candidate]
    ) -> list[Candidate]:
        head, tail = candidates[: self.depth], candidates[self.depth :]
        if not head:
            return candidates
        texts = {c.chunk_id: c.row.get("text_embed") or c.row["text_chat"] for c in head}
        stored = self._stored(texts)
        missing = [chunk_id for chunk_id in texts if chunk_id not in stored]
        # Small batches: passages differ in length, and in a large batch every passage is
        # padded to the longest, so the encoder spends much of its time on padding.
        query_tokens, *encoded = self.encoder.token_vectors(
            [query, *(texts[chunk_id] for chunk_id in missing)], batch_size=8
        )
        # Encoded passages are packed as stored ones are, so both score on one scale, and
        # all go into one product in the candidates' order.
        packed = {**stored, **dict(zip(missing, map(pack, encoded), strict=True))}
        maxsim = dict(
            zip(
                texts,
                maxsim_of_packed(
                    query_tokens, [packed[chunk_id] for chunk_id in texts], self.encoder.dimension
                ),
                strict=True,
            )
        )
        for candidate in head:
            candidate.scores["maxsim"] = maxsim[candidate.chunk_id]
        by_maxsim = sorted(head, key=lambda c: (-c.scores["maxsim"], c.chunk_id))
        fused = reciprocal_rank_fusion(
            [[c.chunk_id for c in head], [c.chunk_id for c in by_maxsim]],
            weights=[1.0, self.weight],
        )
        for candidate in head:
            candidate.scores["rerank"] = fused[candidate.chunk_id]
        return [*by_score(head, "rerank"), *tail]

    def _stored(self, texts: dict[str, str]) -> dict[str, np.ndarray]:
        """Stored (packed) token vectors of the passages whose stored text is their current
        text, in the candidates' order.

        Not in the store's order: it returns the rows it had cached first, so a second asking
        fed MaxSim's one matrix product its passages in another order, and a product's last
        bits depend on where a passage sits in it (near-tied passages swapped).
        """
        if self.store is None:
            return {}
        try:
            stored = self.store.packed(list(texts))
        except IndexNotBuilt:
            return {}
        return {
            chunk_id: stored[chunk_id][1]
            for chunk_id, text in texts.items()
            if chunk_id in stored and stored[chunk_id][0] == embed_key(self.packed_name, text)
        }


class LiteLLMReranker:
    """A hosted cross-encoder through litellm.rerank (cohere/rerank-..., voyage/..., ...)."""

    reads = None  # every candidate's text goes to the provider

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

    Each costs a retriever's worth of queries, so the eval measures what is deployed and
    what the first stage alone would give.
    """
    return [NONE] if not configured or configured == NONE else [NONE, configured]


def available_rerankers(configured: str | None) -> list[str]:
    """Names a request may ask for: the offline ones plus a configured litellm model."""
    names = [NONE, MAXSIM]
    if configured and configured not in names:
        names.append(configured)
    return names


def build_reranker(
    name: str,
    api_base: str | None = None,
    timeout_seconds: float = 30.0,
    token_store: TokenVectorStore | None = None,
    encoder: TokenEncoder | None = None,
    ranking: RankingProfile | None = None,
) -> Reranker:
    """The reranker a name stands for; anything but none and maxsim is a litellm model.

    `maxsim` encodes with `encoder`, to the depth and weight of `ranking`; `token_store`
    holds the token vectors it would otherwise compute per query.
    """
    if name == NONE:
        return NoReranker()
    if name == MAXSIM:
        if encoder is None:
            raise ValueError("the maxsim reranker needs a token encoder (the bundled model)")
        ranking = ranking or RankingProfile()
        return LateInteractionReranker(
            encoder, token_store, depth=ranking.maxsim_depth, weight=ranking.maxsim_weight
        )
    if "/" not in name:
        raise ValueError(f"unknown reranker {name!r}: use none, maxsim or a litellm rerank model")
    return LiteLLMReranker(name, api_base=api_base, timeout_seconds=timeout_seconds)
