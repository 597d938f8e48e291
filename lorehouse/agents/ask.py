"""The answer pipeline: optimize the query, pick sources, retrieve, post-process, answer.

Each step is a small function of its own module; this module runs them in order, records a
trace, and decides what happens when a step cannot run: steps that need an LLM are `skipped`
without one, and an LLM step that fails after its retries falls back to the offline method
(`fallback`) so a question is always answered, never a 500.

Longer than most modules because the pipeline's typed response and trace, which the API
returns as they are, sit with the runner that fills them.
"""

from __future__ import annotations

import queue
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime
from typing import Literal

from pydantic import BaseModel, Field

from lorehouse.agents.assertion import LEAD_MODEL
from lorehouse.agents.citations import DraftAnswer, DraftExcerpt
from lorehouse.agents.extractive.answer import answer_extractively
from lorehouse.agents.extractive.lead import named_terms, spelled_out
from lorehouse.agents.llm_answer import (
    answer_with_llm,
    check_llm_answer,
    draft_from_llm_text,
    stream_llm_answer,
    with_excerpts,
)
from lorehouse.agents.post_processor import post_process
from lorehouse.agents.query_optimizer import Turn, carry_over_offline, optimize_query
from lorehouse.agents.replies import ReplyLanguage, not_found, not_mentioned, reply_language
from lorehouse.agents.scope import narrows, scope_not_saying
from lorehouse.agents.source_identifier import Sources, choose_with_llm, rank_documents
from lorehouse.agents.trace import AskTrace, StepTrace, timed_step
from lorehouse.embedding.base import Embedder, VectorCache, query_vectors
from lorehouse.llm import LLMClient, LLMFailure
from lorehouse.search.filters import SearchFilters
from lorehouse.search.hits import SearchHit
from lorehouse.search.retriever import Retriever, SearchMode
from lorehouse.search.tables import DocumentTable

AnswerMode = Literal["llm", "extractive"]
#: Documents shown to the LLM source identifier, pre-ranked offline, so its prompt stays small
#: however large the corpus.
SOURCE_CANDIDATES = 30


@dataclass(frozen=True)
class AskOptions:
    """How the pipeline behaves. Built by the composition root from the deployment's
    settings (`Lorehouse.ask_options`), which hold every default and say why: none is
    repeated here."""

    context_chunks: int
    answer_min_similarity: float
    #: Below answer_min_similarity but not this, the closest passages are shown, unasserted.
    answer_passages_min_similarity: float
    answer_max_words: int
    #: Extractive answers assert their lead only when it is at least this likely to answer.
    answer_assert_threshold: float
    #: Extractive answers decline a question naming what no readable document mentions.
    decline_unmentioned: bool


class Citation(BaseModel):
    """A cited chunk: where the sentence came from, down to section and pages."""

    number: int
    chunk_id: str
    doc_id: str
    title: str | None
    heading_path: list[str]
    page_start: int | None
    page_end: int | None
    source_uri: str
    rel_path: str
    citation: str = Field(
        description="Path of the chunk's preview in the API, pinned to the index version the "
        "answer was read from."
    )
    index_version: int | None = Field(
        default=None, description="The version of the chunks table the answer was read from."
    )


class ExcerptSentence(BaseModel):
    text: str
    supports: bool = Field(description="Whether the answer rests on this sentence.")


class Excerpt(BaseModel):
    """What one cited source says, under its heading, the supporting sentences marked."""

    number: int = Field(description="The citation number the answer uses for this source.")
    chunk_id: str
    title: str | None
    heading_path: list[str]
    rel_path: str
    page_start: int | None
    page_end: int | None
    sentences: list[ExcerptSentence]
    citation: str = Field(
        description="Path of the chunk's preview in the API, pinned to its index version."
    )


