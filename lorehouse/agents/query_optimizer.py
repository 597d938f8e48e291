"""Query Optimizer: a standalone query (history and relative dates resolved) and sub-queries."""

from __future__ import annotations

import re
from datetime import date
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from lorehouse.llm import LLMClient, LLMFailure

PROMPT_VERSION = "query_optimizer.v1"
#: Conversation turns given to the optimizer; older ones rarely resolve a reference.
HISTORY_TURNS = 6


class Turn(BaseModel):
    """One message of the conversation before the question.

    Strict as every request body is: a field it does not know is a client's mistake that
    would otherwise be dropped unseen, and a turn of whitespace gives the rewriter nothing.
    """

    model_config = ConfigDict(extra="forbid")

    role: Literal["user", "assistant"]
    content: str = Field(min_length=1, max_length=4000)

    @field_validator("content")
    @classmethod
    def _not_blank(cls, content: str) -> str:
        if not content.strip():
            raise ValueError("must contain more than whitespace")
        return content


class OptimizedQuery(BaseModel):
    """What the optimizer returns; bounds keep a rambling model from flooding retrieval."""

    standalone: str = Field(min_length=1, max_length=1000)
    sub_queries: list[str] = Field(min_length=1, max_length=4)

    def queries(self) -> list[str]:
        """The queries to search: the sub-queries, or the standalone query alone."""
        unique = list(dict.fromkeys(q.strip() for q in self.sub_queries if q.strip()))
        return unique or [self.standalone]


def optimize_query(
    client: LLMClient, question: str, history: list[Turn], today: date
) -> OptimizedQuery:
    """Rewrites the question with the LLM; raises LLMFailure when no valid answer comes back."""
    transcript = "\n".join(f"{t.role}: {t.content}" for t in history[-HISTORY_TURNS:])
    answer = client.complete(
        client.prompt(PROMPT_VERSION),
        OptimizedQuery,
        today=today.isoformat(),
        history=transcript,
        question=question,
    )
    value = answer.value
    if any(len(q) > 1000 for q in value.sub_queries):
        raise LLMFailure("a sub-query is longer than 1,000 characters")
    if not history and _kept_share(question, value) < MIN_KEPT_SHARE:
        # Without a conversation there is nothing to resolve: a rewrite that drops most of
        # the question's words has changed the question (small models echo the examples).
        raise LLMFailure(f"the rewrite drifted from the question: {value.queries()}")
    return value


#: Share of the question's content words a rewrite without history must keep.
MIN_KEPT_SHARE = 0.5
_WORD = re.compile(r"[\w-]{3,}")


def _kept_share(question: str, value: OptimizedQuery) -> float:
    asked = {w.casefold() for w in _WORD.findall(question)}
    if not asked:
        return 1.0
    rewritten = {
        w.casefold() for w in _WORD.findall(" ".join([value.standalone, *value.queries()]))
    }
    return len(asked & rewritten) / len(asked)


#: Words that point back at what was asked before ("what about it", "and for them?").
_POINTERS = frozenset(
    [
        "it",
        "its",
        "that",
        "this",
        "those",
        "these",
        "they",
        "them",
        "their",
        "there",
        "he",
        "she",
        "his",
        "her",
        "same",
        "also",
        "else",
    ]
)
_FOLLOW_UP_OPENINGS = ("and ", "what about", "how about", "also ", "or ")
#: A question this short leans on the one before it.
_FOLLOW_UP_MAX_WORDS = 6


def carry_over_offline(question: str, history: list[Turn]) -> str:
    """The query to search without an LLM: the question itself, or, when it reads as a
    follow-up (short, opening with "and"/"what about", or pointing back with "it", "they"...),
    the previous question followed by it, so the earlier subject carries over.

    "And in Toronto?" after "What is the hotel limit per night?" searches both together and
    finds Toronto's hotel limit; the answer is still chosen for the follow-up's own words.
    A question that stands on its own is searched as asked.
    """
    previous = next((t.content for t in reversed(history) if t.role == "user"), None)
    if previous is None:
        return question
    words = re.findall(r"[a-z']+", question.casefold())
    follows = (
        len(words) <= _FOLLOW_UP_MAX_WORDS
        or bool(_POINTERS.intersection(words))
        or question.casefold().lstrip().startswith(_FOLLOW_UP_OPENINGS)
    )
    return f"{previous} {question}" if follows else question
