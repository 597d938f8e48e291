"""Context units: the sentences, list items and table rows the extractive answer chooses from.

A hit's text is read into units, each with its citation, heading and whether it is a
statement; a table row becomes a sentence naming its columns, so a row can be the lead.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from lorehouse.agents.citations import source_text, without_source_markers
from lorehouse.agents.extractive.lead import (
    AskedKind,
    asked_unit,
    states_kind,
)
from lorehouse.agents.extractive.question import ANALYZER, read_question
from lorehouse.search.bm25 import STOP_WORDS
from lorehouse.search.hits import ChunkView, SearchHit
from lorehouse.text import is_data_row, plain_text, sentences, unwrap_soft_breaks

#: An inline link; not an image ("![alt](src)"), which `plain_text` reads as its alt text.
_LINK = re.compile(r"(?<!!)\[([^\]]+)\]\([^)]*\)")


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


def word_in(name: str, text: str) -> bool:
    """Whether `text` holds `name` as a word: an acronym in its own case ("US" is not "us"),
    any other name in any case; "EU" is not found inside "EUR"."""
    flags = 0 if name.isupper() else re.IGNORECASE
    return re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", text, flags) is not None


#: A unit's text and, for a table row under column names, its (column name, cell) pairs.
_UnitText = tuple[str, tuple[tuple[str, str], ...]]


def _units(hit: ChunkView) -> list[_UnitText]:
    """Sentences of a passage; rows (with their header) of a table passage."""
    # A link reads as its text: the citation already says where the sentence comes from.
    body = without_source_markers(_LINK.sub(r"\1", source_text(hit)))
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


def context_units(hits: Sequence[SearchHit]) -> list[Unit]:
    """Every sentence and table row of the context, in reading order, each cited by its hit.

    A passage hit is read chunk by chunk, each under its own heading: read whole, every
    sentence took the ranked chunk's heading, so a later section's sentences were read under
    the wrong subject and the answers stated fewer of the reference's key facts.
    """
    units: list[Unit] = []
    for number, hit in enumerate(hits, start=1):
        order = 0
        for part_number, part in enumerate(hit.passage_parts or [hit]):
            for text, cells in _units(part):
                heading = tuple(part.heading_path)
                units.append(Unit(number, order, text, heading, part_number, cells))
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
    kind = read_question(question).kind
    if len(cells) < 2 or kind in (AskedKind.OTHER, AskedKind.YES_NO, AskedKind.PROCEDURE):
        return None
    (_, key), rest = cells[0], list(cells[1:])
    if not re.search(r"[^\W\d]", key):  # a number or a date names no row for a reader
        return None
    asked = set(read_question(question).terms)
    unit_of_time = asked_unit(question)
    stating = [(name, cell) for name, cell in rest if states_kind(cell, kind, unit_of_time)]
    named = [pair for pair in stating if set(ANALYZER.terms(pair[0])) & asked]
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
    return bool({term for term in ANALYZER.terms(cell) if len(term) > 3} & asked)


def _common_noun(name: str) -> bool:
    """A column name that reads after "the": a few words, no digits ("Approver", "Cost per
    person"), not a year or a period ("2023", "January-June 2023")."""
    return len(name.split()) <= 4 and not any(char.isdigit() for char in name)


#: What a reader checks in an answer: amounts, limits, dates and names.
_FACT = re.compile(r"\$?\d[\d,.]*%?|(?<=[a-z,;:] )[A-Z][A-Za-z0-9&]+|\b[A-Z]{2,}\b")


@dataclass(frozen=True)
class Unit:
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
