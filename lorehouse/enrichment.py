"""Summaries, FAQs and keywords for chunks and documents, by an LLM or extractively.

With a model configured (LOREHOUSE_LLM_MODEL), every chunk gets 2-4 FAQs and 3-8 keywords, a
table chunk a two-line summary, and every document a 2-3 sentence summary (and a title when the
file has none). Without one, enrichment is extractive and says so in `enrichment_mode`: the
document summary is its most central sentences (by the words they share), keywords
come from YAKE, and there are no FAQs, because inventing questions is exactly what an
extractive method cannot do honestly.

Results are cached by (text hash, prompt version, model), so a rerun over unchanged chunks
makes no LLM calls, and a chunk whose enrichment fails keeps its failure on record while the
run goes on.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Annotated, Any

import numpy as np
from pydantic import BaseModel, Field, StringConstraints
from segtok.segmenter import split_single

from lorehouse.llm import LLMClient, LLMFailure, as_json
from lorehouse.stages.progress import ProgressCallback
from lorehouse.text import BREADCRUMB_SEPARATOR

if TYPE_CHECKING:
    import yake

EXTRACTIVE_MODE = "extractive"
EXTRACTIVE_MODEL = "extractive/central-tfidf+yake-3"
_WORD = re.compile(r"\w+")
CHUNK_PROMPT = "chunk_enrichment.v1"
TABLE_PROMPT = "table_enrichment.v1"
DOCUMENT_PROMPT = "document_summary.v1"
_DOCUMENT_PROMPT_CHARS = 6000


# Bounded strings: a schema-constrained local model cannot ramble, and a keyword is a phrase.
_Question = Annotated[str, StringConstraints(strip_whitespace=True, min_length=8, max_length=200)]
_Keyword = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=60)]


class ChunkEnrichment(BaseModel):
    """What an LLM says about a prose chunk."""

    faqs: list[_Question] = Field(min_length=2, max_length=4)
    keywords: list[_Keyword] = Field(min_length=3, max_length=8)


class TableEnrichment(BaseModel):
    """What an LLM says about a table chunk: a summary in words, which questions match
    better than the table's cells."""

    summary: str = Field(min_length=10, max_length=600)
    keywords: list[_Keyword] = Field(min_length=3, max_length=8)


class DocumentSummary(BaseModel):
    """A catalogue entry for the document list."""

    summary: str = Field(min_length=20, max_length=1200)
    title: str = Field(default="", max_length=200)


# Prompt version and answer model for a prose chunk (False) and a table chunk (True).
_CHUNK_PROMPTS: dict[bool, tuple[str, type[BaseModel]]] = {
    False: (CHUNK_PROMPT, ChunkEnrichment),
    True: (TABLE_PROMPT, TableEnrichment),
}


@dataclass(frozen=True)
class ChunkInput:
    chunk_id: str
    doc_id: str
    breadcrumb: str
    text_chat: str
    text_embed: str
    is_table: bool


@dataclass(frozen=True)
class DocumentInput:
    doc_id: str
    rel_path: str
    title: str | None
    chunks: list[ChunkInput]


@dataclass
class EnrichmentReport:
    """Counts for asset metadata: what was computed, reused and lost."""

    mode: str
    model: str
    chunks: int = 0
    documents: int = 0
    #: Documents left as they were: enriched before from the chunks they have now.
    documents_up_to_date: int = 0
    cache_hits: int = 0
    computed: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)
    llm_calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    seconds: float = 0.0


@dataclass
class EnrichmentResult:
    chunk_rows: list[dict[str, Any]]
    document_rows: list[dict[str, Any]]
    report: EnrichmentReport


CacheLookup = Callable[[Sequence[str]], dict[str, str]]
CacheWriter = Callable[[Sequence[dict[str, Any]]], None]


