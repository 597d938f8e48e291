"""Passages: a hit grown into the run of consecutive chunks of its document that holds it.

Chunks are cut to what the embedding model reads (256 tokens) and to their section, so a
handbook chunk is short: often one short section, whose neighbours say the rest.
An application feeding its own LLM wants the passage, not the fragment. Every document is
divided once per table version into runs of consecutive chunks up to a word budget (a table
is never joined to prose, as the chunker keeps them apart); a search ranks chunks as always
and returns, for each ranked chunk, its run, each run once.

Passages raise recall at 8 because 8 passages hold several times the text of 8 chunks, but
extractive answers read from passages state no more of the reference's facts, so it is a
choice per search, off by default (figures: docs/benchmarks.md, "Retrieval quality").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import pairwise

from lorehouse.text import chunk_body


def passage_runs(
    doc_ids: Sequence[str],
    positions: Sequence[int],
    is_table: Sequence[bool],
    words: Sequence[int],
    max_words: int,
) -> list[list[int]]:
    """Row indices grouped into passages: each document's chunks in position order, joined
    greedily while the run stays within `max_words`. A table chunk is a passage of its own
    (its rows keep their header only within it), and so is a chunk over the budget.
    """
    order = sorted(range(len(doc_ids)), key=lambda row: (doc_ids[row], positions[row]))
    runs: list[list[int]] = []
    current: list[int] = []
    used = 0
    for row in order:
        joinable = (
            current
            and doc_ids[current[-1]] == doc_ids[row]
            and not is_table[row]
            and not is_table[current[-1]]
            and used + words[row] <= max_words
        )
        if joinable:
            current.append(row)
            used += words[row]
            continue
        if current:
            runs.append(current)
        current, used = [row], words[row]
    if current:
        runs.append(current)
    return runs


def passage_text(rows: Sequence[Mapping]) -> str:
    """The passage's Markdown: its first chunk as stored (breadcrumb included), then each
    later chunk's own text, under its heading when it opens another section.

    The breadcrumb is not repeated for every chunk: it would say the same thing several times
    and, in an evaluation, match excerpts the passage holds only as a heading.
    """
    if not rows:
        return ""
    parts = [rows[0]["text_chat"]]
    for previous, row in pairwise(rows):
        path = list(row.get("heading_path") or [])
        body = chunk_body(row["text_chat"], path)
        if path and path != list(previous.get("heading_path") or []):
            body = f"{path[-1]}\n\n{body}"
        parts.append(body)
    return "\n\n".join(parts)
