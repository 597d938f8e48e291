"""An answer metric that needs no judge: are the reference answer's key facts in the answer?

Key facts are what a reader checks first: the numbers (amounts, limits, durations, dates,
percentages) and the named terms (capitalized names, acronyms) of the golden answer. The
metric is the share of them found in the produced answer, after the same normalization on
both sides; an unanswerable case scores whether the answer declined. Coarse, but offline,
deterministic and cheap, so it runs on every change where an LLM judge does not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lorehouse.agents.citations import CITATION

# 16 weeks, $2,000, 100%, 2.5yrs, 2026-10-25: a number with its thousands separators.
_NUMBER = re.compile(r"(?<![\w.])\d{1,3}(?:,\d{3})+(?:\.\d+)?|(?<![\w.])\d+(?:\.\d+)?")
# Capitalized words not at a sentence start, and acronyms: "Airbase", "People Ops", "SOC 2".
_NAMED = re.compile(r"(?<=[a-z,;:] )[A-Z][A-Za-z0-9&]+(?: [A-Z][A-Za-z0-9&]+)*|\b[A-Z]{2,}\b")
_SPACE = re.compile(r"\s+")
_TRAILING_ZEROS = re.compile(r"(\d)\.(\d*?)0+(?!\d)")
# What may follow a stated fact. A number is read with whatever is glued to it, as
# `key_facts` reads it: the reference's "1980s", "113k", "2.5yrs", "29th" and "1Password"
# yield 1980, 113, 2.5, 29 and 1, and an answer copying those words states them. A name must
# end where the word ends ("US" is not in "use").
_AFTER_NUMBER = r"(?!\d|[.,]\d)"
_AFTER_NAME = r"(?!\w)"
# Words that are capitalized in answers without being facts.
_NOT_NAMES = frozenset({"I", "OK", "USD", "EUR", "CHF", "No", "Yes", "Read"})


@dataclass(frozen=True)
class KeyFactScore:
    """How many of the reference's key facts the answer states."""

    facts: tuple[str, ...]
    found: tuple[str, ...]

    @property
    def share(self) -> float:
        return len(self.found) / len(self.facts) if self.facts else 1.0


def key_facts(reference: str) -> tuple[str, ...]:
    """The numbers and named terms of a reference answer, each once, in order."""
    numbers = [n.replace(",", "") for n in _NUMBER.findall(reference)]
    names = [n for n in _NAMED.findall(reference) if n not in _NOT_NAMES]
    return tuple(dict.fromkeys([*numbers, *names]))


def _normalized(text: str) -> str:
    """Case folded, thousands separators, a decimal's trailing zeros and extra spaces removed:
    "$1,384.80" and "$1384.8" state the same amount."""
    without_separators = re.sub(r"(?<=\d),(?=\d{3})", "", text)
    without_zeros = _TRAILING_ZEROS.sub(
        lambda m: m.group(1) + (f".{m.group(2)}" if m.group(2) else ""), without_separators
    )
    return _SPACE.sub(" ", without_zeros).casefold()


def score_key_facts(reference: str, answer: str) -> KeyFactScore:
    """The reference's key facts and those of them the answer states."""
    facts = key_facts(reference)
    # A citation "[2]" says which passage a sentence came from, not that the answer states 2.
    said = _normalized(CITATION.sub(" ", answer))
    found = tuple(
        fact
        for fact in facts
        if re.search(
            rf"(?<![\w.]){re.escape(_normalized(fact))}"
            + (_AFTER_NUMBER if _NUMBER.fullmatch(fact) else _AFTER_NAME),
            said,
        )
    )
    return KeyFactScore(facts, found)