class AskResponse(BaseModel):
    """The answer, what it cites, and how it was produced.

    `answer` is the lead: the sentence (two for a question of two asks) that states the asked
    fact, with its citation. `excerpts` show what each cited source says, apart from it. When
    the documents the caller may read do not answer, `answerable` is false, `answer` says so
    and `related` lists the nearest sources. Between the two, when the closest passages may
    not state the answer, `asserted` is false: `answer` says the documents don't state it
    directly, and the excerpts, each best sentence marked, are the answer.
    """

    answer_id: str = Field(
        default_factory=lambda: uuid.uuid4().hex,
        description="Names this answer in feedback (POST /v1/feedback).",
    )
    question: str
    answer: str
    mode: AnswerMode
    answerable: bool
    asserted: bool = Field(
        default=False,
        description="Whether `answer` states the answer (true), or only introduces the closest "
        "passages, which may not state it (false, with `answerable` true); false when not "
        "found.",
    )
    beyond_filters: bool = Field(
        default=False,
        description="Whether the documents the filters select asserted nothing, and the "
        "answer comes from the rest of the corpus: `answer` then opens by saying what the "
        'filters cover does not say it ("Pages 2-4 of employee-handbook.pdf do not say. '
        'Elsewhere: ...").',
    )
    degraded: bool = False
    degraded_reason: str | None = None
    language: ReplyLanguage = Field(
        default="en",
        description="The language Lorehouse's own words in the answer are in (the question's: "
        "en or de), for a page to write its notes in the same.",
    )
    citations: list[Citation]
    excerpts: list[Excerpt] = Field(
        default_factory=list, description="One per cited source, in citation order."
    )
    related: list[Citation] = Field(
        default_factory=list,
        description="When the documents do not answer: the nearest sources, unnumbered (0).",
    )
    original_query: str
    optimized_queries: list[str]
    asked_at: datetime
    answered_at: datetime
    trace: AskTrace
    totals: dict[str, float]


@dataclass
class Prepared:
    """Steps 1-4 done: the queries, every hit ranked, and the context the answerer reads."""

    trace: AskTrace
    queries: list[str]
    context: list[SearchHit]
    asked_at: datetime
    ranked: list[SearchHit]
    #: What the question names that no document the caller may read mentions: the
    #: extractive answer declines, whatever the nearest sentences say.
    unmentioned: list[str]


