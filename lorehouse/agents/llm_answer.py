"""The LLM's answer: prompted with numbered passages, checked, retried.

The LLM is told to cite and to say when the passages do not hold the answer; its reply is
checked (cites only passages it was given, cites at least one, or says "not found") and
retried otherwise. Its excerpts are the context units the extractive answer reads, so both
kinds of answer show the same evidence.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace

from lorehouse.agents.citations import (
    CITATION,
    DraftAnswer,
    citations_in,
    source_text,
    without_source_markers,
)
from lorehouse.agents.extractive.excerpts import excerpts_of
from lorehouse.agents.extractive.question import ANALYZER
from lorehouse.agents.extractive.units import context_units
from lorehouse.agents.replies import not_found
from lorehouse.llm import LLMClient
from lorehouse.search.hits import SearchHit
from lorehouse.text import sentences

PROMPT_VERSION = "answerer.v2"


NOT_FOUND_MARKER = "NOT_IN_DOCUMENTS"


_PROMPT_SCAFFOLDING = ("Passages (in document order)", "Search queries used to find", "Rules:")


def context_block(hits: Sequence[SearchHit]) -> str:
    """Numbered passages with title, section and pages, as the answer prompt shows them.

    The passages' own reference markers are left out: an LLM copying "[106]" would cite a
    passage that does not exist, and a copied "[2]" would cite the wrong one.
    """
    blocks = []
    for number, hit in enumerate(hits, start=1):
        where = " > ".join(hit.heading_path)
        pages = f", pages {hit.page_start}-{hit.page_end}" if hit.page_start else ""
        body = without_source_markers(source_text(hit)).strip()
        blocks.append(f"[{number}] {hit.title or hit.rel_path} - {where}{pages}\n{body}")
    return "\n\n".join(blocks)


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
    units = context_units(hits)
    said: dict[int, set[str]] = {}
    for sentence in sentences(draft.text):
        for passage in citations_in(sentence):
            said.setdefault(passage, set()).update(ANALYZER.terms(CITATION.sub(" ", sentence)))
    supporting = []
    for passage in draft.cited:
        candidates = [u for u in units if u.passage == passage]
        if candidates:
            terms = said.get(passage, set())
            supporting.append(
                max(candidates, key=lambda u: len(terms & set(ANALYZER.terms(u.text))))
            )
    backing = {(unit.passage, unit.order) for unit in supporting}
    excerpts = excerpts_of(units, supporting, supporting, backing)
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
