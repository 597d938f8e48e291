"""Answerer: the answer with inline [n] citations, from an LLM or extracted from the context.

The LLM is told to cite and to say when the passages do not hold the answer; its reply is
checked (cites only passages it was given, cites at least one, or says "not found") and
retried otherwise. Without an LLM the answer is made of the context sentences that best answer
the question (similar, sharing its rare words, holding the number or name it asks for), each
with its citation, and "not found" when none is similar enough.

Longer than most modules because the extractive answer is one algorithm over one set of
context units: reading the hits into units, scoring them against the question, choosing
the lead and the sentences within the word budget all read the same units and citations,
and the LLM answer's checks cite the same way. The lead's pattern tables are in lead.py.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np

from lorehouse.agents.assertion import AssertionModel, LeadSignals
from lorehouse.agents.lead import (
    NAME,
    AskedKind,
    asked_kind,
    asked_unit,
    range_fit,
    states_kind,
)
from lorehouse.agents.replies import not_found, passages_only
from lorehouse.embedding.base import Embedder, VectorCache
from lorehouse.llm import LLMClient
from lorehouse.search.asks import QuestionAsks, question_asks
from lorehouse.search.bm25 import STOP_WORDS, Analyzer
from lorehouse.search.hits import ChunkView, SearchHit
from lorehouse.text import chunk_body, is_data_row, plain_text, sentences, unwrap_soft_breaks

PROMPT_VERSION = "answerer.v2"
NOT_FOUND_MARKER = "NOT_IN_DOCUMENTS"
#: A citation of a context passage as answers write it: "[3]".
CITATION = re.compile(r"\[(\d{1,3})\]")
_PROMPT_SCAFFOLDING = ("Passages (in document order)", "Search queries used to find", "Rules:")
#: An inline link; not an image ("![alt](src)"), which `plain_text` reads as its alt text.
_LINK = re.compile(r"(?<!!)\[([^\]]+)\]\([^)]*\)")
#: A reference-style link, "the [Checkov website][2]": its "[2]" is the source's link label,
#: and quoted as is it read as a citation of context passage 2. Not after a word or a
#: bracket, where "[1][2]" indexes something ("grid[1][2]").
_REFERENCE_LINK = re.compile(r"(?<![\w\]])\[([^\[\]\n]+)\]\[[^\[\]\n]*\]")
#: A source's own reference markers: Wikipedia's "[106]", "[a]", "[citation needed]",
#: "[self-published source?]", a paper's "[3, 4]" or "[12-14]". Left in a passage they read as
#: Lorehouse's citations: an extractive answer quoting "... Surface Hub. [106]" showed a
#: citation [106] of no passage, and renumbering by use made the source's "[2]" citation [1].
_SOURCE_MARKER = re.compile(
    r"[ \t]*\[(?:\d{1,3}(?:\s*[,\u2013-]\s*\d{1,3})*|[a-z]|citation needed"
    r"|[^\[\]\n]{1,40}\?[*_ ]*)\]"
    # The same marker kept as a link to its footnote by Markdown exports of a wiki page:
    # "[[ 30 ]](#cite_note-30)".
    r"|[ \t]*\[\[[^\[\]\n]{1,40}\]\]\(#cite[^)\s]*\)"
)


@dataclass
class DraftExcerpt:
    """The sentences of one cited passage a reader checks the answer against.

    `sentences` run in the passage's order around the ones the answer drew from this
    passage, whose indexes are in `marked`; of those, `supports` holds the ones a reader is
    told support the answer (the lead and what states its facts, or without an asserted
    lead each passage's best sentence); `heading` is the section they sit under.
    """

    passage: int
    heading: tuple[str, ...]
    sentences: list[str]
    marked: list[int]
    supports: list[int] = field(default_factory=list)


@dataclass
class DraftAnswer:
    """Answer text and the citation numbers it uses, with the context passage of each.

    `passages[i]` is the 1-based context passage that citation `cited[i]` refers to; left
    empty, a citation number is its passage number (as an LLM writes them).
    """

    text: str
    cited: list[int]
    answerable: bool
    passages: list[int] = field(default_factory=list)
    #: The supporting excerpts, one per cited passage, in citation order (extractive answers;
    #: an LLM's are found afterwards from the sentences it cites).
    excerpts: list[DraftExcerpt] = field(default_factory=list)
    #: Whether the text states a lead as the answer; False for "the documents don't state
    #: this directly", which shows the closest passages instead (`lorehouse.agents.assertion`).
    asserted: bool = True
    #: What the extractive lead's assertion was decided on, and the chance it answers.
    signals: LeadSignals | None = None
    confidence: float | None = None
    #: Why the lead was not asserted, for the trace.
    unasserted_because: str = ""

    def cited_passages(self) -> list[tuple[int, int]]:
        """(citation number, context passage number) of each citation, in order of use."""
        return list(zip(self.cited, self.passages or self.cited, strict=True))


def numbered_by_use(draft: DraftAnswer) -> DraftAnswer:
    """The draft with its citations renumbered 1..n in the order its text first uses them.

    A reader meets [1] first, then [2]; the passage each number stands for is kept in
    `passages`, so the citation list still points at the right chunk.
    """
    renumbered = {passage: number for number, passage in enumerate(draft.cited, start=1)}
    text = CITATION.sub(
        lambda match: f"[{renumbered.get(int(match.group(1)), int(match.group(1)))}]", draft.text
    )
    return replace(draft, text=text, cited=list(renumbered.values()), passages=list(renumbered))


def without_source_markers(text: str) -> str:
    """The text without the source's own bracketed reference markers, so that every [n] an
    answer shows is a citation of a context passage.

    A bracket glued to a word or to another bracket is an index ("items[0]", "grid[1][2]"),
    not a marker, and is kept; a run of markers ("... Redmond. [2][3]") goes one by one.
    """

    def drop(match: re.Match[str]) -> str:
        before = text[match.start() - 1] if match.start() else ""
        marker = match.group(0)
        glued = marker.startswith("[") and (before.isalnum() or before in "]_")
        return marker if glued and "](#cite" not in marker else ""

    while True:
        cleaned = _SOURCE_MARKER.sub(drop, text)
        if cleaned == text:
            return cleaned
        text = cleaned


def _source_text(hit: ChunkView) -> str:
    """A passage's own Markdown, as both the LLM's context and extractive answers read it:
    no breadcrumb line, and a reference-style link as its text."""
    return _REFERENCE_LINK.sub(r"\1", chunk_body(hit.text_chat, hit.heading_path))


def context_block(hits: Sequence[SearchHit]) -> str:
    """Numbered passages with title, section and pages, as the answer prompt shows them.

    The passages' own reference markers are left out: an LLM copying "[106]" would cite a
    passage that does not exist, and a copied "[2]" would cite the wrong one.
    """
    blocks = []
    for number, hit in enumerate(hits, start=1):
        where = " > ".join(hit.heading_path)
        pages = f", pages {hit.page_start}-{hit.page_end}" if hit.page_start else ""
        body = without_source_markers(_source_text(hit)).strip()
        blocks.append(f"[{number}] {hit.title or hit.rel_path} - {where}{pages}\n{body}")
    return "\n\n".join(blocks)


def citations_in(text: str) -> list[int]:
    """Cited passage numbers in order of first appearance."""
    return list(dict.fromkeys(int(n) for n in CITATION.findall(text)))


def check_llm_answer(text: str, passages: int) -> str | None:
    """Why an LLM answer is unusable, or None when it is fine."""
    stripped = text.strip()
    if not stripped:
        return "empty answer"
    if stripped == NOT_FOUND_MARKER or stripped.startswith(NOT_FOUND_MARKER):
        return None
    if any(scaffold in stripped for scaffold in _PROMPT_SCAFFOLDING):
        return "the reply repeats the prompt instead of answering"
    cited = citations_in(stripped)
    if not cited:
        return "the answer cites no passage"
    invented = [n for n in cited if not 1 <= n <= passages]
    if invented:
        return f"the answer cites passages {invented} but only 1-{passages} exist"
    return None


def draft_from_llm_text(text: str, question: str) -> DraftAnswer:
    """The draft a validated LLM reply stands for."""
    stripped = text.strip()
    if stripped.startswith(NOT_FOUND_MARKER):
        return DraftAnswer(not_found(question), [], answerable=False)
    return DraftAnswer(stripped, citations_in(stripped), answerable=True)


def with_excerpts(draft: DraftAnswer, hits: Sequence[SearchHit]) -> DraftAnswer:
    """A written answer with an excerpt per cited passage: in each, the sentence or row that
    shares most words with the answer's sentences citing it is marked, as an extractive
    answer's supporting sentence is, so both kinds of answer show their sources alike."""
    if not draft.answerable or not draft.cited:
        return draft
    units = _context_units(hits)
    said: dict[int, set[str]] = {}
    for sentence in sentences(draft.text):
        for passage in citations_in(sentence):
            said.setdefault(passage, set()).update(_ANALYZER.terms(CITATION.sub(" ", sentence)))
    supporting = []
    for passage in draft.cited:
        candidates = [u for u in units if u.passage == passage]
        if candidates:
            terms = said.get(passage, set())
            supporting.append(
                max(candidates, key=lambda u: len(terms & set(_ANALYZER.terms(u.text))))
            )
    backing = {(unit.passage, unit.order) for unit in supporting}
    excerpts = _excerpts(units, supporting, supporting, backing)
    return replace(draft, excerpts=excerpts)


def answer_prompt_values(
    question: str, queries: Sequence[str], hits: Sequence[SearchHit]
) -> dict[str, str]:
    return {
        "question": question,
        "queries": "\n".join(f"- {q}" for q in queries),
        "context": context_block(hits),
    }


def answer_with_llm(
    client: LLMClient, question: str, queries: Sequence[str], hits: Sequence[SearchHit]
) -> DraftAnswer:
    """A validated, cited answer; raises LLMFailure after the client's retries."""
    text = client.complete_text(
        client.prompt(PROMPT_VERSION),
        check=lambda reply: check_llm_answer(reply, len(hits)),
        **answer_prompt_values(question, queries, hits),
    )
    return with_excerpts(draft_from_llm_text(text, question), hits)


def stream_llm_answer(
    client: LLMClient, question: str, queries: Sequence[str], hits: Sequence[SearchHit]
) -> Iterator[str]:
    """The LLM's answer as it is generated (validated by the caller once complete)."""
    return client.stream_text(
        client.prompt(PROMPT_VERSION), **answer_prompt_values(question, queries, hits)
    )


#: Markers before a statement, not words of it: a quotation's ">" and a GitHub alert's label
#: ("> [!NOTE] Spending over $300 USD per night requires ..."), then an FAQ answer's "A:"
#: ("A: No, promotions do not trigger a zone re-evaluation."), which reads as a stray letter.
_LEADING_MARKERS = re.compile(
    r"^(?:>\s*)*(?:\[!(?:NOTE|TIP|IMPORTANT|WARNING|CAUTION)\]\s*)?(?:A:\s+)?"
)


_WORD = re.compile(r"[A-Za-z][\w&'-]*[\w]|\d[\d,.]*\d|\d|[A-Z]")


def question_names(question: str) -> list[str]:
    """The words a question names its subject's particulars by: capitalised words after its
    first ("Lisbon", "US", "Germany", "Airbase"), acronyms and numbers, once each.

    Broader than `named_terms`, which leaves out the place a question is set in because a
    corpus that never names it may still answer; a lead that states another office's rule
    is exactly one whose text, section and document never name the place asked about.
    """
    words = _WORD.findall(question)
    names: list[str] = []
    for index, word in enumerate(words):
        particular = word[0].isdigit() or (index and word[0].isupper() and word != "I")
        if particular and word not in names:
            names.append(word)
    return names


def _word_in(name: str, text: str) -> bool:
    """Whether `text` holds `name` as a word: an acronym in its own case ("US" is not "us"),
    any other name in any case; "EU" is not found inside "EUR"."""
    flags = 0 if name.isupper() else re.IGNORECASE
    return re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", text, flags) is not None


#: A unit's text and, for a table row under column names, its (column name, cell) pairs.
_UnitText = tuple[str, tuple[tuple[str, str], ...]]


def _units(hit: ChunkView) -> list[_UnitText]:
    """Sentences of a passage; rows (with their header) of a table passage."""
    # A link reads as its text: the citation already says where the sentence comes from.
    body = without_source_markers(_LINK.sub(r"\1", _source_text(hit)))
    if hit.is_table:
        rows = [line for line in body.splitlines() if line.strip().startswith("|")]
        rows = [r for r in rows if not set(r.replace("|", "").strip()) <= set("-: ")]
        if len(rows) > 1:
            header, *body = [_table_cells(row) for row in rows]
            if is_data_row(header) or _is_label_value_form(header, body):
                # A statement whose first row holds amounts, or a form of "Label: value"
                # cells, has no column names: its first row is read as the others are,
                # "Net Revenue: $86,392; $79,474.", "Order / Rev: 2024-12-5678."
                names, body = [""] * len(header), [header, *body]
            else:
                names = _column_names(header)
            return [(_row_unit(names, row), _named_cells(names, row)) for row in body if any(row)]
    # A hard-wrapped paragraph is one run of sentences, not one fragment per line.
    return [
        (_LEADING_MARKERS.sub("", sentence), ())
        for sentence in sentences(plain_text(unwrap_soft_breaks(body)))
    ]


def _context_units(hits: Sequence[SearchHit]) -> list[_Unit]:
    """Every sentence and table row of the context, in reading order, each cited by its hit.

    A passage hit is read chunk by chunk, each under its own heading: read whole, every
    sentence took the ranked chunk's heading, so a later section's sentences were read under
    the wrong subject and the answers stated fewer of the reference's key facts.
    """
    units: list[_Unit] = []
    for number, hit in enumerate(hits, start=1):
        order = 0
        for part_number, part in enumerate(hit.passage_parts or [hit]):
            for text, cells in _units(part):
                heading = tuple(part.heading_path)
                units.append(_Unit(number, order, text, heading, part_number, cells))
                order += 1
    return units


def _table_cells(row: str) -> list[str]:
    """A row's cells as plain words: "**Principle of Least Privilege**" reads without its
    asterisks, as a sentence of the passage does."""
    return [" ".join(plain_text(cell).split()) for cell in row.strip().strip("|").split("|")]


def _column_names(names: list[str]) -> list[str]:
    """A table's column names (its header row's cells); blank when the header is one caption
    repeated over every column (an infobox's "Building 92 on the Microsoft Redmond campus"),
    which names none."""
    return [""] * len(names) if len(names) > 1 and len(set(names)) == 1 else names


def _is_label_value_form(header: list[str], body: list[list[str]]) -> bool:
    """Whether a table is a form: its rows open with a label ending in ":", the first row too.

    A booking order or a datasheet lays out "Order / Rev: | 2024-12-5678 | Cinema: | Downtown";
    read with its first row as column names, every row said "Order / Rev:: Category:;
    2024-12-5678: Film Distributor".
    """
    if not header[0].endswith(":") or not body:
        return False
    return 2 * sum(row[0].endswith(":") for row in body) > len(body)


def _row_unit(names: list[str], cells: list[str]) -> str:
    """A table row as one sentence with its column names: "Trip: Team; Limit: $1,850."

    A row of a table without column names reads as its label and values: "Founded: April
    4, 1975.", not the caption repeated before each cell. A cell ending in ":" opens another
    label's values ("Order / Rev: 2024-12-5678. Cinema: Downtown."). A column name ending in
    ":" ("Grade :") or "," ("Years ended December 31,") gets no colon after it.
    """
    if not any(names):
        labelled: list[tuple[str, list[str]]] = []
        for cell in cells:
            if cell and (not labelled or cell.endswith(":")):
                labelled.append((cell.rstrip(":").rstrip(), []))  # "Revenues:" names its row
            elif cell:
                labelled[-1][1].append(cell)
        return " ".join(
            f"{label}: {'; '.join(values).rstrip('.')}." if values else f"{label}."
            for label, values in labelled
        )
    names = [name.rstrip(":,").rstrip() for name in names]
    # A row shorter than its header (a ragged Markdown table) names the cells it has.
    named = zip(names, cells, strict=False)
    pairs = [f"{name}: {cell}" if name else cell for name, cell in named if cell]
    return "; ".join(pairs).rstrip(".") + "."


def _named_cells(names: list[str], cells: list[str]) -> tuple[tuple[str, str], ...]:
    """A row's cells under their column names, those with both; () when no column is named."""
    if not any(names):
        return ()
    named = zip((name.rstrip(":,").rstrip() for name in names), cells, strict=False)
    return tuple((name, cell) for name, cell in named if name and cell)


#: Words opening a range cell ("Over EUR 5,000"), lower case inside a sentence.
_RANGE_WORDS = frozenset({"over", "under", "above", "below", "up", "less", "more", "between"})


def row_sentence(question: str, cells: Sequence[tuple[str, str]]) -> str | None:
    """A table row read as a sentence answering `question`, or None to lead with the row.

    Only for a question asking a kind of fact (an amount, a duration, a person...) that a
    cell of the row states: the cells that answer are those stating it, narrowed to the
    columns the question names when it names any ("approves" names "Approver", "in Lisbon"
    names "Lisbon"). The row's first cell says what the row is about ("Over EUR 5,000"),
    with any other cell the question names ("Deepavali"). A column the question names as
    written ("Lisbon") reads "Annual leave in Lisbon: 25 days."; a short common noun
    ("Approver") reads "The approver for over EUR 5,000 is Chief Financial Officer (Rajiv
    Menon)."; any other ("January-June 2023") reads "Net sales, January-June 2023: 12,339.".
    Any other question ("How is the meal allowance paid?") leads with the whole row, whose
    other cells may hold the answer. The raw row stays in the excerpt, so nothing is lost.
    """
    kind = asked_kind(question)
    if len(cells) < 2 or kind in (AskedKind.OTHER, AskedKind.YES_NO, AskedKind.PROCEDURE):
        return None
    (_, key), rest = cells[0], list(cells[1:])
    if not re.search(r"[^\W\d]", key):  # a number or a date names no row for a reader
        return None
    asked = set(_ANALYZER.terms(question))
    unit_of_time = asked_unit(question)
    stating = [(name, cell) for name, cell in rest if states_kind(cell, kind, unit_of_time)]
    named = [pair for pair in stating if set(_ANALYZER.terms(pair[0])) & asked]
    answer = named or stating
    if not answer:
        return None
    about = [key.rstrip(".")] + [
        cell for name, cell in rest if (name, cell) not in answer and _names(cell, asked)
    ]
    subject = ", ".join(about)
    said = [(name, cell.rstrip(".")) for name, cell in answer]
    if all(name in question for name, _ in said):  # named as written: "in Lisbon"
        cited = "; ".join(f"{name}: {cell}" for name, cell in said)
        return f"{subject} in {cited}." if len(said) == 1 else f"{subject}: {cited}."
    if all(_common_noun(name) for name, _ in said):
        opening = subject.split()[0].lower()
        if opening in STOP_WORDS | _RANGE_WORDS:
            subject = subject[0].lower() + subject[1:]
        first, *others = said
        parts = [f"The {first[0].lower()} for {subject} is {first[1]}"]
        parts += [f"the {name.lower()} is {cell}" for name, cell in others]
        return "; ".join(parts) + "."
    return f"{subject}, " + "; ".join(f"{name}: {cell}" for name, cell in said) + "."


def _names(cell: str, asked: set[str]) -> bool:
    """Whether a cell holds a word of the question other than a common one: "Deepavali"."""
    return bool({term for term in _ANALYZER.terms(cell) if len(term) > 3} & asked)


def _common_noun(name: str) -> bool:
    """A column name that reads after "the": a few words, no digits ("Approver", "Cost per
    person"), not a year or a period ("2023", "January-June 2023")."""
    return len(name.split()) <= 4 and not any(char.isdigit() for char in name)


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
#: What a reader checks in an answer: amounts, limits, dates and names.
_FACT = re.compile(r"\$?\d[\d,.]*%?|(?<=[a-z,;:] )[A-Z][A-Za-z0-9&]+|\b[A-Z]{2,}\b")
#: Weight of the question's words found in a sentence (IDF-weighted share) beside the
#: embedding similarity: exact terms ("Airbase", "I-9") matter more than a small model knows.
LEXICAL_WEIGHT = 0.3
#: Bonus for a sentence that holds what the question asks for (a number, a name).
SLOT_WEIGHT = 0.15
#: After the best sentence, a sentence longer than UNDISCOUNTED_WORDS competes with its score
#: divided by (words / UNDISCOUNTED_WORDS) ** LENGTH_DISCOUNT: the greedy rule of budgeted
#: extractive summarization (Lin and Bilmes, 2010), so one long sentence does not spend the
#: word budget that two short ones holding more facts would fill. Chosen by 5-fold
#: cross-validation over both dev sets.
LENGTH_DISCOUNT = 0.2
UNDISCOUNTED_WORDS = 20
_ANALYZER = Analyzer()


@dataclass(frozen=True)
class _Unit:
    """One sentence or table row of the context, with the citation number of its passage and
    the heading of the chunk it comes from (a passage hit joins chunks of several sections)."""

    passage: int
    order: int
    text: str
    heading: tuple[str, ...] = ()
    part: int = 0
    #: A table row's (column name, cell) pairs; empty for a sentence or an unnamed row.
    cells: tuple[tuple[str, str], ...] = ()

    @cached_property
    def facts(self) -> frozenset[str]:
        return frozenset(fact.strip(".,").lower() for fact in _FACT.findall(self.text))

    @property
    def is_question(self) -> bool:
        return self.text.rstrip().endswith("?")


def _lexical_overlap(question: str, units: Sequence[_Unit]) -> np.ndarray:
    """Per unit, the share of the question's words it contains, rare words weighing more.

    Rarity is counted over the context itself (BM25's IDF), so a word every passage repeats
    ("Sourcegraph", "teammates") decides nothing.
    """
    question_terms = set(_ANALYZER.terms(question))
    unit_terms = [set(_ANALYZER.terms(unit.text)) for unit in units]
    total = len(units)
    weights = {}
    for term in question_terms:
        containing = sum(term in terms for terms in unit_terms)
        weights[term] = math.log(1 + (total - containing + 0.5) / (containing + 0.5))
    mass = sum(weights.values()) or 1.0
    return np.array(
        [sum(weights[term] for term in question_terms & terms) / mass for terms in unit_terms]
    )


def _holds_what_is_asked(question: str, units: Sequence[_Unit]) -> np.ndarray:
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


def _lead_ins(units: Sequence[_Unit]) -> list[str | None]:
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
    units: Sequence[_Unit],
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
    vectors = _embedded(embedder, texts, kept)
    best = vectors[1 : 1 + len(units)] @ vectors[0]
    # A unit read two ways (under its heading and its lead-in) keeps the closer reading.
    np.maximum.at(best, [index for index, _ in framed], vectors[1 + len(units) :] @ vectors[0])
    return best


def _embedded(embedder: Embedder, texts: list[str], kept: VectorCache | None) -> np.ndarray:
    """The texts' vectors, through `kept` when the caller keeps them across answers."""
    return kept.embed(embedder, texts) if kept is not None else embedder.embed(texts)


def _statements_first(units: Sequence[_Unit], order: np.ndarray) -> list[int]:
    """`order` with questions and lead-ins last, each group in its order.

    A question or a lead-in ("Who gets a background check?", "Renewals:") resembles the
    question most and answers nothing: statements go first, those only when nothing else.
    """
    return sorted(
        (int(index) for index in order),
        key=lambda index: units[index].is_question or units[index].text.rstrip().endswith(":"),
    )


def _ask_openers(
    embedder: Embedder, asks: QuestionAsks, chosen: Sequence[_Unit], kept: VectorCache | None
) -> list[_Unit]:
    """For each ask, in the order asked, the chosen sentence closest to it.

    The answer to "Who approves my expense report, and how long does reimbursement take?"
    then opens with the approver and the delay, each found in its own passage, before the
    other sentences follow in the order the context presents them.
    """
    texts = [*asks.queries(), *(unit.text for unit in chosen)]
    vectors = _embedded(embedder, texts, kept)
    closeness = vectors[len(asks.asks) :] @ vectors[: len(asks.asks)].T
    return [chosen[int(row)] for row in np.argmax(closeness, axis=0)]


@dataclass
class ContextReading:
    """The context's sentences and rows as the extractive answer weighs them."""

    units: list[_Unit]
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
    units = _context_units(hits)
    if not units:
        return None
    similarities = _similarities(embedder, question, units, kept_vectors)
    overlaps = _lexical_overlap(question, units)
    scores = (
        similarities
        + LEXICAL_WEIGHT * overlaps
        + SLOT_WEIGHT * _holds_what_is_asked(question, units)
    )
    kind = asked_kind(question)
    unit_of_time = asked_unit(question)
    states = np.array([states_kind(unit.text, kind, unit_of_time) for unit in units])
    fits = np.array([range_fit(question, unit.text) for unit in units])
    lead_scores = scores + KIND_WEIGHT * states + RANGE_WEIGHT * fits
    section = asked_section(question)
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
    found = sum(_word_in(name, where) for name in names)
    section = asked_section(question)
    headings = [_Unit(u.passage, u.order, " ".join(u.heading)) for u in reading.units]
    earlier = [u for u in reading.units[:lead] if (u.passage, u.part) == (unit.passage, unit.part)]
    return LeadSignals(
        similarity=float(reading.similarities[lead]),
        margin=float(reading.lead_scores[lead]) - max(others, default=0.0),
        overlap=float(reading.overlaps[lead]),
        kind_asked=asked_kind(question) is not AskedKind.OTHER,
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
    asked = set(_ANALYZER.terms(own))
    return own.endswith("?") and bool(asked) and asked <= set(_ANALYZER.terms(question))


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
    asks = question_asks(question)
    if asks is not None:
        max_words *= len(asks.asks)
        max_sentences *= len(asks.asks)
    chosen: list[_Unit] = []
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
    excerpts = _excerpts(units, lead, chosen, _supporting(reading, lead, chosen, asserting))
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
) -> list[_Unit]:
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


def _with_the_rule_before(reading: ContextReading, best: int) -> list[_Unit]:
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


#: Bonus for a unit stating the asked kind of fact, and for one whose range holds the
#: question's number (a penalty when its ranges do not): the lead must state the fact.
KIND_WEIGHT = 0.1
RANGE_WEIGHT = 0.3
#: Bonus for a unit under the section a question asks about by name ("... say about X?").
SECTION_WEIGHT = 0.5
_SAY_ABOUT = re.compile(
    r"\b(?:say|says|said|tell me|write|writes)\s+about\s+(?:the\s+)?[\"“']?(.+?)[\"”']?\s*\??$",
    re.I,
)


def _under_section(heading: Sequence[str], section: str) -> bool:
    """Whether a unit under `heading` is in the section a question asks about ("" for none)."""
    return bool(section) and section in " > ".join(heading).lower()


def asked_section(question: str) -> str:
    """The section a question asks about by name ("What does X say about Sick Leave?"), in
    lower case; "" when it names none."""
    match = _SAY_ABOUT.search(question.strip())
    return match.group(1).strip().lower() if match else ""


#: Units shown around a supporting sentence on each side, within its passage.
EXCERPT_NEIGHBOURS = 1


def _supporting(
    reading: ContextReading, lead: Sequence[_Unit], chosen: Sequence[_Unit], asserted: bool
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
    best: dict[int, _Unit] = {}
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


def _excerpts(
    units: Sequence[_Unit],
    lead: Sequence[_Unit],
    chosen: Sequence[_Unit],
    backing: set[tuple[int, int]],
) -> list[DraftExcerpt]:
    """One excerpt per passage the answer draws on, the lead's passages first: its chosen
    units with a neighbour on each side from the same part of the passage, the `backing`
    ones (by passage and order) as supports."""
    passages = list(dict.fromkeys([*(u.passage for u in lead), *(u.passage for u in chosen)]))
    position = {(u.passage, u.order): index for index, u in enumerate(units)}
    excerpts = []
    for passage in passages:
        supporting = sorted((u for u in chosen if u.passage == passage), key=lambda u: u.order)
        shown: dict[int, bool] = {}
        for unit in supporting:
            at = position[(unit.passage, unit.order)]
            for index in range(at - EXCERPT_NEIGHBOURS, at + EXCERPT_NEIGHBOURS + 1):
                if 0 <= index < len(units):
                    near = units[index]
                    if (near.passage, near.part) == (unit.passage, unit.part):
                        shown[index] = shown.get(index, False) or index == at
        ordered = sorted(shown)
        backs = {position[key] for key in backing if key[0] == passage}
        excerpts.append(
            DraftExcerpt(
                passage=passage,
                heading=supporting[0].heading,
                sentences=[units[index].text for index in ordered],
                marked=[i for i, index in enumerate(ordered) if shown[index]],
                supports=[i for i, index in enumerate(ordered) if shown[index] and index in backs],
            )
        )
    return excerpts
