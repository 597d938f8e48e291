"""Post-Processor: one copy of each passage, grouped by document, in reading order.

Sub-queries retrieve overlapping chunks, and documents repeat themselves (a policy quoted in
two handbooks, a table header repeated in every row group). The answerer reads better context
when it gets each passage once and in the order its document tells it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from rapidfuzz import fuzz

from lorehouse.search.hits import SearchHit
from lorehouse.text import chunk_body

#: Normalized texts at least this similar (rapidfuzz ratio, 0-100) count as the same passage.
NEAR_DUPLICATE_RATIO = 95.0
_SPACE = re.compile(r"\s+")


def _normalized(text: str) -> str:
    return _SPACE.sub(" ", text).strip().casefold()


def _body(hit: SearchHit) -> str:
    """The passage without its breadcrumb line, which identical passages in two places differ by."""
    return _normalized(chunk_body(hit.text_chat, hit.heading_path))


def remove_duplicates(hits: Sequence[SearchHit]) -> list[SearchHit]:
    """Keeps the best-scored copy of each chunk and drops near-identical passages.

    `hits` must be best first; the first copy seen is the one kept.
    """
    kept: list[SearchHit] = []
    bodies: list[str] = []
    seen: set[str] = set()
    for hit in hits:
        if hit.chunk_id in seen:
            continue
        body = _body(hit)
        if any(fuzz.ratio(body, other) >= NEAR_DUPLICATE_RATIO for other in bodies):
            continue
        seen.add(hit.chunk_id)
        kept.append(hit)
        bodies.append(body)
    return kept


def in_document_order(hits: Sequence[SearchHit]) -> list[SearchHit]:
    """Groups hits by document (the document of the best hit first), each in position order."""
    first_seen: dict[str, int] = {}
    for rank, hit in enumerate(hits):
        first_seen.setdefault(hit.doc_id, rank)
    return sorted(hits, key=lambda h: (first_seen[h.doc_id], h.position))


def post_process(hits: Sequence[SearchHit], max_chunks: int) -> list[SearchHit]:
    """Deduplicated, capped at `max_chunks` best, then in document order."""
    return in_document_order(remove_duplicates(hits)[:max_chunks])