class Enricher:
    """Enriches chunks and documents with a configured LLM, or extractively without one."""

    def __init__(self, client: LLMClient | None, concurrency: int = 4) -> None:
        self.client = client
        self.concurrency = max(1, concurrency)

    @cached_property
    def _keywords(self) -> yake.KeywordExtractor:
        """YAKE's extractor, built on first use: the code location builds an Enricher for
        its version, and importing YAKE (with networkx under it) would be paid by every
        process that loads it, while only the enrichment stage extracts keywords."""
        import yake

        return yake.KeywordExtractor(lan="en", n=3, top=8, dedupLim=0.7)

    @property
    def mode(self) -> str:
        return "llm" if self.client else EXTRACTIVE_MODE

    @property
    def model(self) -> str:
        return self.client.model if self.client else EXTRACTIVE_MODEL

    @property
    def version(self) -> str:
        """What its answers depend on: the model, and with an LLM each prompt's name and
        content (the cache is keyed by the same)."""
        if not self.client:
            return self.model
        prompts = (CHUNK_PROMPT, TABLE_PROMPT, DOCUMENT_PROMPT)
        return "|".join([self.model, *(self.client.prompt(p).fingerprint for p in prompts)])

    def enrich(
        self,
        documents: Sequence[DocumentInput],
        cached: CacheLookup,
        save: CacheWriter,
        on_progress: ProgressCallback | None = None,
        checkpoint_every: int | None = None,
    ) -> EnrichmentResult:
        """Enriches every chunk and document, reusing cached answers by key.

        New answers are handed to `save` every `checkpoint_every` completions, so a run killed
        halfway keeps what it paid for and its rerun asks only for the rest. By default every
        10 LLM answers, each of which costs a call, and every 500 extractive ones: a save is
        a DuckDB transaction of its own, which costs more than ten extractive answers.
        """
        if checkpoint_every is None:
            checkpoint_every = 10 if self.client else 500
        started = time.perf_counter()
        report = EnrichmentReport(mode=self.mode, model=self.model)
        # The client's usage adds up over its life (batches, partitions): this call's share
        # is the difference.
        used_before = _usage_totals(self.client)
        jobs: list[tuple[str, str, str, Callable[[], BaseModel]]] = []  # key, kind, id, work
        for document in documents:
            for chunk in document.chunks:
                kind = "table" if chunk.is_table else "chunk"
                key = self._key(kind, chunk.text_chat, _CHUNK_PROMPTS[chunk.is_table][0])
                jobs.append((key, kind, chunk.chunk_id, self._chunk_work(document, chunk)))
            text = "\n\n".join(c.text_chat for c in document.chunks)
            key = self._key("document", text, DOCUMENT_PROMPT)
            jobs.append((key, "document", document.doc_id, self._document_work(document)))
        hits = cached([key for key, *_ in jobs])
        answers: dict[str, tuple[dict | None, str | None]] = {}
        unsaved: list[dict[str, Any]] = []
        pending = [job for job in jobs if job[0] not in hits]
        for key, *_ in jobs:
            if key in hits:
                answers[key] = (json.loads(hits[key]), None)
        report.cache_hits = len(jobs) - len(pending)

        def run(job: tuple[str, str, str, Callable[[], BaseModel]]) -> dict[str, Any] | None:
            key, kind, _, work = job
            try:
                value = work()
            except LLMFailure as error:
                answers[key] = (None, str(error))
                return None
            answers[key] = (value.model_dump(), None)
            return {"cache_key": key, "kind": kind, "model": self.model, "payload": as_json(value)}

        workers = self.concurrency if self.client else 1
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for done, row in enumerate(pool.map(run, pending), start=1):
                if row is not None:
                    unsaved.append(row)
                if len(unsaved) >= checkpoint_every:
                    save(unsaved)
                    unsaved = []
                if on_progress is not None:
                    on_progress(done, len(pending))
        if unsaved:
            save(unsaved)
        report.computed = len(pending)

        chunk_rows, document_rows = [], []
        for key, kind, item_id, _ in jobs:
            payload, error = answers.get(key, (None, "not computed"))
            if error:
                report.failures.append((item_id, error))
            if kind == "document":
                document_rows.append(self._document_row(item_id, payload, error))
            else:
                chunk_rows.append(self._chunk_row(item_id, kind, payload, error))
        doc_of = {c.chunk_id: d.doc_id for d in documents for c in d.chunks}
        for row in chunk_rows:
            row["doc_id"] = doc_of[row["chunk_id"]]
        report.chunks = len(chunk_rows)
        report.documents = len(document_rows)
        calls, tokens_in, tokens_out, cost = (
            now - before
            for now, before in zip(_usage_totals(self.client), used_before, strict=True)
        )
        report.llm_calls, report.tokens_in, report.tokens_out = (
            int(calls),
            int(tokens_in),
            int(tokens_out),
        )
        report.cost_usd = cost
        report.seconds = time.perf_counter() - started
        return EnrichmentResult(chunk_rows, document_rows, report)

    # -- the work per item ---------------------------------------------------------------------

    def _chunk_work(self, document: DocumentInput, chunk: ChunkInput) -> Callable[[], BaseModel]:
        title = document.title or document.rel_path
        if self.client is not None:
            client = self.client
            prompt, answer_model = _CHUNK_PROMPTS[chunk.is_table]
            return lambda: (
                client.complete(
                    client.prompt(prompt),
                    answer_model,
                    title=title,
                    breadcrumb=chunk.breadcrumb,
                    text=chunk.text_chat,
                ).value
            )
        if chunk.is_table:
            return lambda: self._extractive_table(chunk)
        return lambda: _Keywords(keywords=self._extract_keywords(chunk))

    def _document_work(self, document: DocumentInput) -> Callable[[], BaseModel]:
        if self.client is not None:
            client = self.client
            text = "\n\n".join(c.text_chat for c in document.chunks)[:_DOCUMENT_PROMPT_CHARS]
            return lambda: (
                client.complete(
                    client.prompt(DOCUMENT_PROMPT),
                    DocumentSummary,
                    rel_path=document.rel_path,
                    title=document.title or "(missing)",
                    text=text,
                ).value
            )
        return lambda: _extractive_summary(document)

    def _extract_keywords(self, chunk: ChunkInput) -> list[str]:
        # The breadcrumb line repeats the headings every chunk of the section shares; a chunk
        # without headings starts with its own words, which are its keywords.
        text = chunk.text_embed
        has_breadcrumb = bool(chunk.breadcrumb) and text.startswith(chunk.breadcrumb)
        body = text[len(chunk.breadcrumb) :].lstrip("\n") if has_breadcrumb else text
        found = [phrase for phrase, _ in self._keywords.extract_keywords(body)]
        kept: list[str] = []
        # YAKE returns "Marcus Lee", "Marcus" and "Lee" alike; a word already inside a kept
        # phrase adds nothing for retrieval.
        for phrase in sorted(found, key=lambda p: -len(p.split())):
            words = phrase.lower().split()
            if not any(_contains(k.lower().split(), words) for k in kept):
                kept.append(phrase)
        if not kept:
            # Too little text for YAKE (a page number, one cell, a script it does not read):
            # the chunk's own words, else its nearest heading's, so every enriched chunk can
            # be found by what it says.
            heading = chunk.breadcrumb.rsplit(BREADCRUMB_SEPARATOR, 1)[-1]
            words = _WORD.findall(body) or _WORD.findall(heading)
            return list(dict.fromkeys(words))[:8]
        order = {phrase: index for index, phrase in enumerate(found)}
        return sorted(kept, key=order.__getitem__)[:8]

    def _extractive_table(self, chunk: ChunkInput) -> BaseModel:
        lines = chunk.text_chat.splitlines()
        table = [line for line in lines if line.startswith("|")]
        header = [c.strip() for c in table[0].strip("|").split("|")] if table else []
        rows = max(0, len(table) - 2)
        where = chunk.breadcrumb.split(BREADCRUMB_SEPARATOR)[-1] if chunk.breadcrumb else "table"
        summary = (
            f"Table in '{where}' with columns: {', '.join(h for h in header if h)}.\n"
            f"{rows} row(s) in this part; first row: {table[2].strip('| ') if rows else 'none'}."
        )
        keywords = [h for h in header if h][:8]
        keywords += [k for k in self._extract_keywords(chunk) if k not in keywords]
        return _TableExtract(summary=summary[:600], keywords=keywords[:8])

    def _key(self, kind: str, text: str, prompt: str) -> str:
        version = self.client.prompt(prompt).fingerprint if self.client else EXTRACTIVE_MODE
        digest = hashlib.sha256(text.encode()).hexdigest()
        return hashlib.sha256(f"{kind}|{digest}|{version}|{self.model}".encode()).hexdigest()

    # -- rows ----------------------------------------------------------------------------------

    def _chunk_row(
        self, chunk_id: str, kind: str, payload: dict | None, error: str | None
    ) -> dict[str, Any]:
        payload = payload or {}
        return {
            "chunk_id": chunk_id,
            "summary": payload.get("summary"),
            "faqs": list(payload.get("faqs", [])),
            "keywords": list(payload.get("keywords", [])),
            "enrichment_mode": self.mode,
            "model": self.model,
            "prompt_version": _CHUNK_PROMPTS[kind == "table"][0]
            if self.client
            else EXTRACTIVE_MODE,
            "status": "failed" if error else "enriched",
            "error": error,
        }

    def _document_row(self, doc_id: str, payload: dict | None, error: str | None) -> dict[str, Any]:
        payload = payload or {}
        return {
            "doc_id": doc_id,
            "summary": payload.get("summary"),
            "generated_title": payload.get("title") or None,
            "enrichment_mode": self.mode,
            "model": self.model,
            "status": "failed" if error else "enriched",
            "error": error,
        }


