"""What a question asks for, and whether a sentence or table row states it.

An answer's lead is the one sentence (or row, or list item) a reader takes away, so it must
state the asked kind of fact: an amount for "how much", a duration for "how long", a person
or role for "who". A question that carries a number ("a claim of EUR 3,000") is matched
against the ranges and thresholds rows state ("EUR 2,000.01 to EUR 5,000", "over EUR 5,000"),
because the row whose range holds the number is the answer and its neighbours are not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum


class AskedKind(StrEnum):
    """The kind of fact a question asks for."""

    AMOUNT = "amount"
    COUNT = "count"
    DURATION = "duration"
    DATE = "date"
    PERSON = "person"
    PLACE = "place"
    YES_NO = "yes_no"
    PROCEDURE = "procedure"
    OTHER = "other"


_KIND_PATTERNS: tuple[tuple[AskedKind, re.Pattern[str]], ...] = (
    (
        AskedKind.DURATION,
        re.compile(
            r"\bhow (?:long|soon|quickly|fast|early|late|far in advance)\b"
            r"|\bhow many (?:days|weeks|months|years|hours|minutes)\b"
            r"|\b(?:notice period|how much notice|duration)\b"
            # German: "Wie lange ...", "Wie viele Wochen ...", "Frist", "Dauer"
            r"|\bwie (?:lange|schnell|früh|spät)\b"
            r"|\bwie viele (?:tage|wochen|monate|jahre|stunden|minuten)\b"
            r"|\b(?:\w*frist|dauer)\b",
            re.I,
        ),
    ),
    (
        AskedKind.AMOUNT,
        re.compile(
            r"\bhow much\b|\b(?:maximum|minimum|limit|budget|cost|price|fee|allowance|stipend"
            r"|amount|rate|salary|reimburs\w*|spend\w*|percent(?:age)?)\b"
            r"|\bwie ?viel\b|\b(?:höchst\w*|\w*betrag|kosten|preis|gebühr\w*|\w*grenze"
            r"|erstatt\w*|gehalt|zuschuss|prozent\w*)\b",
            re.I,
        ),
    ),
    (AskedKind.COUNT, re.compile(r"\bhow many\b|\bnumber of\b|\bwie viele\b|\banzahl\b", re.I)),
    (
        AskedKind.DATE,
        re.compile(
            r"^\s*when\b|\bby when\b|\bwhat (?:date|day|month|year|time)\b|\bdeadline\b"
            r"|^\s*(?:bis )?wann\b|\ban welchem (?:tag|datum)\b|\bstichtag\b",
            re.I,
        ),
    ),
    (
        AskedKind.PERSON,
        re.compile(
            r"\b(?:who|whom|whose)\b|\bwhich (?:team|person|group|role|manager)\b"
            r"|\b(?:approv\w*|contact|reach out|responsible|owner|sign[s -]?off)\b"
            r"|\b(?:wer|wem|wen|wessen)\b|\bwelche[rsnm]? (?:team|person|gruppe|rolle)\b"
            r"|\b(?:genehmig\w*|zuständig\w*|verantwortlich\w*|ansprechp\w*)\b",
            re.I,
        ),
    ),
    (
        AskedKind.PLACE,
        re.compile(
            r"^\s*where\b|\bwhich (?:office|city|country|location)\b"
            r"|^\s*wo(?:hin|her)?\b|\bin welche[mr]? (?:büro|stadt|land|verzeichnis|datei)\b",
            re.I,
        ),
    ),
    (
        AskedKind.PROCEDURE,
        re.compile(
            r"^\s*how (?:do|can|should|to|does)\b|\bwhat (?:steps|is the process)\b"
            r"|^\s*wie (?:kann|soll|muss|mache|gehe|bekomme|erhalte|richte)\b"
            r"|^\s*wie \w+ (?:ich|man)\b"
            r"|\bwelche schritte\b",
            re.I,
        ),
    ),
    (
        AskedKind.YES_NO,
        re.compile(
            r"^\s*(?:can|may|do|does|is|are|am|should|will|must|could|would|have|has)\b"
            r"|^\s*(?:kann|darf|muss|soll|sollte|ist|sind|gibt es|habe|hat|wird|werden)\b",
            re.I,
        ),
    ),
)


#: A question whose opening asks yes or no ("Does ...", "Can I ...").
_YES_NO_OPENING = re.compile(
    r"^\s*(?:can|may|do|does|did|is|are|am|was|were|should|will|must|could|would|have|has)\b"
    r"|^\s*(?:kann|darf|muss|soll|sollte|ist|sind|war|gibt es|habe|hat|wird|werden)\b",
    re.I,
)
#: A question that asks for a quantity in so many words, whatever its opening.
_ASKS_QUANTITY = re.compile(
    r"\bhow (?:much|many|long|soon|quickly|fast|early|late|far in advance)\b"
    r"|\bis there (?:a|an|any) (?:limit|cap|maximum|minimum|budget|allowance|deadline)\b"
    r"|\bwie (?:viel|viele|lange|schnell|früh)\b|\bgibt es eine (?:grenze|frist|obergrenze)\b",
    re.I,
)


def asked_kind(question: str) -> AskedKind:
    """The kind of fact the question asks for; OTHER when no pattern says.

    A question's opening comes before its topic words: "Does the hotel limit include
    breakfast?" asks yes or no, though "limit" names an amount; read as asking the amount, a
    row of hotel limits led the answer instead of the sentence that answers it. A question
    asking a quantity in so many words ("Is there a limit on ...") still asks the quantity.
    "How is the zone 3 entry point set?" stays an amount: its answer is a rule that states
    one (60% of zone 1's).
    """
    topical = next(
        (kind for kind, pattern in _KIND_PATTERNS if pattern.search(question)), AskedKind.OTHER
    )
    if _ASKS_QUANTITY.search(question):
        return topical
    if _YES_NO_OPENING.search(question):
        return AskedKind.YES_NO
    return topical


#: A number as English ("2,000.50") or German ("2.000,50", "3,5") writing groups it.
_NUMBER = (
    r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d{1,3}(?:\.\d{3})+(?:,\d+)?|\d+,\d{1,2}(?!\d)|\d+(?:\.\d+)?"
)
_DIGIT = re.compile(r"\d")
_UNIT_OF_TIME = re.compile(
    r"\b(?:\d[\d.,]*|one|two|three|four|five|six|seven|eight|nine|ten|twelve|a|an)[ -]"
    r"(?:business |working |calendar )?(?:days?|weeks?|months?|years?|hours?|minutes?)\b"
    # German: "20 Wochen", "zwei Arbeitstage", "einen Monat", "30 Tagen"
    r"|\b(?:\d[\d.,]*|ein(?:e[nmr]?)?|zwei|drei|vier|fünf|sechs|sieben|acht|neun|zehn|zwölf)"
    r" (?:\w+ )?(?:arbeits|werk|kalender)?(?:tag(?:e|en)?|woche(?:n)?|monat(?:e|en)?"
    r"|jahr(?:e|en)?|stunde(?:n)?|minute(?:n)?)\b",
    re.I,
)
#: A unit of time as a duration names it, in English or German -> its English name.
_UNIT_NAMES = {
    "day": "day",
    "tag": "day",
    "week": "week",
    "woche": "week",
    "month": "month",
    "monat": "month",
    "year": "year",
    "jahr": "year",
    "hour": "hour",
    "stunde": "hour",
    "minute": "minute",
}
_UNIT_WORD = re.compile(r"(day|tag|week|woche|month|monat|year|jahr|hour|stunde|minute)", re.I)
_MONEY = re.compile(
    r"[$€£¥]\s?\d|\b(?:USD|EUR|GBP|CAD|CHF|AUD|JPY|INR)\s?\d|\d\s?(?:USD|EUR|GBP|CAD|CHF|%|€)"
    r"|\bpercent\b|\d\s?(?:Euro|Franken)\b|\bProzent\b",
    re.I,
)
_DATE = re.compile(
    r"\b(?:January|February|March|April|May|June|July|August|September|October|November"
    r"|December|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec|Monday|Tuesday|Wednesday"
    r"|Thursday|Friday|Saturday|Sunday|quarter|Q[1-4])\b|\b(?:19|20)\d\d\b|\d{1,2}/\d{1,2}"
    r"|\b(?:before|after|by|within|until|prior to)\b"
    # German months, weekdays, "31.12.", "vor", "bis", "innerhalb", "spätestens"
    r"|\b(?:Januar|Februar|März|Mai|Juni|Juli|Oktober|Dezember|Montag|Dienstag|Mittwoch"
    r"|Donnerstag|Freitag|Samstag|Sonntag|Quartal)\b|\b\d{1,2}\.\d{1,2}\.(?:\d{2,4})?"
    r"|\b(?:vor|nach|bis|innerhalb|spätestens|binnen)\b",
)
_ROLE = re.compile(
    r"\b(?:manager|director|officer|CFO|CEO|CTO|COO|VP|head|lead|team|ops|HR|people|finance"
    r"|legal|security|admin\w*|owner|approver|committee|board|department|partner|supervisor"
    r"|executive|president|chief|recruit\w*|payroll|it|helpdesk|support)\b",
    re.I,
)
#: A name as an answer states it: a capitalized word inside a sentence, an acronym, a Slack
#: channel or handle.
NAME = re.compile(r"(?<=[a-z,;:] )[A-Z][A-Za-z0-9&]+|\b[A-Z]{2,}\b|#[a-z][\w-]+|@[\w-]+")
_PROCEDURE = re.compile(
    r"^\s*(?:\d+[.)]\s*)?(?:submit|fill|go|open|send|request|ask|log|sign|create|file|book"
    r"|email|contact|use|enter|upload|click|select|add|complete|get|follow|talk|reach|post)\b"
    r"|\b(?:then|first|next|via|through|in (?:the )?[A-Z]\w+)\b",
    re.I,
)
_STATEMENT = re.compile(r"\b(?:is|are|must|may|can|cannot|can't|will|should|not|only|no)\b", re.I)


_ASKED_UNIT = re.compile(
    r"\bhow many (day|week|month|year|hour|minute)s?\b"
    r"|\bwie viele (tag|woche|monat|jahr|stunde|minute)(?:e|en|n)?\b",
    re.I,
)


def asked_unit(question: str) -> str | None:
    """The unit of time a "how many weeks ..." ("wie viele Wochen ...") question counts in,
    by its English name, singular; else None."""
    match = _ASKED_UNIT.search(question)
    if not match:
        return None
    return _UNIT_NAMES[(match.group(1) or match.group(2)).lower()]


def _duration_units(text: str) -> set[str]:
    """The units of time of the durations `text` states, by their English names."""
    return {
        _UNIT_NAMES[unit.group(1).lower()]
        for duration in _UNIT_OF_TIME.finditer(text)
        if (unit := _UNIT_WORD.search(duration.group(0).split()[-1]))
    }


def states_kind(text: str, kind: AskedKind, unit: str | None = None) -> bool:
    """Whether `text` states a fact of the asked kind (a duration for DURATION, ...); for a
    question counting in a unit of time ("how many weeks"), one in that unit."""
    if kind is AskedKind.DURATION:
        units = _duration_units(text)
        return bool(units) and (unit is None or unit in units)
    if kind is AskedKind.AMOUNT:
        return bool(_MONEY.search(text)) or bool(_DIGIT.search(text))
    if kind is AskedKind.COUNT:
        return bool(_DIGIT.search(text)) or bool(_UNIT_OF_TIME.search(text))
    if kind is AskedKind.DATE:
        return bool(_DATE.search(text)) or bool(_UNIT_OF_TIME.search(text))
    if kind is AskedKind.PERSON:
        return bool(_ROLE.search(text)) or bool(NAME.search(text))
    if kind is AskedKind.PLACE:
        return bool(NAME.search(text))
    if kind is AskedKind.PROCEDURE:
        return bool(_PROCEDURE.search(text))
    if kind is AskedKind.YES_NO:
        return bool(_STATEMENT.search(text))
    return True


@dataclass(frozen=True)
class Bound:
    """A range a sentence states: `low` < value <= `high` (None: unbounded on that side)."""

    low: float | None
    high: float | None

    def holds(self, value: float) -> bool:
        return (self.low is None or value >= self.low) and (self.high is None or value <= self.high)


#: An amount, its currency before it ("EUR 2,000") or after it, as German writes it
#: ("2.000 €", "2.000 Euro").
_AMOUNT = (
    rf"(?:[$€£]|\b(?:USD|EUR|GBP|CAD|CHF)\s?)?({_NUMBER})\s?(?:k\b)?"
    rf"(?:\s?(?:€|EUR\b|Euro\b|CHF\b))?"
)
_RANGE = re.compile(rf"{_AMOUNT}\s*(?:to|-|–|—|and|bis|und)\s*{_AMOUNT}", re.I)
_ABOVE = re.compile(
    rf"\b(?:over|above|more than|greater than|exceeding|at least|from|min(?:imum)?"
    rf"|über|mehr als|ab|mindestens)\s+{_AMOUNT}"
    rf"|{_AMOUNT}\s*(?:\+|or more|and above|and over)",
    re.I,
)
_BELOW = re.compile(
    rf"\b(?:under|below|less than|up to|at most|no more than|not exceeding|max(?:imum)?|within"
    rf"|unter|weniger als|bis zu|höchstens|maximal)"
    rf"\s+{_AMOUNT}|{_AMOUNT}\s*(?:or less|and below|and under)",
    re.I,
)
_QUESTION_NUMBER = re.compile(rf"(?<![\w.])({_NUMBER})(?![\w.])")


_GERMAN_GROUPED = re.compile(r"^\d{1,3}(?:\.\d{3})+(?:,\d+)?$|^\d+,\d{1,2}$")


def _value(text: str | None) -> float | None:
    """A number as written: "2,000.50" and "2.000,50" are both 2000.5."""
    if not text:
        return None
    if _GERMAN_GROUPED.match(text):
        return float(text.replace(".", "").replace(",", "."))
    return float(text.replace(",", ""))


def stated_bounds(text: str) -> list[Bound]:
    """The ranges and thresholds a sentence or row states, in the order it states them."""
    bounds = [Bound(_value(m.group(1)), _value(m.group(2))) for m in _RANGE.finditer(text)]
    bounds += [Bound(_value(m.group(1) or m.group(2)), None) for m in _ABOVE.finditer(text)]
    bounds += [Bound(None, _value(m.group(1) or m.group(2))) for m in _BELOW.finditer(text)]
    return bounds


def question_numbers(question: str) -> list[float]:
    """The numbers a question carries ("a claim of EUR 3,000", "12 people")."""
    return [value for n in _QUESTION_NUMBER.findall(question) if (value := _value(n)) is not None]


def range_fit(question: str, text: str) -> float:
    """+1 when a range or threshold `text` states holds a number of the question, -1 when
    `text` states ranges and none holds it, 0 when either has no number to compare."""
    numbers = question_numbers(question)
    bounds = stated_bounds(text)
    if not numbers or not bounds:
        return 0.0
    return 1.0 if any(b.holds(n) for b in bounds for n in numbers) else -1.0


#: What a question names that a document answering it would name too: capitalized words
#: inside the sentence ("the Wi-Fi password", "Black Friday"), an acronym ("VPN"), a year.
_NAMED = re.compile(
    r"(?<=[a-z,;:] )(?P<name>[A-Z][\w&]+(?:-\w+)*(?: [A-Z][\w&]+(?:-\w+)*)*)"
    r"|\b(?P<acronym>[A-Z]{2,})s?\b"
    r"|\b(?P<year>(?:19|20)\d\d)\b"
)
#: A place the asker is in or comes from ("I work from Germany", "a new hire in Spain") sets
#: the scene rather than naming the subject: a policy for staff abroad answers without it.
_SCENE = re.compile(r"\b(?:in|from|at|to|near|outside|inside|within|across)\s+(?:the\s+)?$", re.I)


def named_terms(question: str) -> list[str]:
    """The names, acronyms and years a question's subject is named by, in order, once each.

    A document that answers the question names them too, so when none of the documents the
    caller may read does, the answer is "not found" whatever the nearest sentences say
    ("What is the Wi-Fi password in the Toronto office?" against a password policy). In a
    German question only acronyms and years count: its nouns are all capitalized.
    """
    # German capitalizes every noun: a capitalized word names nothing in particular there,
    # and only acronyms and years are names (lorehouse/agents/replies.py tells the language).
    from lorehouse.agents.replies import reply_language

    german = reply_language(question) == "de"
    terms: list[str] = []
    for match in _NAMED.finditer(question):
        name = match.group("name")
        if name and german and not re.fullmatch(r"[A-Z]{2,}s?", name):
            continue
        if name and _SCENE.search(question[: match.start()]):
            continue
        term = match.group(match.lastgroup or 0)
        if term not in terms:
            terms.append(term)
    return terms


def spelled_out(acronym: str, text: str) -> bool:
    """Whether `text` spells `acronym` out: words in a row whose initials it is ("MFA" in
    "multi-factor authentication"), so a question may use the short form of a document's
    term."""
    if not re.fullmatch(r"[A-Z]{2,}", acronym):
        return False
    words = r"[\s-]+".join(rf"{letter}[a-z]*" for letter in acronym.lower())
    return re.search(rf"\b{words}\b", text, re.I) is not None
