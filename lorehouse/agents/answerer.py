"""Answerer: the answer with inline [n] citations, from an LLM or extracted from the context.

The LLM is told to cite and to say when the passages do not hold the answer; its reply is
checked (cites only passages it was given, cites at least one, or says "not found") and
retried otherwise. Without an LLM the answer is made of the context sentences most similar to
the question, each with its citation, and "not found" when none is similar enough.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
from segtok.segmenter import split_multi

from lorehouse.chunking import plain_text
from lorehouse.embedding_providers import Embedder
from lorehouse.llm import LLMClient
from lorehouse.retrieval import SearchHit

PROMPT_VERSION = "answerer.v1"
NOT_FOUND_MARKER = "NOT_IN_DOCUMENTS"
NOT_FOUND_ANSWER = (
    "The documents available to you do not answer this question, so I will not guess."
)
_CITATION = re.compile(r"\[(\d{1,3})\]")
_PROMPT_SCAFFOLDING = ("Passages (in document order)", "Search queries used to find", "Rules:")
_LIST_MARKER = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])\s+")


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

    def cited_passages(self) -> list[tuple[int, int]]:
        """(citation number, context passage number) of each citation, in order of use."""
        return list(zip(self.cited, self.passages or self.cited, strict=True))


def numbered_by_use(draft: DraftAnswer) -> DraftAnswer:
    """The draft with its citations renumbered 1..n in the order its text first uses them.

    A reader meets [1] first, then [2]; the passage each number stands for is kept in
    `passages`, so the citation list still points at the right chunk.
    """
    renumbered = {passage: number for number, passage in enumerate(draft.cited, start=1)}
    text = _CITATION.sub(
        lambda match: f"[{renumbered.get(int(match.group(1)), int(match.group(1)))}]", draft.text
    )
    return DraftAnswer(text, list(renumbered.values()), draft.answerable, list(renumbered))


def context_block(hits: Sequence[SearchHit]) -> str:
    """Numbered passages with title, section and pages, as the answer prompt shows them."""
    blocks = []
    for number, hit in enumerate(hits, start=1):
        where = " > ".join(hit.heading_path)
        pages = f", pages {hit.page_start}-{hit.page_end}" if hit.page_start else ""
        body = hit.text_chat.split("\n", 1)[-1].strip()
        blocks.append(f"[{number}] {hit.title or hit.rel_path} - {where}{pages}\n{body}")
    return "\n\n".join(blocks)


def citations_in(text: str) -> list[int]:
    """Cited passage numbers in order of first appearance."""
    return list(dict.fromkeys(int(n) for n in _CITATION.findall(text)))


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


def draft_from_llm_text(text: str) -> DraftAnswer:
    """The draft a validated LLM reply stands for."""
    stripped = text.strip()
    if stripped.startswith(NOT_FOUND_MARKER):
        return DraftAnswer(NOT_FOUND_ANSWER, [], answerable=False)
    return DraftAnswer(stripped, citations_in(stripped), answerable=True)


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
    return draft_from_llm_text(text)


def stream_llm_answer(
    client: LLMClient, question: str, queries: Sequence[str], hits: Sequence[SearchHit]
) -> Iterator[str]:
    """The LLM's answer as it is generated (validated by the caller once complete)."""
    return client.stream_text(
        client.prompt(PROMPT_VERSION), **answer_prompt_values(question, queries, hits)
    )


def _units(hit: SearchHit) -> list[str]:
    """Sentences of a passage; rows (with their header) of a table passage."""
    body = hit.text_chat.split("\n", 1)[-1]
    if hit.is_table:
        rows = [line for line in body.splitlines() if line.strip().startswith("|")]
        rows = [r for r in rows if not set(r.replace("|", "").strip()) <= set("-: ")]
        if len(rows) > 1:
            header = [c.strip() for c in rows[0].strip("|").split("|")]
            units = []
            for row in rows[1:]:
                cells = [c.strip() for c in row.strip("|").split("|")]
                pairs = [f"{h}: {c}" for h, c in zip(header, cells, strict=False) if c]
                units.append("; ".join(pairs) + ".")
            return units
    units = []
    for line in plain_text(body).splitlines():
        line = _LIST_MARKER.sub("", line).strip()
        units += [s.strip() for s in split_multi(line) if len(s.split()) >= 3]
    return units


def answer_extractively(
    embedder: Embedder,
    question: str,
    hits: Sequence[SearchHit],
    min_similarity: float,
    max_sentences: int = 3,
    spread: float = 0.12,
) -> DraftAnswer:
    """The context sentences closest to the question, each cited; "not found" below a floor.

    Sentences within `spread` of the best one are kept (at most `max_sentences`), in the
    order the context presents them, so the answer reads like the source.
    """
    candidates = [
        (number, order, unit)
        for number, hit in enumerate(hits, start=1)
        for order, unit in enumerate(_units(hit))
    ]
    if not candidates:
        return DraftAnswer(NOT_FOUND_ANSWER, [], answerable=False)
    vectors = embedder.embed([question, *(unit for _, _, unit in candidates)])
    similarities = vectors[1:] @ vectors[0]
    best = float(np.max(similarities))
    if best < min_similarity:
        return DraftAnswer(NOT_FOUND_ANSWER, [], answerable=False)
    floor = max(min_similarity, best - spread)
    ranked = sorted(range(len(candidates)), key=lambda i: -similarities[i])
    chosen = sorted(
        [i for i in ranked if similarities[i] >= floor][:max_sentences],
        key=lambda i: candidates[i][:2],
    )
    text = " ".join(f"{candidates[i][2]} [{candidates[i][0]}]" for i in chosen)
    return numbered_by_use(DraftAnswer(text, citations_in(text), answerable=True))
