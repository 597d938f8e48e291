"""The legs of a search: each ranks chunk ids of one snapshot by one kind of match.

A search runs the legs its mode names, fuses their rankings when there are two, and reranks.
Each leg is a small object with the query it ranks for already bound, so the retriever asks
every leg the same way (`rank(chunks, where, depth)`) and a leg it leaves out (a failed query
embedding, a question in a language almost none of the caller's passages are in) is simply
not in the list, with a warning saying why.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from lorehouse.search.snapshot import TableSnapshot

#: (chunk id, score), best first.
Ranking = list[tuple[str, float]]


class Leg(Protocol):
    """One first-stage ranking of the chunks a caller may read."""

    #: The score's name in a hit's scores and the stage's in the search timings.
    name: str

    def rank(self, chunks: TableSnapshot, where: str, depth: int) -> Ranking:
        """The `depth` best chunk ids under `where` (filters and access), best first. Rows
        are read later, for the hits shown only."""
        ...


@dataclass(frozen=True)
class VectorLeg:
    """The chunks closest to the query in meaning, each by its own vector or its closest
    sentence window, whichever is closer.

    A question about one sentence of a long chunk matches that sentence far better than the
    chunk's average. The windows table copies the chunks' access and filter columns, so both
    searches apply the same predicate; an index built before sentence vectors existed is
    searched by chunk vectors alone (`windows` gives None).
    """

    query_vector: np.ndarray
    #: The sentence windows' snapshot, asked for while the leg ranks (its first load is
    #: this leg's time), or None when the index has none.
    windows: Callable[[], TableSnapshot | None]
    #: Windows ranked per chunk candidate (RankingProfile.sentences_per_candidate): a chunk's
    #: windows often rank together.
    windows_per_candidate: int
    name: str = "vector"

    def rank(self, chunks: TableSnapshot, where: str, depth: int) -> Ranking:
        cosine = dict(chunks.vector_ranking(self.query_vector, where, depth))
        table = self.windows()
        windows = (
            []
            if table is None
            else table.vector_ranking(
                self.query_vector, where, depth * self.windows_per_candidate, "chunk_id"
            )
        )
        # Best first: a chunk's first window is its closest.
        for chunk_id, value in windows:
            if value > cosine.get(chunk_id, -1.0):
                cosine[chunk_id] = value
        best = sorted(cosine, key=lambda chunk_id: (-cosine[chunk_id], chunk_id))[:depth]
        return [(chunk_id, cosine[chunk_id]) for chunk_id in best]


@dataclass(frozen=True)
class KeywordLeg:
    """BM25 over the chunk text and its weighted fields, with term statistics of what the
    caller may read (`scope`), whatever the filters narrow to."""

    #: The words ranked: the question, or its translation on a cross-lingual search.
    text: str
    #: Field -> weight (the chunk text, what enrichment wrote about it, the file name).
    fields: Mapping[str, float]
    scope: str
    question_word_weight: float
    name: str = "bm25"

    def rank(self, chunks: TableSnapshot, where: str, depth: int) -> Ranking:
        return chunks.text_ranking(
            self.text,
            where,
            depth,
            fields=dict(self.fields),
            scope=self.scope,
            question_word_weight=self.question_word_weight,
        )