class _Keywords(BaseModel):
    keywords: list[str]


class _TableExtract(BaseModel):
    summary: str
    keywords: list[str]


class _ExtractiveSummary(BaseModel):
    summary: str
    title: str = ""


def _extractive_summary(document: DocumentInput, sentences_wanted: int = 3) -> BaseModel:
    """The document's most central sentences, in reading order: those whose words the other
    sentences share most (each sentence's summed TF-IDF cosine with the others).

    The sum, not PageRank over the same weights: word overlap leaves sentences unlinked, and
    PageRank gives each unlinked group of two off-topic sentences as much rank as a topic
    that five sentences share. Not over sentence embeddings: embedding up to 300 sentences
    a document is a second model pass over the corpus, as costly as embedding its chunks,
    for a summary that only feeds the document's profile and the enriched BM25 field.
    """
    from sklearn.feature_extraction.text import TfidfVectorizer

    sentences: list[str] = []
    for chunk in document.chunks:
        if chunk.is_table:
            continue
        body = chunk.text_embed.split("\n", 1)[-1] if chunk.breadcrumb else chunk.text_embed
        for paragraph in body.split("\n"):
            if _LIST_OR_TABLE_LINE.match(paragraph) or "|" in paragraph:
                continue  # list items and table rows are not summary sentences
            sentences += [s.strip() for s in split_single(paragraph) if 6 <= len(s.split()) <= 60]
        if len(sentences) >= 300:  # the opening of a long document is enough to rank
            break
    title = document.title or ""
    if not sentences:
        first = document.chunks[0].text_embed if document.chunks else document.rel_path
        return _ExtractiveSummary(summary=" ".join(first.split())[:300], title=title)
    if len(sentences) <= sentences_wanted:
        return _ExtractiveSummary(summary=" ".join(sentences), title=title)
    try:
        # Rows come L2-normalized, so their products are cosines.
        weights = TfidfVectorizer(sublinear_tf=True, stop_words="english").fit_transform(sentences)
    except ValueError:  # nothing but stop words: no sentence is more central than another
        return _ExtractiveSummary(summary=" ".join(sentences[:sentences_wanted]), title=title)
    similarity = (weights @ weights.T).toarray()
    np.fill_diagonal(similarity, 0.0)
    ranks = similarity.sum(axis=1)
    # A stable sort: sentences of equal rank are taken in reading order.
    chosen = sorted(np.argsort(-ranks, kind="stable")[:sentences_wanted])
    return _ExtractiveSummary(summary=" ".join(sentences[i] for i in chosen), title=title)


_LIST_OR_TABLE_LINE = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s")


def _contains(longer: list[str], shorter: list[str]) -> bool:
    size = len(shorter)
    return any(longer[i : i + size] == shorter for i in range(len(longer) - size + 1))


def _usage_totals(client: LLMClient | None) -> tuple[float, float, float, float]:
    """(calls, tokens in, tokens out, cost) a client has used so far; zeros without one."""
    if client is None:
        return (0, 0, 0, 0.0)
    usage = client.usage
    return (usage.calls, usage.tokens_in, usage.tokens_out, usage.cost_usd)
