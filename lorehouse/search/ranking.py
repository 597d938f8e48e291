"""How search ranks: every weight and constant of its legs, their fusion and the late-interaction
reranker, in one frozen profile.

To change the ranking, change a default here (or hand a `Retriever` another profile) and
measure it with `lorehouse eval retrieval` on every dev set: docs/development.md says how.
They are code, not settings: each was chosen on the evaluation sets, a deployment has no
reason to change them, and an eval that tries other values builds a Retriever with its own
profile. Nothing here imports the rest of Lorehouse, so any layer can read a profile.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

#: The constant of reciprocal rank fusion (Cormack et al.): weight / (k + rank). It damps the
#: top ranks so one ranking's first hit cannot outvote agreement among the others.
RRF_K = 60.0


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[str]],
    k: float = RRF_K,
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


@dataclass(frozen=True)
class RankingProfile:
    """The numbers hybrid search ranks by. Frozen: one profile serves every search of a
    retriever, from every thread."""

    #: Weight of the BM25 ranking in hybrid fusion, the vector ranking weighing 1.
    bm25_weight: float = 1.0
    #: Hybrid fusion's k. A smaller k lets a chunk one leg ranks near the top keep its place
    #: against chunks both legs rank middling: the first hit gets better, but the answers read
    #: from the top 8 state fewer facts.
    rrf_k: float = RRF_K
    #: Weight of the enriched-text field (title, summary, keywords, FAQs) in BM25 against the
    #: chunk text's 1. At 1 a short field's match outvotes the passage itself.
    enriched_weight: float = 0.25
    #: Weight of the words of a chunk's file name ("2023 Q1 AAPL.pdf") in BM25 against the
    #: chunk text's 1. Filings name their company and period in the file name, their passages
    #: rarely; at 2 a file's name outvotes its passages.
    file_name_weight: float = 1.0
    #: Weight of a query's question words ("how", "do", "I", "my":
    #: `lorehouse.search.bm25.QUESTION_WORDS`) in BM25 against its content words' 1. At 1
    #: they match FAQ-style passages and prose that asks the same way instead of the passage
    #: that answers.
    question_word_weight: float = 0.25
    #: Sentence-window rows read per vector candidate: several windows of one chunk often
    #: rank together, and a chunk is scored by its closest.
    sentences_per_candidate: int = 4
    #: Below this share of the caller's passages in the question's language, a hybrid search
    #: ranks BM25 on a translation or leaves it out: an English question over German passages
    #: can only match the terms both languages share (commands, names), which rank passages
    #: that name them over the ones that answer. Any share between the few stray passages a
    #: corpus holds in another language and a real second language does the same.
    cross_lingual_share: float = 0.1
    #: Candidates late interaction (`maxsim`) reorders: the first stage's best ones, the rest
    #: keep their order behind them. Deeper or heavier gains on the dev sets and loses on
    #: SciFact, whose questions the tuning never saw.
    maxsim_depth: int = 20
    #: Weight of the MaxSim ranking against the first stage's 1 when the two are fused.
    maxsim_weight: float = 1.0

    def __post_init__(self) -> None:
        weights = {
            "bm25_weight": self.bm25_weight,
            "enriched_weight": self.enriched_weight,
            "file_name_weight": self.file_name_weight,
            "question_word_weight": self.question_word_weight,
            "maxsim_weight": self.maxsim_weight,
        }
        negative = [name for name, value in weights.items() if value < 0]
        if negative:
            raise ValueError(f"ranking weights cannot be negative: {', '.join(negative)}")
        if self.rrf_k <= 0:
            raise ValueError("rrf_k must be positive: rank 1 would weigh without bound")
        if self.sentences_per_candidate < 1 or self.maxsim_depth < 1:
            raise ValueError("sentences_per_candidate and maxsim_depth must be at least 1")
        if not 0 <= self.cross_lingual_share <= 1:
            raise ValueError("cross_lingual_share is a share, between 0 and 1")

    def fuse(self, vector: Sequence[str], bm25: Sequence[str]) -> dict[str, float]:
        """Hybrid search's first stage: the vector and BM25 rankings (ids, best first) fused."""
        return reciprocal_rank_fusion([vector, bm25], k=self.rrf_k, weights=[1.0, self.bm25_weight])
