"""A question with several asks, searched one ask at a time beside the whole question.

"How long do I have to submit an expense, and what happens if it is older than that?" asks
two things that two documents answer. Searched whole, the first document's chunks fill the
top of the ranking and the second document's answer lands far below the hits a reader sees.
Query decomposition usually splits such questions with an LLM; this module does it
offline, from the question's own syntax: a question sentence is cut where a conjunction opens
a new ask ("..., and what ...", "... or is ..."), a comparison is cut into its two sides
("What am I paid on parental leave compared with medical leave?" asks about each leave), and
statements around it ("I'm planning to move abroad.") stay with every ask as its context.

The rankings are then interleaved, not fused by score: each ask's best chunks take turns
with the whole question's, so every ask is represented in the first few hits. Fusing the
same rankings by reciprocal rank lost the handbook dev set's multi-document questions,
because chunks that match the whole question moderately outscore each ask's best answer.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")
_EXHAUSTED = object()

_OPENS_ASK = (
    r"(?:what|how|when|where|who|whom|which|why|is|are|was|were|do|does|did|can|could|will"
    r"|would|should|must|may|has|have|if|whether)"
)
#: ", and what ...", " or is ...", "; how ...": a conjunction (or semicolon) before a word
#: that opens a question.
_ASK_BOUNDARY = re.compile(
    rf"(?:,\s*(?:and|or|but)\s+|\s+(?:and|or|but)\s+|;\s*)(?={_OPENS_ASK}\b)", re.IGNORECASE
)
#: "<ask> compared with <other>?": a question comparing two things, each answered apart.
_COMPARISON = re.compile(
    r"^(?P<ask>.+?)\s+(?:(?:as\s+)?compared\s+(?:with|to)|versus|vs\.?|as\s+opposed\s+to)"
    r"\s+(?P<other>[^,;?]+?)\s*\?$",
    re.IGNORECASE,
)
_DIGITS = re.compile(r"\d+")
_SENTENCE_END = re.compile(r"(?<=[?.!])\s+(?=[A-Z])")
#: An ask shorter than this ("When" of "When and where ...") has no subject of its own.
MIN_ASK_WORDS = 3
#: Hits of the whole question per turn, before each ask's next best hit: the whole
#: question still leads (it matches what all asks share), and each ask has a place within
#: the first 2 + n hits. Of the leads tried on the handbook dev set (1, 2 and 3), 2 found
#: the most multi-document questions, and each found more than the question searched whole.
WHOLE_QUESTION_LEAD = 2
#: Asks searched on their own; the rest are found by the whole question's search only. Each
#: ask is one more search, and a question as long as the API accepts can hold dozens of
#: them. Every dev-set question has one or two; with 8 hits and the lead above, a fifth ask
#: would already miss the first turn.
MAX_ASKS = 4


@dataclass(frozen=True)
class QuestionAsks:
    """The asks of a question, and the statements around them that every ask needs."""

    asks: tuple[str, ...]
    context: str

    def queries(self) -> list[str]:
        """One search query per ask, each prefixed with the question's statements."""
        return [f"{self.context} {ask}".strip() for ask in self.asks]


def compared_sides(ask: str) -> list[str]:
    """The two sides of a comparison, each as the question asked of it, or the ask alone.

    "What am I paid while on parental leave compared with medical leave?" becomes "What am I
    paid while on parental leave" and "What am I paid while on medical leave": the other side
    takes the place of the words it stands against, found by its last word ("leave" and
    "leave", "FY 2023" and "FY 2022"). When no words of the ask line up with it, the question
    stays one ask: a side searched without its question ("medical leave") finds the topic,
    not the answer.
    """
    match = _COMPARISON.match(ask.strip())
    if match is None:
        return [ask]
    first, other = match.group("ask").strip(" ,;"), match.group("other").strip()
    first_words, other_words = first.split(), other.split()
    if len(first_words) < MIN_ASK_WORDS:
        return [ask]
    if len(other_words) >= len(first_words) or not _stands_against(
        first_words[-1], other_words[-1]
    ):
        return [ask]
    return [first, " ".join([*first_words[: -len(other_words)], *other_words])]


def _stands_against(word: str, other: str) -> bool:
    """Whether two closing words name the same kind of thing: the same word, or the same word
    around other numbers ("2023" and "2022", "FY2023" and "FY2022")."""
    word, other = word.strip(".,").casefold(), other.strip(".,").casefold()
    if word == other:
        return True
    numbered = _DIGITS.search(word) and _DIGITS.search(other)
    return bool(numbered) and _DIGITS.sub("", word) == _DIGITS.sub("", other)


def question_asks(question: str) -> QuestionAsks | None:
    """The asks of a question that has at least two (the first MAX_ASKS), or None.

    Only question sentences (ending with "?") are split: a statement ("Men are more
    susceptible ... compared to women.") is one claim however many clauses it has.
    """
    sentences = [s.strip() for s in _SENTENCE_END.split(question.strip()) if s.strip()]
    context = " ".join(s for s in sentences if not s.endswith("?"))
    asks = [
        side
        for sentence in sentences
        if sentence.endswith("?")
        for part in _ASK_BOUNDARY.split(sentence)
        if part.strip(" ,;")
        for side in compared_sides(part.strip(" ,;"))
    ]
    if len(asks) < 2 or any(len(ask.split()) < MIN_ASK_WORDS for ask in asks):
        return None
    return QuestionAsks(tuple(asks[:MAX_ASKS]), context)


def interleave(
    whole: Sequence[T], per_ask: Sequence[Sequence[T]], key: Callable[[T], Hashable], limit: int
) -> list[T]:
    """Up to `limit` items: WHOLE_QUESTION_LEAD of `whole`, then the next of each ask's
    ranking, in turns; an item already taken is skipped (`key` gives its identity)."""
    turns = [iter(whole)] * WHOLE_QUESTION_LEAD + [iter(ranking) for ranking in per_ask]
    taken: list[T] = []
    seen: set[Hashable] = set()
    while len(taken) < limit:
        before = len(taken)
        for turn in turns:
            item = next((item for item in turn if key(item) not in seen), _EXHAUSTED)
            if item is _EXHAUSTED:
                continue
            seen.add(key(item))
            taken.append(item)
            if len(taken) == limit:
                break
        if len(taken) == before:  # every ranking has run out
            break
    return taken