class AskPipeline:
    """Answers questions over one index, as one caller, with or without an LLM."""

    def __init__(
        self,
        retriever: Retriever,
        documents: DocumentTable,
        embedder: Embedder,
        client: LLMClient | None,
        options: AskOptions,
        kept_vectors: VectorCache | None = None,
    ) -> None:
        """`kept_vectors` outlives the pipeline: the context sentences' vectors, shared by
        every question a deployment answers extractively."""
        self.retriever = retriever
        self.documents = documents
        self.embedder = embedder
        self.client = client
        self.options = options
        self.kept_vectors = kept_vectors

    # -- the whole pipeline ---------------------------------------------------------------------

    def ask(
        self,
        question: str,
        history: Sequence[Turn] = (),
        filters: SearchFilters | None = None,
        top_k: int = 8,
        caller_groups: Sequence[str] = (),
        today: date | None = None,
    ) -> AskResponse:
        """Runs every step and returns the cited answer with its trace."""
        prepared = self.prepare(question, history, filters, top_k, caller_groups, today)
        with timed_step(prepared.trace, "answerer", self._usage()) as step:
            draft, mode, degraded = self._answer(question, prepared, step)
        request = (question, history, filters, top_k, caller_groups, today)
        prepared, draft, beyond = self._beyond_filters(request, prepared, draft, mode)
        return self._response(question, prepared, draft, mode, degraded, beyond)

    def stream(
        self,
        question: str,
        history: Sequence[Turn] = (),
        filters: SearchFilters | None = None,
        top_k: int = 8,
        caller_groups: Sequence[str] = (),
        today: date | None = None,
    ) -> Iterator[str | StepTrace | AskResponse]:
        """The steps before the answer as they are done, answer text pieces as they are
        produced, then the complete AskResponse.

        With an LLM the pieces are its tokens; if the finished reply turns out unusable the
        final response carries the extractive answer, marked degraded, and clients replace
        what they showed with it.
        """
        # Steps 1-4 run on a worker thread so each is shown as soon as it finishes (with an
        # LLM the first two take seconds); the answer is then produced here.
        finished: queue.SimpleQueue[StepTrace | None] = queue.SimpleQueue()
        outcome: dict[str, Prepared | BaseException] = {}

        def prepare() -> None:
            try:
                outcome["prepared"] = self.prepare(
                    question, history, filters, top_k, caller_groups, today, finished.put
                )
            except BaseException as error:  # noqa: BLE001 - raised again in the caller
                outcome["error"] = error
            finally:
                finished.put(None)

        worker = threading.Thread(target=prepare, name="ask-prepare", daemon=True)
        worker.start()
        while (step := finished.get()) is not None:
            yield step
        worker.join()
        if "error" in outcome:
            raise outcome["error"]
        prepared = outcome["prepared"]
        assert isinstance(prepared, Prepared)
        streams_llm = self.client is not None and bool(prepared.context)
        with timed_step(prepared.trace, "answerer", self._usage()) as step:
            if streams_llm:
                pieces: list[str] = []
                problem: str | None = None
                try:
                    for piece in stream_llm_answer(
                        self.client, question, prepared.queries, prepared.context
                    ):
                        pieces.append(piece)
                        yield piece
                    problem = check_llm_answer("".join(pieces), len(prepared.context))
                except LLMFailure as error:
                    problem = str(error)
                if problem is None:
                    draft = with_excerpts(
                        draft_from_llm_text("".join(pieces), question), prepared.context
                    )
                    mode, degraded = "llm", None
                else:
                    step.status = "fallback"
                    step.detail = problem
                    draft = self._extractive(question, prepared)
                    mode, degraded = "extractive", problem
            else:
                draft, mode, degraded = self._answer(question, prepared, step)
        request = (question, history, filters, top_k, caller_groups, today)
        prepared, draft, beyond = self._beyond_filters(request, prepared, draft, mode)
        if not streams_llm:
            yield draft.text
        yield self._response(question, prepared, draft, mode, degraded, beyond)

    # -- steps 1-4 ------------------------------------------------------------------------------

    def prepare(
        self,
        question: str,
        history: Sequence[Turn],
        filters: SearchFilters | None,
        top_k: int,
        caller_groups: Sequence[str],
        today: date | None,
        on_step: Callable[[StepTrace], None] | None = None,
    ) -> Prepared:
        """Query optimization, source identification, retrieval and post-processing;
        `on_step` hears of each step as it finishes."""
        asked_at = datetime.now(UTC)
        trace = AskTrace(original_query=question)
        trace._on_step = on_step
        usage = self._usage()

        with timed_step(trace, "query_optimizer", usage) as step:
            queries, standalone = [question], question
            if self.client is None:
                standalone = carry_over_offline(question, list(history))
                queries = [standalone]
                step.status, step.detail = "skipped", "no LLM configured"
                if standalone != question:
                    step.detail += "; a follow-up: searched after the previous question"
            else:
                try:
                    optimized = optimize_query(
                        self.client, question, list(history), today or asked_at.date()
                    )
                    queries, standalone = optimized.queries(), optimized.standalone
                except LLMFailure as error:
                    step.status, step.detail = "fallback", f"original question used: {error}"
            trace.optimized_queries = queries

        with timed_step(trace, "source_identifier", usage) as step:
            sources = self._identify_sources(standalone, caller_groups, step)
            if filters and filters.doc_ids is not None:
                wanted = set(filters.doc_ids)
                narrowed = [d for d in sources if d in wanted] if sources != "all" else []
                sources = narrowed or list(filters.doc_ids)
            trace.sources = sources
            trace.sources_required = sources != "all"

        with timed_step(trace, "retrieval") as step:
            hits = self._retrieve(
                queries,
                sources,
                trace.sources_required,
                filters,
                top_k,
                caller_groups,
                trace,
                step,
            )

        with timed_step(trace, "post_processor") as step:
            context = post_process(hits, self.options.context_chunks)
            step.detail = f"{len(hits)} hits -> {len(context)} context chunks"
            trace.context_chunk_ids = [hit.chunk_id for hit in context]
            named = named_terms(standalone) if self.options.decline_unmentioned else []
            unmentioned = [
                term
                for term in self.retriever.unmentioned(named, caller_groups)
                if not any(spelled_out(term, hit.text_chat) for hit in context)
            ]
            if unmentioned:
                step.detail += f"; no readable document mentions {', '.join(unmentioned)}"
        return Prepared(trace, queries, context, asked_at, hits, unmentioned)

    def _identify_sources(
        self,
        question: str,
        caller_groups: Sequence[str],
        step,  # noqa: ANN001
    ) -> Sources:
        """The documents an LLM picks from the caller's best-matching profiles, or "all".

        Without an LLM there is no choice to make: a guess from the profiles alone changed no
        ranking the search did not already make, and cost an embedding and a search per ask.
        """
        if self.client is None:
            step.status, step.detail = "skipped", "no LLM configured; searched every document"
            return "all"
        if not self.documents.exists():
            step.status, step.detail = "skipped", "no document index"
            return "all"
        query_vector = query_vectors(self.embedder, [question])[0]
        ranked = rank_documents(
            self.documents, query_vector, question, caller_groups, SOURCE_CANDIDATES
        )
        try:
            return choose_with_llm(self.client, question, ranked)
        except LLMFailure as error:
            step.status, step.detail = "fallback", f"searched every document: {error}"
            return "all"

    def _retrieve(
        self,
        queries: Sequence[str],
        sources: Sources,
        required: bool,
        filters: SearchFilters | None,
        top_k: int,
        caller_groups: Sequence[str],
        trace: AskTrace,
        step,  # noqa: ANN001
    ) -> list[SearchHit]:
        """Each query in hybrid mode, the results unioned (best score of each chunk kept);
        a single query's hits in the retriever's order.

        Chosen sources restrict the search to them (all documents when that finds nothing).
        """
        base = filters or SearchFilters()
        within = base if sources == "all" else base.model_copy(update={"doc_ids": sources})
        restrict = sources != "all" and required
        best: dict[str, SearchHit] = {}
        widened = []
        hits: list[SearchHit] = []
        for query in queries:
            hits = self.retriever.search(
                query, top_k, SearchMode.HYBRID, within if restrict else filters, caller_groups
            ).hits
            if restrict and not hits:
                widened.append(query)
                hits = self.retriever.search(
                    query, top_k, SearchMode.HYBRID, filters, caller_groups
                ).hits
            trace.retrieved[query] = [hit.chunk_id for hit in hits]
            for hit in hits:
                if hit.chunk_id not in best or hit.score > best[hit.chunk_id].score:
                    best[hit.chunk_id] = hit
        if widened:
            step.status = "fallback"
            step.detail = f"nothing in the chosen documents for {widened}; searched all"
        if len(queries) == 1:
            # One query's order is the retriever's: a question with several asks comes back
            # with each ask's hits taking turns, which a sort by score would undo.
            return hits
        return sorted(best.values(), key=lambda h: (-h.score, h.chunk_id))

    # -- step 5 ---------------------------------------------------------------------------------

    def _answer(
        self,
        question: str,
        prepared: Prepared,
        step,  # noqa: ANN001
    ) -> tuple[DraftAnswer, AnswerMode, str | None]:
        if not prepared.context:
            step.detail = "no passage retrieved"
            return DraftAnswer(not_found(question), [], False), self._mode(), None
        if self.client is None:
            step.detail = "extractive: no LLM configured"
            draft = self._extractive(question, prepared)
            step.detail += _assertion_detail(draft, self.options.answer_assert_threshold)
            return draft, "extractive", None
        try:
            draft = answer_with_llm(self.client, question, prepared.queries, prepared.context)
            return draft, "llm", None
        except LLMFailure as error:
            step.status, step.detail = "fallback", f"extractive answer: {error}"
            return self._extractive(question, prepared), "extractive", str(error)

    def _extractive(self, question: str, prepared: Prepared) -> DraftAnswer:
        """The extractive answer, or "not found" when the question names what no readable
        document mentions. Only here: an LLM reads the passages and can tell a synonym
        ("paid time off" for "PTO") where matching words cannot."""
        if prepared.unmentioned:
            return DraftAnswer(not_mentioned(prepared.unmentioned, question), [], answerable=False)
        return answer_extractively(
            self.embedder,
            question,
            prepared.context,
            self.options.answer_min_similarity,
            self.options.answer_max_words,
            kept_vectors=self.kept_vectors,
            assertion=(LEAD_MODEL, self.options.answer_assert_threshold),
            passages_min_similarity=self.options.answer_passages_min_similarity,
        )

    def _beyond_filters(
        self,
        request: tuple[str, Sequence[Turn], SearchFilters | None, int, Sequence[str], date | None],
        prepared: Prepared,
        draft: DraftAnswer,
        mode: AnswerMode,
    ) -> tuple[Prepared, DraftAnswer, bool]:
        """What to answer when the filters' documents assert nothing: the unfiltered
        corpus's asserted lead, opened by what the filters cover not saying it; otherwise
        `prepared` and `draft` as they are. `request` is `ask`'s arguments, in its order.

        A filter must never silently answer from off-topic text, nor hide that the rest of
        the corpus states the answer. Only the extractive answer widens: an LLM reads the
        filtered passages and says itself that they do not answer. The wider search runs as
        the same caller, so it sees nothing the caller may not read.
        """
        question, history, filters, top_k, caller_groups, today = request
        if mode != "extractive" or (draft.asserted and draft.answerable) or not narrows(filters):
            return prepared, draft, False
        assert filters is not None
        wide = self.prepare(question, history, None, top_k, caller_groups, today)
        with timed_step(prepared.trace, "beyond_filters") as step:
            answer = self._extractive(question, wide)
            if not (answer.answerable and answer.asserted):
                step.status = "skipped"
                step.detail = "the documents outside the filters assert nothing either"
                return prepared, draft, False
            step.detail = "nothing asserted within the filters; answered from every document"
        for done in wide.trace.steps:
            unfiltered = done.model_copy(update={"step": f"{done.step}, unfiltered"})
            prepared.trace.steps.append(unfiltered)
        prepared.trace.retrieved.update(wide.trace.retrieved)
        prepared.trace.context_chunk_ids = wide.trace.context_chunk_ids
        text = f"{scope_not_saying(filters, prepared.context)} Elsewhere: {answer.text}"
        return replace(wide, trace=prepared.trace), replace(answer, text=text), True

    def _mode(self) -> AnswerMode:
        return "extractive" if self.client is None else "llm"

    def _usage(self):  # noqa: ANN202
        return self.client.usage if self.client else None

    def _response(
        self,
        question: str,
        prepared: Prepared,
        draft: DraftAnswer,
        mode: AnswerMode,
        degraded: str | None,
        beyond_filters: bool = False,
    ) -> AskResponse:
        citations = [
            _citation(number, prepared.context[passage - 1])
            for number, passage in draft.cited_passages()
            if 1 <= passage <= len(prepared.context)
        ]
        numbers = {passage: number for number, passage in draft.cited_passages()}
        excerpts = [
            _excerpt(numbers[excerpt.passage], prepared.context[excerpt.passage - 1], excerpt)
            for excerpt in draft.excerpts
            if excerpt.passage in numbers and 1 <= excerpt.passage <= len(prepared.context)
        ]
        related = [] if draft.answerable else _related(prepared.context)
        return AskResponse(
            question=question,
            answer=draft.text,
            mode=mode,
            answerable=draft.answerable,
            asserted=draft.answerable and draft.asserted,
            beyond_filters=beyond_filters,
            degraded=degraded is not None,
            degraded_reason=degraded,
            language=reply_language(question),
            citations=citations,
            excerpts=excerpts,
            related=related,
            original_query=question,
            optimized_queries=prepared.queries,
            asked_at=prepared.asked_at,
            answered_at=datetime.now(UTC),
            trace=prepared.trace,
            totals=prepared.trace.totals(),
        )


