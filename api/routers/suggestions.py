"""GET /v1/suggestions: questions to start from, drawn from the documents the caller may read.

The chat page offers them before the first question, so a reader sees what the documents
cover. They come from the corpus itself, never from another reader's questions: the questions
enrichment wrote for the chunks (with an LLM), the headings a document phrases as questions
(an FAQ's), and otherwise a question about one of a document's sections.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from api.deps import CallerDep, ServiceDep
from api.openapi import NOT_READY, UNAUTHORIZED

router = APIRouter(prefix="/v1")

#: Questions taken from one document at most: the suggestions cover several documents.
QUESTIONS_PER_DOCUMENT = 3
#: Headings that name no subject a reader asks about.
_GENERIC_HEADINGS = frozenset(
    {
        "about",
        "appendix",
        "contact",
        "contacts",
        "contents",
        "document history",
        "glossary",
        "introduction",
        "links",
        "overview",
        "purpose",
        "purpose and scope",
        "references",
        "revision history",
        "scope",
        "summary",
        "table of contents",
        "version history",
    }
)
#: A heading's section number: "3.2 ", "2. ", "IV. ".
_NUMBERING = re.compile(r"^\s*(?:\d+(?:\.\d+)*\.?|[IVXLC]+\.)\s+")
_WORDS = re.compile(r"\w+")

SuggestionKind = Literal["faq", "heading", "section"]


class Suggestion(BaseModel):
    question: str
    kind: SuggestionKind = Field(
        description="`faq`: a question enrichment wrote for a passage; `heading`: a heading "
        "the document phrases as a question; `section`: a question about one of its sections."
    )
    doc_id: str
    title: str
    rel_path: str


class Suggestions(BaseModel):
    """GET /v1/suggestions: questions the caller's documents answer, a few per document."""

    questions: list[Suggestion]


@router.get(
    "/suggestions",
    summary="Questions to start from",
    response_model=Suggestions,
    tags=["answers"],
    responses={**UNAUTHORIZED, **NOT_READY},
)
def suggestions(
    service: ServiceDep,
    caller: CallerDep,
    limit: Annotated[int, Query(ge=1, le=50, description="Questions at most.")] = 6,
) -> Suggestions:
    """Questions drawn from the documents the caller may read: their FAQs and the headings
    they phrase as questions first, then questions about their sections, taking a few from
    each document in turn so that the list covers several of them."""
    rows = service.feature_store().question_candidates(caller.groups, 4 * QUESTIONS_PER_DOCUMENT)
    return Suggestions(questions=_pick(rows, limit))


def _pick(rows: list[dict], limit: int) -> list[Suggestion]:
    """Up to `limit` suggestions, round by round: each document's first question, then its
    second (or a question about a section of a document without any), and so on."""
    per_document: dict[str, list[tuple[int, Suggestion]]] = {}
    for row in rows:
        taken = per_document.setdefault(row["doc_id"], [])
        kinds = {s.kind for _, s in taken}
        if len(taken) >= QUESTIONS_PER_DOCUMENT or (row["kind"] == 2 and "section" in kinds):
            continue
        suggestion = _suggestion(row)
        if suggestion is None or any(s.question == suggestion.question for _, s in taken):
            continue
        # A question about a section ranks with the second questions of other documents.
        rank = len(taken) + (1 if suggestion.kind == "section" else 0)
        taken.append((rank, suggestion))
    order = {doc_id: index for index, doc_id in enumerate(per_document)}
    ranked = sorted(
        (rank, suggestion.kind == "section", order[doc_id], n, suggestion)
        for doc_id, taken in per_document.items()
        for n, (rank, suggestion) in enumerate(taken)
    )
    return [item[-1] for item in ranked[:limit]]


def _suggestion(row: dict) -> Suggestion | None:
    text = " ".join(str(row["text"]).split())
    title = str(row["title"])
    base = {"doc_id": row["doc_id"], "title": title, "rel_path": row["rel_path"]}
    if row["kind"] == 0:
        return Suggestion(question=text, kind="faq", **base)
    if row["kind"] == 1:
        question = _NUMBERING.sub("", text)
        # "Am I eligible?" needs its section to mean anything: a question names its subject.
        if len(_WORDS.findall(question)) < 4:
            return None
        return Suggestion(question=question, kind="heading", **base)
    heading = _NUMBERING.sub("", text).strip().rstrip(":.")
    words = _WORDS.findall(heading.lower())
    if (
        not words
        or len(words) > 8
        or heading.lower() in _GENERIC_HEADINGS
        or words[0] == "about"
        or heading.lower() in title.lower()
    ):
        return None
    return Suggestion(question=f"What does “{title}” say about {heading}?", kind="section", **base)
