"""The question, read once: its words, the kind of fact it asks for, the section it names
and its asks.

Every step of the extractive answer (reading the units, the lead's signals, a table row's
sentence) asks the same things of the question. `read_question` answers them once per
question text and keeps the answer, so a question is analysed in one place, once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from lorehouse.agents.extractive.lead import AskedKind, asked_kind
from lorehouse.search.asks import QuestionAsks, question_asks
from lorehouse.search.bm25 import Analyzer

#: How the extractive answer reads words: BM25's English analyzer (stop words dropped,
#: stemmed), so "claims" in a question meets "claim" in a passage.
ANALYZER = Analyzer()

#: Questions kept read: an ask reads its question in several steps, and a burst of asks
#: repeats a few questions.
QUESTIONS_KEPT = 256

_SAY_ABOUT = re.compile(
    r"\b(?:say|says|said|tell me|write|writes)\s+about\s+(?:the\s+)?[\"“']?(.+?)[\"”']?\s*\??$",
    re.I,
)


def asked_section(question: str) -> str:
    """The section a question asks about by name ("What does X say about Sick Leave?"), in
    lower case; "" when it names none."""
    match = _SAY_ABOUT.search(question.strip())
    return match.group(1).strip().lower() if match else ""


@dataclass(frozen=True)
class AskedQuestion:
    """What the extractive answer reads of a question."""

    #: Its analyzed words (ANALYZER.terms).
    terms: frozenset[str]
    #: The kind of fact it asks for (`lead.asked_kind`).
    kind: AskedKind
    #: The section it names ("" for none).
    section: str
    #: Its asks, when it has several (`lorehouse.search.asks`).
    asks: QuestionAsks | None


@lru_cache(maxsize=QUESTIONS_KEPT)
def read_question(question: str) -> AskedQuestion:
    """`question` read once (kept: the same text is read the same way)."""
    return AskedQuestion(
        terms=frozenset(ANALYZER.terms(question)),
        kind=asked_kind(question),
        section=asked_section(question),
        asks=question_asks(question),
    )
