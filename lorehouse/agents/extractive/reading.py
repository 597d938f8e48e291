"""Reading the context: each unit scored against the question.

Similarity to the question and to each of its asks, the rare words it shares with the
question, whether it holds the kind of fact asked (an amount, a duration, a name) and whether
its section is the one asked about: one reading per question, which the lead, the
supporting sentences and the assertion model all use.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from lorehouse.agents.assertion import LeadSignals
from lorehouse.agents.extractive.lead import (
    NAME,
    AskedKind,
    asked_unit,
    range_fit,
    states_kind,
)
from lorehouse.agents.extractive.question import ANALYZER, read_question
from lorehouse.agents.extractive.units import Unit, context_units, question_names, word_in
from lorehouse.embedding.base import Embedder, VectorCache
from lorehouse.search.hits import SearchHit

#: Questions that ask for an amount, a limit, a duration or a date: their answer holds a number.
_ASKS_NUMBER = re.compile(
    r"\b(?:how (?:many|much|long|often|far|old|soon|early|late)|when|deadline|by when"
    r"|maximum|minimum|max|min|limit|budget|cost|amount|number of|percent(?:age)?|rate|price"
    r"|fee|allowance|stipend|what (?:age|size|year|date|time|day|month))\b",
    re.IGNORECASE,
)


#: Questions that ask for a person, team, tool or channel: their answer names it.
_ASKS_NAME = re.compile(
    r"\b(?:who|whom|whose|which (?:team|person|group|channel|tool|app|system)|contact"
    r"|reach out|ask\w*|approv\w*)\b",
    re.IGNORECASE,
)


_DIGIT = re.compile(r"\d")


#: Weight of the question's words found in a sentence (IDF-weighted share) beside the
#: embedding similarity: exact terms ("Airbase", "I-9") matter more than a small model knows.
LEXICAL_WEIGHT = 0.3


#: Bonus for a sentence that holds what the question asks for (a number, a name).
SLOT_WEIGHT = 0.15


def _lexical_overlap(question: str, units: Sequence[Unit]) -> np.ndarray:
    """Per unit, the share of the question's words it contains, rare words weighing more.

    Rarity is counted over the context itself (BM25's IDF), so a word every passage repeats
    ("Sourcegraph", "teammates") decides nothing.
    """
    question_terms = set(read_question(question).terms)
    unit_terms = [set(ANALYZER.terms(unit.text)) for unit in units]
    total = len(units)
    weights = {}
    for term in question_terms:
        containing = sum(term in terms for terms in unit_terms)
        weights[term] = math.log(1 + (total - containing + 0.5) / (containing + 0.5))
    mass = sum(weights.values()) or 1.0
    return np.array(
        [sum(weights[term] for term in question_terms & terms) / mass for terms in unit_terms]
    )


def _holds_what_is_asked(question: str, units: Sequence[Unit]) -> np.ndarray:
    """1 for a unit holding the kind of fact the question asks for (a number, a name)."""
    wants_number = bool(_ASKS_NUMBER.search(question))
    wants_name = bool(_ASKS_NAME.search(question))
    return np.array(
        [
            float(
                (wants_number and bool(_DIGIT.search(unit.text)))
                or (wants_name and bool(NAME.search(unit.text)))
            )
            for unit in units
        ]
    )


def _lead_ins(units: Sequence[Unit]) -> list[str | None]:
    """Per unit, the lead-in ("The SLA for remediation depends on the severity:") whose list
    it belongs to, or None.

    A list item after a lead-in often states its fact without its subject ("Critical: 3
    days"). It belongs to the last lead-in of its passage until an item ends a sentence.
    """
    leads: list[str | None] = []
    current: str | None = None
    for index, unit in enumerate(units):
        previous = units[index - 1] if index else None
        if previous is None or (unit.passage, unit.part) != (previous.passage, previous.part):
            current = None
        text = unit.text.rstrip()
        if text.endswith(":"):
            leads.append(None)
            current = text
            continue
        leads.append(current)
        # An item that ends a sentence ends the list the lead-in opened.
        if text.endswith((".", "!", "?")):
            current = None
    return leads


def _similarities(
    embedder: Embedder,
    question: str,
    units: Sequence[Unit],
    kept: VectorCache | None = None,
) -> np.ndarray:
    """Per unit, its cosine with the question, read alone, under its section's heading or
    (a list item) under its lead-in, whichever is closest.

    A sentence often leaves its subject to the heading above it: "Sourcegraph will provide
    reimbursement for dependents-care costs while you are away" sits under "Traveling with
    dependents" (the question asks about a babysitter), "The limit is $250." under its
    allowance. Read under the heading as well, the extractive answers on both dev sets stated
    more of the reference's key facts; under the heading alone they gained less and declined
    more answerable questions (docs/experiments/history-answers-without-a-judge.md). A list
    item alone does not say what it lists either, so it is also read under its lead-in ("The
    SLA for remediation depends on the severity: Critical: 3 days").
    """
    framed = [
        (index, f"{unit.heading[-1]}: {unit.text}")
        for index, unit in enumerate(units)
        if unit.heading and unit.heading[-1].strip()
    ]
    framed += [
        (index, f"{lead} {unit.text}")
        for index, (unit, lead) in enumerate(zip(units, _lead_ins(units), strict=True))
        if lead
    ]
    texts = [question, *(unit.text for unit in units), *(t for _, t in framed)]
    vectors = embedded(embedder, texts, kept)
    best = vectors[1 : 1 + len(units)] @ vectors[0]
    # A unit read two ways (under its heading and its lead-in) keeps the closer reading.
    np.maximum.at(best, [index for index, _ in framed], vectors[1 + len(units) :] @ vectors[0])
    return best


def embedded(embedder: Embedder, texts: list[str], kept: VectorCache | None) -> np.ndarray:
    """The texts' vectors, through `kept` when the caller keeps them across answers."""
    return kept.embed(embedder, texts) if kept is not None else embedder.embed(texts)


@dataclass
class ContextReading:
    """The context's sentences and rows as the extractive answer weighs them."""

    units: list[Unit]
    similarities: np.ndarray
    scores: np.ndarray
    fits: np.ndarray
    lead_scores: np.ndarray
    overlaps: np.ndarray
    states: np.ndarray

    @property
    def best_similarity(self) -> float:
        return float(np.max(self.similarities))


def read_context(
    embedder: Embedder,
    question: str,
    hits: Sequence[SearchHit],
    kept_vectors: VectorCache | None = None,
) -> ContextReading | None:
    """Every unit of the context scored for the question; None for a context without text."""
    units = context_units(hits)
    if not units:
        return None
    similarities = _similarities(embedder, question, units, kept_vectors)
    overlaps = _lexical_overlap(question, units)
    scores = (
        similarities
        + LEXICAL_WEIGHT * overlaps
        + SLOT_WEIGHT * _holds_what_is_asked(question, units)
    )
    kind = read_question(question).kind
    unit_of_time = asked_unit(question)
    states = np.array([states_kind(unit.text, kind, unit_of_time) for unit in units])
    fits = np.array([range_fit(question, unit.text) for unit in units])
    lead_scores = scores + KIND_WEIGHT * states + RANGE_WEIGHT * fits
    section = read_question(question).section
    if section:
        # "What does the handbook say about Trip Approval?" asks what that section says:
        # its own sentences lead, not the document's opening line that names its subject.
        lead_scores = lead_scores + SECTION_WEIGHT * np.array(
            [_under_section(unit.heading, section) for unit in units]
        )
    return ContextReading(units, similarities, scores, fits, lead_scores, overlaps, states)


def lead_signals(
    question: str, reading: ContextReading, lead: int, hits: Sequence[SearchHit]
) -> LeadSignals:
    """The signs, read off unit `lead` of `reading`, of whether it answers `question`."""
    unit = reading.units[lead]
    elsewhere = [i for i, other in enumerate(reading.units) if other.passage != unit.passage]
    others = [float(reading.lead_scores[index]) for index in elsewhere]
    runner_up = max(elsewhere, key=lambda index: reading.lead_scores[index], default=None)
    names = question_names(question)
    hit = hits[unit.passage - 1]
    where = " ".join([unit.text, *unit.heading, hit.title or "", hit.rel_path])
    found = sum(word_in(name, where) for name in names)
    section = read_question(question).section
    headings = [Unit(u.passage, u.order, " ".join(u.heading)) for u in reading.units]
    earlier = [u for u in reading.units[:lead] if (u.passage, u.part) == (unit.passage, unit.part)]
    return LeadSignals(
        similarity=float(reading.similarities[lead]),
        margin=float(reading.lead_scores[lead]) - max(others, default=0.0),
        overlap=float(reading.overlaps[lead]),
        kind_asked=read_question(question).kind is not AskedKind.OTHER,
        kind_stated=bool(reading.states[lead]),
        names_found=found / len(names) if names else 1.0,
        names_asked=bool(names),
        passage_rank=unit.passage,
        is_row=bool(hit.is_table),
        corroborated=runner_up is not None and bool(unit.facts & reading.units[runner_up].facts),
        heading_overlap=(
            1.0
            if _under_section(unit.heading, section)
            else float(_lexical_overlap(question, headings)[lead])
        ),
        opens_section=not any(u.heading == unit.heading for u in earlier),
        heading_asks=_heading_asks(question, unit.heading, section) and found == len(names),
    )


def _heading_asks(question: str, heading: tuple[str, ...], section: str) -> bool:
    """Whether `heading` is the section `question` asks about: the section a "What does X
    say about Y?" question names, or a heading phrased as a question (an FAQ's) that the
    question asks, every word of it, perhaps with particulars ("How many weeks of parental
    leave do primary caregivers get?" under "How many weeks of parental leave do I get?")."""
    if not heading:
        return False
    if _under_section(heading, section):
        return True
    # A heading naming a topic ("Laptop refresh") is not a question: the search words
    # "laptop refresh" find its section, not necessarily a sentence answering anything.
    own = heading[-1].strip()
    asked = set(ANALYZER.terms(own))
    return own.endswith("?") and bool(asked) and asked <= read_question(question).terms


#: Bonus for a unit stating the asked kind of fact, and for one whose range holds the
#: question's number (a penalty when its ranges do not): the lead must state the fact.
KIND_WEIGHT = 0.1


RANGE_WEIGHT = 0.3


#: Bonus for a unit under the section a question asks about by name ("... say about X?").
SECTION_WEIGHT = 0.5


def _under_section(heading: Sequence[str], section: str) -> bool:
    """Whether a unit under `heading` is in the section a question asks about ("" for none)."""
    return bool(section) and section in " > ".join(heading).lower()
