"""Retrieval metrics that survive re-chunking: evidence excerpts matched by fuzzy text.

The evidence is labelled as text copied from the source, not as chunk ids, so a new chunker
or parser does not invalidate the golden set. A case is a hit at k when every evidence
excerpt is found in the top k retrieved chunks (one chunk containing it, or a run of
consecutive chunks of its document covering an excerpt longer than a chunk).
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass

from rapidfuzz import fuzz

from lorehouse.text import BREADCRUMB_SEPARATOR

#: Default partial-ratio threshold (0-100) for an excerpt to count as found.
DEFAULT_THRESHOLD = 90.0

_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_TAG = re.compile(r"</?[A-Za-z][^>]*>")
_MARKUP = re.compile(r"[*_`#>|]+")
_SPACE = re.compile(r"\s+")


def normalize(text: str) -> str:
    """Text as a reader sees it: link targets, HTML tags and Markdown markup dropped, entities
    decoded, spaces collapsed, case folded; parsed chunks and raw source files then compare
    on their words."""
    text = html.unescape(_TAG.sub(" ", _LINK.sub(r"\1", text)))
    text = _MARKUP.sub(" ", text)
    return _SPACE.sub(" ", text).strip().casefold()


@dataclass(frozen=True)
class RetrievedChunk:
    """What the matcher needs of a retrieved chunk, or of a passage of consecutive chunks."""

    chunk_id: str
    rel_path: str
    #: The position of the first chunk the text holds.
    position: int
    text: str
    #: The position of the last chunk a passage holds; None for a single chunk.
    end_position: int | None = None

    @property
    def last_position(self) -> int:
        return self.position if self.end_position is None else self.end_position


@dataclass(frozen=True)
class Evidence:
    file: str
    excerpt: str


def same_file(rel_path: str, evidence_file: str) -> bool:
    a, b = rel_path.strip("/"), evidence_file.strip("/")
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)


def contains(haystack: str, needle: str, threshold: float) -> bool:
    """Whether `needle` is in `haystack` (both normalized), up to `threshold` (0-100)."""
    if not needle:
        return True
    if needle in haystack:
        return True
    if len(haystack) < len(needle) * 0.8:
        return False
    # With the cutoff rapidfuzz skips alignments that cannot reach it: the same verdicts, in
    # much less time on page-long excerpts (FinanceBench), whose eval this call dominated.
    return fuzz.partial_ratio(needle, haystack, score_cutoff=threshold) >= threshold


def excerpt_found(
    evidence: Evidence, retrieved: Sequence[RetrievedChunk], threshold: float = DEFAULT_THRESHOLD
) -> bool:
    """Whether the excerpt is in one retrieved chunk of its file, or in a run of consecutive
    retrieved chunks of that file (positions n, n+1, ...) read together.

    A passage spans its chunks' positions, so two adjacent passages (n..m, m+1..) are a run
    too, as the chunks they join would be.
    """
    needle = normalize(evidence.excerpt)
    mine = sorted(
        (c for c in retrieved if same_file(c.rel_path, evidence.file)), key=lambda c: c.position
    )
    if any(contains(normalize(_body(c.text)), needle, threshold) for c in mine):
        return True
    run: list[RetrievedChunk] = []
    for chunk in mine:
        if run and chunk.position != run[-1].last_position + 1:
            if len(run) > 1 and contains(_joined(run), needle, threshold):
                return True
            run = []
        run.append(chunk)
    return len(run) > 1 and contains(_joined(run), needle, threshold)


def _body(text: str) -> str:
    """A chunk as its section reads: its own heading and text, without the headings above it.

    Every chunk starts with its breadcrumb ("Benefits > FAQ > Q. Does Sourcegraph match my
    401k?"). The outer headings are repeated atop every chunk of their section and would match
    excerpts the chunk does not hold; the last one is the chunk's own heading, which an
    excerpt may quote with its text ("Q. Does Sourcegraph match my 401k? Not at this time.").
    """
    heading, text = _split_breadcrumb(text)
    return f"{heading}\n{text}" if heading else text


def _split_breadcrumb(text: str) -> tuple[str, str]:
    """The chunk's own heading (the breadcrumb's last part, or "") and the text below it."""
    first, _, rest = text.partition("\n")
    if rest.strip() and BREADCRUMB_SEPARATOR in first:
        return first.rsplit(BREADCRUMB_SEPARATOR, 1)[1], rest
    return "", text


def _joined(run: Sequence[RetrievedChunk]) -> str:
    """Consecutive chunks read as one text, a heading shown where it changes, so an excerpt
    running across a chunk boundary stays contiguous."""
    parts, last_heading = [], None
    for chunk in run:
        heading, text = _split_breadcrumb(chunk.text)
        parts.append(text if heading == last_heading or not heading else f"{heading}\n{text}")
        last_heading = heading
    return normalize(" ".join(parts))


def first_hit_rank(
    evidence: Sequence[Evidence],
    ranking: Sequence[RetrievedChunk],
    threshold: float = DEFAULT_THRESHOLD,
) -> int | None:
    """The smallest k at which every excerpt is found in ranking[:k]; None if never."""
    if not evidence:
        return None
    for k in range(1, len(ranking) + 1):
        top = ranking[:k]
        if all(excerpt_found(item, top, threshold) for item in evidence):
            return k
    return None


def recall_at(first_ranks: Sequence[int | None], k: int) -> float:
    """Share of cases whose evidence is all within the top k."""
    if not first_ranks:
        return 0.0
    return sum(1 for r in first_ranks if r is not None and r <= k) / len(first_ranks)


def mean_reciprocal_rank(first_ranks: Sequence[int | None]) -> float:
    """Mean of 1/rank at which each case became a hit (0 for a miss)."""
    if not first_ranks:
        return 0.0
    return sum(1.0 / r for r in first_ranks if r) / len(first_ranks)
