"""Source Identifier: the few documents most likely to hold the answer, or "all".

Restricting retrieval to the right documents is what lets a large corpus behave like a small
one. The LLM chooses from the caller's documents whose profiles (titles, summaries, FAQs)
best match the question. Without an LLM the step is skipped: a guess from
the profiles alone moved no answer the search did not already find.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field

from lorehouse.llm import LLMClient
from lorehouse.search.filters import access_clause
from lorehouse.search.ranking import reciprocal_rank_fusion
from lorehouse.search.tables import DocumentTable

PROMPT_VERSION = "source_identifier.v1"
PROFILE_COLUMNS = ["doc_id", "title", "summary", "faqs"]


class DocumentProfile(BaseModel):
    """What the identifier knows about a document."""

    doc_id: str
    title: str
    summary: str | None = None
    faqs: list[str] = Field(default_factory=list)
    similarity: float = 0.0


class SourceChoice(BaseModel):
    """The LLM's pick: up to three document ids, or all documents."""

    documents: list[str] = Field(default_factory=list, max_length=3)
    all: bool = False


Sources = list[str] | Literal["all"]


def rank_documents(
    index: DocumentTable,
    query_vector: np.ndarray,
    question: str,
    caller_groups: Sequence[str],
    limit: int,
) -> list[DocumentProfile]:
    """Documents the caller may see, by reciprocal-rank fusion of dense and BM25 similarity."""
    where = access_clause(caller_groups)
    profiles = index.snapshot()  # one version for both rankings
    dense = profiles.vector_search(query_vector, where, limit, PROFILE_COLUMNS)
    lexical = profiles.text_search(question, where, limit, PROFILE_COLUMNS, fields=["profile_text"])
    fused = reciprocal_rank_fusion(
        [[row["doc_id"] for row in dense], [row["doc_id"] for row in lexical]]
    )
    profiles: dict[str, DocumentProfile] = {}
    for row in [*dense, *lexical]:
        if row["doc_id"] not in profiles:
            profiles[row["doc_id"]] = DocumentProfile(
                doc_id=row["doc_id"],
                title=row["title"] or row["doc_id"],
                summary=row["summary"],
                faqs=list(row["faqs"] or []),
            )
    for row in dense:
        profiles[row["doc_id"]].similarity = 1.0 - float(row["_distance"])
    return sorted(profiles.values(), key=lambda p: (-fused[p.doc_id], p.doc_id))


def choose_with_llm(
    client: LLMClient, question: str, candidates: Sequence[DocumentProfile]
) -> Sources:
    """The LLM's choice among `candidates`; ids it invents are dropped."""
    listing = "\n".join(
        f"{p.doc_id}: {p.title} - {(p.summary or '')[:300]} - {' | '.join(p.faqs[:3])}"
        for p in candidates
    )
    answer = client.complete(
        client.prompt(PROMPT_VERSION), SourceChoice, documents=listing, question=question
    )
    known = {p.doc_id for p in candidates}
    chosen = [doc_id for doc_id in answer.value.documents if doc_id in known]
    if answer.value.all or not chosen:
        return "all"
    return chosen
