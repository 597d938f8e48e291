"""Each answer-pipeline step with litellm's mock_response, and the Post-Processor on real chunks."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest

from lorehouse.agents.ask import AskPipeline, AskResponse
from lorehouse.agents.llm_answer import answer_with_llm, check_llm_answer
from lorehouse.agents.post_processor import post_process
from lorehouse.agents.query_optimizer import Turn, optimize_query
from lorehouse.agents.source_identifier import DocumentProfile, choose_with_llm
from lorehouse.agents.trace import StepTrace
from lorehouse.llm import LLMClient, LLMFailure
from lorehouse.search.retriever import Retriever
from lorehouse.stores.lance_index import ChunkIndex
from lorehouse.wiring import Lorehouse
from tests.conftest import default_embedder, shown


def _client(reply: str) -> LLMClient:
    return LLMClient("openai/gpt-4o-mini", backoff_seconds=0, call_options={"mock_response": reply})


def _pipeline(data_dir: Path, client: LLMClient | None) -> AskPipeline:
    index = ChunkIndex(str(data_dir / "lancedb"))
    return AskPipeline(
        Retriever(index, default_embedder()),
        index.documents(),
        default_embedder(),
        client,
        Lorehouse().ask_options(),
    )


def test_query_optimizer_returns_sub_queries_and_retries_invalid_output() -> None:
    reply = json.dumps(
        {"standalone": "Leave and expenses", "sub_queries": ["leave weeks", "expense approver"]}
    )
    optimized = optimize_query(
        _client(reply), "and expenses?", [Turn(role="user", content="leave?")], date(2026, 11, 22)
    )
    assert optimized.queries() == ["leave weeks", "expense approver"]
    broken = _client('{"standalone": ""}')
    with pytest.raises(LLMFailure, match="3 attempts"):
        optimize_query(broken, "q", [], date(2026, 11, 22))
    assert broken.usage.calls == 3 and broken.usage.retries == 2


def test_source_identifier_drops_invented_ids() -> None:
    candidates = [
        DocumentProfile(doc_id="d1", title="Travel"),
        DocumentProfile(doc_id="d2", title="Leave"),
    ]
    assert choose_with_llm(
        _client('{"documents": ["d2", "d9"], "all": false}'), "q", candidates
    ) == ["d2"]
    assert choose_with_llm(_client('{"documents": [], "all": true}'), "q", candidates) == "all"
    with pytest.raises(LLMFailure):
        choose_with_llm(_client("not json"), "q", candidates)


def test_answer_check_rejects_invented_citations_and_missing_ones() -> None:
    assert check_llm_answer("Twenty weeks [1].", 2) is None
    assert check_llm_answer("NOT_IN_DOCUMENTS", 2) is None
    assert "cites passages [3]" in check_llm_answer("Twenty weeks [3].", 2)
    assert "cites no passage" in check_llm_answer("Twenty weeks.", 2)
    assert check_llm_answer("  ", 2) == "empty answer"


def test_post_processor_removes_duplicates_and_restores_document_order(
    materialized_sample: Path,
) -> None:
    retriever = Retriever(ChunkIndex(str(materialized_sample / "lancedb")), default_embedder())
    hits = retriever.search("parental leave weeks and return to work", top_k=10).hits
    assert len({h.doc_id for h in hits}) >= 2
    near_copy = hits[0].model_copy(
        update={"chunk_id": "copy", "text_chat": hits[0].text_chat + " "}
    )
    processed = post_process([*hits, *hits, near_copy], max_chunks=10)
    assert [h.chunk_id for h in processed].count(hits[0].chunk_id) == 1
    assert "copy" not in {h.chunk_id for h in processed}
    assert len(processed) == len(hits)
    assert processed[0].doc_id == hits[0].doc_id  # the best document leads
    for doc_id in {h.doc_id for h in processed}:
        positions = [h.position for h in processed if h.doc_id == doc_id]
        assert positions == sorted(positions)
    documents_in_order = [h.doc_id for h in processed]
    assert documents_in_order == sorted(documents_in_order, key=documents_in_order.index)


def test_invalid_llm_answers_are_retried_then_degrade_to_extractive(
    materialized_sample: Path,
) -> None:
    client = _client("Twenty weeks [42].")
    with pytest.raises(LLMFailure, match="cites passages"):
        retriever = Retriever(ChunkIndex(str(materialized_sample / "lancedb")), default_embedder())
        hits = retriever.search("parental leave", top_k=3).hits
        answer_with_llm(client, "How long is parental leave?", ["parental leave"], hits)
    response = _pipeline(materialized_sample, client).ask(
        "How many weeks of parental leave do primary caregivers get?"
    )
    assert response.mode == "extractive" and response.degraded
    assert "cites passages" in response.degraded_reason
    assert "20 weeks" in shown(response) and response.citations
    statuses = {step.step: step.status for step in response.trace.steps}
    assert statuses["answerer"] == "fallback"
    assert statuses["query_optimizer"] == "fallback"  # the same reply is not valid JSON either
    assert response.trace.llm_calls >= 9


def test_a_rewrite_that_drops_the_question_is_rejected_unless_history_explains_it() -> None:
    echoed = json.dumps(
        {
            "standalone": "What is the travel policy for employees?",
            "sub_queries": ["What is the travel policy for employees?"],
        }
    )
    with pytest.raises(LLMFailure, match="drifted"):
        optimize_query(_client(echoed), "How long is parental leave?", [], date(2026, 11, 22))
    history = [Turn(role="user", content="What is the travel policy for contractors?")]
    resolved = optimize_query(_client(echoed), "and for employees?", history, date(2026, 11, 22))
    assert resolved.standalone == "What is the travel policy for employees?"


def test_a_reply_repeating_the_prompt_is_not_an_answer() -> None:
    echo = "You answer questions...\nPassages (in document order):\n[1] Travel policy"
    assert "repeats the prompt" in check_llm_answer(echo, 3)


def test_a_failure_says_what_was_wrong_without_the_reply_or_the_prompt() -> None:
    """A model that echoes its prompt must not put the prompt into the reason a person reads."""
    echo = "You answer questions... Passages: [1] the restricted salary table"
    with pytest.raises(LLMFailure) as failure:
        optimize_query(_client(echo), "What is the travel policy?", [], date(2026, 11, 22))
    assert "invalid output" in str(failure.value)
    assert "Passages" not in str(failure.value) and "salary" not in str(failure.value)


def test_provider_errors_are_retried_then_degrade_with_the_reason(
    materialized_sample: Path,
) -> None:
    import litellm

    failing = LLMClient(
        "openai/gpt-4o-mini",
        backoff_seconds=0,
        call_options={
            "mock_response": litellm.RateLimitError(
                message="slow down", llm_provider="openai", model="gpt-4o-mini"
            )
        },
    )
    response = _pipeline(materialized_sample, failing).ask(
        "How many weeks of parental leave do primary caregivers get?"
    )
    assert response.degraded and "RateLimitError" in response.degraded_reason
    assert response.mode == "extractive" and "20 weeks" in shown(response)
    assert failing.usage.retries >= 2 and failing.usage.failures >= 3


def test_offline_every_document_is_searched_and_the_ranking_is_hybrid_search(
    materialized_sample: Path,
) -> None:
    """Without an LLM no source is chosen: the ask searches every document the caller may
    read, in plain hybrid order, and its trace says the step was skipped and why."""
    index = ChunkIndex(str(materialized_sample / "lancedb"))
    embedder = default_embedder()
    retriever = Retriever(index, embedder)
    question = "How many weeks of parental leave do primary caregivers get?"
    pipeline = AskPipeline(retriever, index.documents(), embedder, None, Lorehouse().ask_options())
    prepared = pipeline.prepare(question, [], None, 8, [], None)
    assert prepared.trace.sources == "all" and not prepared.trace.sources_required
    (step,) = [s for s in prepared.trace.steps if s.step == "source_identifier"]
    assert step.status == "skipped" and "no LLM" in step.detail
    hybrid = [hit.chunk_id for hit in retriever.search(question, 8, "hybrid").hits]
    assert [hit.chunk_id for hit in prepared.ranked][:8] == hybrid


def test_extractive_citations_are_numbered_in_the_order_the_answer_uses_them(
    materialized_sample: Path,
) -> None:
    from lorehouse.agents.citations import DraftAnswer, citations_in, numbered_by_use

    draft = numbered_by_use(DraftAnswer("B is so [5]. A is so [3]. B again [5].", [5, 3], True))
    assert draft.text == "B is so [1]. A is so [2]. B again [1]."
    assert draft.cited_passages() == [(1, 5), (2, 3)]

    pipeline = _pipeline(materialized_sample, None)
    response = pipeline.ask("How many weeks of parental leave do primary caregivers get?")
    numbers = [citation.number for citation in response.citations]
    # The lead's citations first, then those only the excerpts use, each excerpt under the
    # number of its source.
    lead = citations_in(response.answer)
    assert numbers == list(range(1, len(numbers) + 1)) and numbers[: len(lead)] == lead
    assert [excerpt.number for excerpt in response.excerpts] == numbers
    context = response.trace.context_chunk_ids
    assert all(citation.chunk_id in context for citation in response.citations)
    assert "20 weeks" in shown(response)


def test_offline_a_follow_up_question_carries_the_previous_subject_over(
    materialized_sample: Path,
) -> None:
    pipeline = _pipeline(materialized_sample, None)
    hotel = "What is the hotel limit per night for business trips?"
    history = [Turn(role="user", content=hotel), Turn(role="assistant", content="It depends [1]")]

    follow_up = pipeline.ask("And in Toronto?", history=history)
    assert follow_up.trace.optimized_queries == [f"{hotel} And in Toronto?"]
    assert "CAD 275" in follow_up.answer
    # Asked alone, the same words find Toronto's office hours, not its hotel limit.
    assert "CAD 275" not in pipeline.ask("And in Toronto?").answer

    # A question that stands on its own is searched as asked, conversation or not.
    leave = "How many weeks of parental leave do primary caregivers get in Lisbon?"
    assert pipeline.ask(leave, history=history).trace.optimized_queries == [leave]


def test_a_streamed_answer_reports_each_step_before_the_answer_text(
    materialized_sample: Path,
) -> None:
    items = list(_pipeline(materialized_sample, None).stream("How many weeks of parental leave?"))
    steps = [item.step for item in items if isinstance(item, StepTrace)]
    assert steps == ["query_optimizer", "source_identifier", "retrieval", "post_processor"]
    kinds = [type(item).__name__ for item in items]
    assert kinds[: len(steps)] == ["StepTrace"] * len(steps) and kinds[-1] == "AskResponse"
    final = items[-1]
    assert isinstance(final, AskResponse)
    # Which caregiver is not asked: the answer shows both durations.
    seen = shown(final)
    assert "20 weeks" in seen and "6 weeks" in seen
    assert [s.step for s in final.trace.steps] == [*steps, "answerer"]
