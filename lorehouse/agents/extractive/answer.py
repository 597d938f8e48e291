"""The extractive answer: the lead and the sentences that support it, within a word budget.

Without an LLM the answer is made of the context sentences that best answer the question
(similar, sharing its rare words, holding the number or name it asks for), each with its
citation, and "not found" when none is similar enough. The lead is asserted only when the
assertion model gives it a fair chance; otherwise the closest passages are shown.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from lorehouse.agents.assertion import AssertionModel
from lorehouse.agents.citations import DraftAnswer, numbered_by_use
from lorehouse.agents.extractive.excerpts import excerpts_of
from lorehouse.agents.extractive.question import read_question
from lorehouse.agents.extractive.reading import ContextReading, embedded, lead_signals, read_context
from lorehouse.agents.extractive.units import Unit, row_sentence
from lorehouse.agents.replies import not_found, passages_only
from lorehouse.embedding.base import Embedder, VectorCache
from lorehouse.search.asks import QuestionAsks
from lorehouse.search.hits import SearchHit

#: After the best sentence, a sentence longer than UNDISCOUNTED_WORDS competes with its score
#: divided by (words / UNDISCOUNTED_WORDS) ** LENGTH_DISCOUNT: the greedy rule of budgeted
#: extractive summarization (Lin and Bilmes, 2010), so one long sentence does not spend the
#: word budget that two short ones holding more facts would fill. Chosen by 5-fold
#: cross-validation over both dev sets.
LENGTH_DISCOUNT = 0.2


UNDISCOUNTED_WORDS = 20


def _statements_first(units: Sequence[Unit], order: np.ndarray) -> list[int]:
    """`order` with questions and lead-ins last, each group in its order.

    A question or a lead-in ("Who gets a background check?", "Renewals:") resembles the
    question most and answers nothing: statements go first, those only when nothing else.
    """
    return sorted(
        (int(index) for index in order),
        key=lambda index: units[index].is_question or units[index].text.rstrip().endswith(":"),
    )


def _ask_openers(
    embedder: Embedder, asks: QuestionAsks, chosen: Sequence[Unit], kept: VectorCache | None
) -> list[Unit]:
    """For each ask, in the order asked, the chosen sentence closest to it.

    The answer to "Who approves my expense report, and how long does reimbursement take?"
    then opens with the approver and the delay, each found in its own passage, before the
    other sentences follow in the order the context presents them.
    """
    texts = [*asks.queries(), *(unit.text for unit in chosen)]
    vectors = embedded(embedder, texts, kept)
    closeness = vectors[len(asks.asks) :] @ vectors[: len(asks.asks)].T
    return [chosen[int(row)] for row in np.argmax(closeness, axis=0)]


def answer_extractively(
    embedder: Embedder,
    question: str,
    hits: Sequence[SearchHit],
    min_similarity: float,
    max_words: int = 100,
    max_sentences: int = 6,
    kept_vectors: VectorCache | None = None,
    assertion: tuple[AssertionModel, float] | None = None,
    passages_min_similarity: float | None = None,
) -> DraftAnswer:
    """A lead that states the asked fact, the excerpts it rests on, or "not found"; with
    `assertion` (a model and its threshold), the closest passages alone, saying so, when the
    lead is not likely enough to answer (`lorehouse.agents.assertion`).

    `max_words` and `max_sentences` are a budget per ask: "How do my options vest, and how
    long is the exercise window?" gets twice the words of a question with one ask, so the
    second ask is answered, not squeezed out by the first one's sentences.

    A sentence scores by its similarity to the question (read alone or under its section's
    heading, whichever is closer), the question's words it contains and whether it holds what
    is asked (a number for "how much", a name for "who"). The lead is the statement scoring
    best once the asked kind of fact counts too (`lead.asked_kind`: a duration for "how long",
    a role for "who approves") and, for a question carrying a number, whether the unit's range
    holds it ("EUR 3,000" against "EUR 2,000.01 to EUR 5,000"); with several asks, each ask's
    closest chosen sentence leads, at most two. The other sentences are chosen as before:
    each must add a fact (a number or a name) not yet stated, within `max_words`, a long one
    competing with a score discounted by its length; a row whose range excludes the
    question's number is left out. They are shown as excerpts, one per passage, each sentence
    the answer rests on marked between its neighbours. The answer declines when no sentence
    of the context is similar enough (`min_similarity`). `kept_vectors` keeps the sentences'
    vectors for the next answers reading the same passages.
    """
    reading = read_context(embedder, question, hits, kept_vectors)
    floor = min_similarity if passages_min_similarity is None else passages_min_similarity
    if reading is None or reading.best_similarity < min(floor, min_similarity):
        return DraftAnswer(not_found(question), [], answerable=False)
    # Close enough to show, not to assert: "What should I do if I lose my laptop?" against
    # a "Lost devices" section reads between the two bars, an off-topic question below both.
    # Declining there hid the passage a person needed; the passages are shown, nothing is
    # asserted.
    too_far = reading.best_similarity < min_similarity
    units, scores, fits = reading.units, reading.scores, reading.fits
    lead_scores = reading.lead_scores
    asks = read_question(question).asks
    if asks is not None:
        max_words *= len(asks.asks)
        max_sentences *= len(asks.asks)
    chosen: list[Unit] = []
    stated: set[str] = set()
    words = 0
    lengths = np.array([len(unit.text.split()) for unit in units])
    per_budget = scores / np.maximum(1.0, lengths / UNDISCOUNTED_WORDS) ** LENGTH_DISCOUNT
    best_first = _statements_first(units, np.argsort(-lead_scores, kind="stable"))[0]
    order = [
        best_first,
        *(
            index
            for index in _statements_first(units, np.argsort(-per_budget, kind="stable"))
            if index != best_first and fits[index] >= 0
        ),
    ]
    for index in order:
        unit = units[index]
        length = int(lengths[index])
        # A question of the source ("Q: What if I need additional support?") answers
        # nothing; it may open an answer only when the context holds no statement at all.
        if chosen and (unit.is_question or not unit.facts - stated or words + length > max_words):
            continue
        chosen.append(unit)
        stated |= unit.facts
        words += length
        if len(chosen) == max_sentences:
            break
    lead = [chosen[0]]
    if asks is not None and len(chosen) > 1:
        lead = list(dict.fromkeys([*_ask_openers(embedder, asks, chosen, kept_vectors), *lead]))
        lead = lead[:MAX_LEAD_UNITS]
    elif chosen[0] is units[best_first]:
        lead = _parallel_group(question, reading, best_first, hits)
        if len(lead) == 1:
            lead = _with_the_rule_before(reading, best_first)
    signals = lead_signals(question, reading, best_first, hits)
    confidence = None if assertion is None else assertion[0].probability(signals)
    bar = None if assertion is None else assertion[1]
    # A lead under the section the question asks about is asserted whatever its chance,
    # unless the bar is 1: a deployment that asserts nothing.
    asserting = not too_far and (
        bar is None or confidence >= bar or (signals.heading_asks and bar < 1.0)  # type: ignore[operator]
    )
    excerpts = excerpts_of(units, lead, chosen, _supporting(reading, lead, chosen, asserting))
    cited = list(dict.fromkeys([*(u.passage for u in lead), *(e.passage for e in excerpts)]))
    if not asserting:
        # Not sure the lead answers: the passages speak for themselves, each with its best
        # sentence marked, and the answer says it asserts nothing.
        text = passages_only(question) + " " + " ".join(f"[{passage}]" for passage in cited)
        because = (
            f"no sentence is similar enough to the question ({reading.best_similarity:.2f})"
            if too_far
            else "its chance of answering is under the bar"
        )
        draft = DraftAnswer(
            text, cited, True, excerpts=excerpts, asserted=False, unasserted_because=because
        )
    else:
        # One citation after a run of units from one passage (the items of a list).
        said = [row_sentence(question, unit.cells) or unit.text for unit in lead]
        text = " ".join(
            words
            if following is not None and following.passage == unit.passage
            else f"{words} [{unit.passage}]"
            for words, unit, following in zip(said, lead, [*lead[1:], None], strict=True)
        )
        draft = DraftAnswer(text, cited, answerable=True, excerpts=excerpts)
    return numbered_by_use(replace(draft, signals=signals, confidence=confidence))


#: A lead states one fact; with two asks ("who approves it, and how long does it take?"), two.
MAX_LEAD_UNITS = 2


#: A labelled item of a list ("Secondary caregivers: 6 weeks at full pay."): a short label,
#: a colon, its value.
_LABELLED = re.compile(r"^[^:;.]{1,48}:\s+\S")


#: Items of one list a lead takes at most, its own included.
MAX_GROUP_UNITS = 4


_QUESTION_WORD = re.compile(r"[\w'-]+")


def _parallel_group(
    question: str, reading: ContextReading, best: int, hits: Sequence[SearchHit]
) -> list[Unit]:
    """The lead unit with the items of its list beside it that answer the same way.

    "How many weeks of parental leave do I get?" is answered by a list of two items, one per
    caregiver; leading with one of them, the better-scoring "Secondary caregivers: 6 weeks",
    told half the answer. When the lead is a labelled item ("Label: value") stating the kind
    of fact asked, its neighbours in the same list that are labelled items stating it too
    lead with it, in the list's order. Not when the question names what the lead holds ("...
    in Paris?": the Paris item alone answers), nor in a table (its rows are records, not
    parts of one answer), nor for an item whose range excludes the question's number.
    """
    units = reading.units
    lead = units[best]
    if hits[lead.passage - 1].is_table or not (_LABELLED.match(lead.text) and reading.states[best]):
        return [lead]
    words = _QUESTION_WORD.findall(question)
    named = {w.lower() for i, w in enumerate(words) if i and w[0].isupper() and w != "I"}
    if named & {w.lower() for w in _QUESTION_WORD.findall(lead.text)}:
        return [lead]
    by_place = {(u.passage, u.part, u.order): index for index, u in enumerate(units)}

    def parallel(index: int | None) -> bool:
        return (
            index is not None
            and bool(_LABELLED.match(units[index].text))
            and bool(reading.states[index])
            and reading.fits[index] >= 0
            and not units[index].is_question
        )

    group = [best]
    for step in (-1, 1):
        order = lead.order + step
        while len(group) < MAX_GROUP_UNITS:
            index = by_place.get((lead.passage, lead.part, order))
            if not parallel(index):
                break
            group.append(index)  # type: ignore[arg-type]
            order += step
    return [units[index] for index in sorted(group, key=lambda i: units[i].order)]


#: How close (in lead score) the sentence before the lead must come to lead with it.
RULE_TIE = 0.08


#: Words a lead of a rule and its consequence may take together.
RULE_WORDS = 45


def _with_the_rule_before(reading: ContextReading, best: int) -> list[Unit]:
    """The lead, with the sentence before it when that one states the asked kind of fact
    too and scores nearly as well.

    "How long do I have to submit an expense claim?" led with "Claims submitted more than
    90 days after the expense are rejected ...": the consequence, scored a little above the
    rule it follows, "Submit claims ... within 30 days of the expense". A section states a
    rule, then its exceptions; when both answer about equally, the reader gets both, in the
    document's order.
    """
    units = reading.units
    lead = units[best]
    before = best - 1
    if before < 0 or not reading.states[best]:
        return [lead]
    previous = units[before]
    if (
        (previous.passage, previous.part) != (lead.passage, lead.part)
        or previous.cells
        or lead.cells
        or _LABELLED.match(previous.text)  # a list's items: `_parallel_group` decides
        or _LABELLED.match(lead.text)
        or previous.is_question
        or not reading.states[before]
        or reading.fits[before] < 0
        or reading.lead_scores[best] - reading.lead_scores[before] > RULE_TIE
        or len(previous.text.split()) + len(lead.text.split()) > RULE_WORDS
    ):
        return [lead]
    return [previous, lead]


def _supporting(
    reading: ContextReading, lead: Sequence[Unit], chosen: Sequence[Unit], asserted: bool
) -> set[tuple[int, int]]:
    """The units an excerpt marks as supporting, by (passage, order).

    An asserted lead is supported by its own units and by chosen units of another passage
    stating a quantity it states (a second source with the same amount); a chosen sentence
    about something else is shown as context, not marked: marking a sick-leave sentence
    beside an expense-claim lead told the reader it backed the answer. Without an asserted
    lead, each passage's best unit is marked: the sentence that would have led from it.
    """
    if asserted:
        numbers = frozenset().union(*(_quantities(unit.text) for unit in lead))
        own = {unit.passage for unit in lead}
        # Beside the lead, only another source stating its quantity: a neighbouring row of
        # the lead's own table shares its bounds ("EUR 5,000") and its city, and backs
        # nothing; "6 months of service" does not back "6 weeks at full pay".
        seconds = [u for u in chosen if u.passage not in own and _quantities(u.text) & numbers]
        return {(unit.passage, unit.order) for unit in [*lead, *seconds]}
    score = {
        (u.passage, u.order): float(s)
        for u, s in zip(reading.units, reading.lead_scores, strict=True)
    }
    best: dict[int, Unit] = {}
    for unit in chosen:
        held = best.get(unit.passage)
        if held is None or score[(unit.passage, unit.order)] > score[(held.passage, held.order)]:
            best[unit.passage] = unit
    return {(unit.passage, unit.order) for unit in best.values()}


_QUANTITY = re.compile(r"(\S+\s+)?(\d[\d,.]*%?)(\s+[^\s\d]+)?")


def _quantities(text: str) -> frozenset[str]:
    """A text's numbers each with the word it counts ("6 weeks", "EUR 5,000"), lower case."""
    found = set()
    for before, number, after in _QUANTITY.findall(text.lower()):
        number = number.rstrip(".,")
        if after.strip(" .,;:"):
            found.add(f"{number} {after.strip(' .,;:')}")
        if before.strip(" .,;:"):
            found.add(f"{before.strip(' .,;:')} {number}")
    return frozenset(found)