def _assertion_detail(draft: DraftAnswer, threshold: float) -> str:
    """How the lead's assertion was decided, for the trace ("how the answer was derived")."""
    if draft.confidence is None or not draft.answerable:
        return ""
    chance = f"chance it answers {draft.confidence:.2f}, bar {threshold:.2f}"
    if draft.asserted and draft.signals is not None and draft.signals.heading_asks:
        return f"; lead asserted: it sits under the section the question asks about ({chance})"
    if draft.asserted:
        return f"; lead asserted ({chance})"
    return f"; lead not asserted, the passages shown: {draft.unasserted_because} ({chance})"


def _citation(number: int, hit: SearchHit) -> Citation:
    """A cited hit: every Citation field but its number is a field of the hit."""
    fields = set(Citation.model_fields) - {"number"}
    return Citation(number=number, **hit.model_dump(include=fields))


#: Sources listed as related when the documents do not answer: near enough to look at.
RELATED_SOURCES = 3


def _excerpt(number: int, hit: SearchHit, excerpt: DraftExcerpt) -> Excerpt:
    """A draft's excerpt with its source's fields; the heading is the excerpt's own section
    (a passage joins chunks of several)."""
    return Excerpt(
        number=number,
        chunk_id=hit.chunk_id,
        title=hit.title,
        heading_path=list(excerpt.heading) or hit.heading_path,
        rel_path=hit.rel_path,
        page_start=hit.page_start,
        page_end=hit.page_end,
        sentences=[
            ExcerptSentence(text=text, supports=index in excerpt.supports)
            for index, text in enumerate(excerpt.sentences)
        ],
        citation=hit.citation,
    )


def _related(context: Sequence[SearchHit]) -> list[Citation]:
    """The best-ranked context passages of distinct documents, as unnumbered citations."""
    firsts: dict[str, SearchHit] = {}
    for hit in context:
        firsts.setdefault(hit.doc_id, hit)
    return [_citation(0, hit) for hit in list(firsts.values())[:RELATED_SOURCES]]
