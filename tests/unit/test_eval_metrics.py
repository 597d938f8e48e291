"""Evidence matching and ranking metrics on hand-made cases."""

from __future__ import annotations

import pytest

from evals.metrics import (
    Evidence,
    RetrievedChunk,
    excerpt_found,
    first_hit_rank,
    mean_reciprocal_rank,
    normalize,
    recall_at,
)
from evals.retrieval_eval import as_retrieved
from lorehouse.search.hits import SearchHit

SOURCE = (
    "Employees receive 20 days of paid vacation per year. Unused days carry over to the "
    "first quarter of the next year, up to five days, after which they lapse."
)


def _chunk(cid: str, text: str, position: int, path: str = "content/leave.md") -> RetrievedChunk:
    return RetrievedChunk(chunk_id=cid, rel_path=path, position=position, text=text)


def test_matching_ignores_whitespace_newlines_case_and_markup() -> None:
    excerpt = "Employees receive 20 days of paid vacation\nper year."
    chunk = _chunk(
        "a", "Leave > Vacation\n**Employees**  receive 20 days of PAID vacation per year.", 0
    )
    assert excerpt_found(Evidence("content/leave.md", excerpt), [chunk])
    assert normalize("A  [link](https://x.io)\n**bold**") == "a link bold"
    assert normalize("<td><p>Keep&nbsp;for 7 years</td>") == "keep for 7 years"


def test_an_excerpt_spanning_two_consecutive_chunks_is_found() -> None:
    first = _chunk("a", "Leave > Vacation\nEmployees receive 20 days of paid vacation per year.", 3)
    second = _chunk(
        "b",
        "Leave > Vacation\nUnused days carry over to the first quarter of the next year, "
        "up to five days, after which they lapse.",
        4,
    )
    evidence = Evidence("content/leave.md", SOURCE)
    assert not excerpt_found(evidence, [first])
    assert excerpt_found(evidence, [second, first])  # retrieval order does not matter
    gap = _chunk("c", second.text, 6)
    assert not excerpt_found(evidence, [first, gap])  # not consecutive: not a cover


def test_adjacent_passages_are_read_together_as_their_chunks_would_be() -> None:
    """A passage joining chunks 2-3 and one joining 4-5 hold an excerpt spanning chunks 3
    and 4 between them; passages 2-3 and 5-6 do not."""
    earlier = RetrievedChunk(
        "a",
        "content/leave.md",
        2,
        "Leave\nHolidays follow the local calendar. "
        "Employees receive 20 days of paid vacation per year.",
        end_position=3,
    )
    later = RetrievedChunk(
        "b",
        "content/leave.md",
        4,
        "Leave > Vacation\nUnused days carry over to the first "
        "quarter of the next year, up to five days, after which they lapse.",
        end_position=5,
    )
    evidence = Evidence("content/leave.md", SOURCE)
    assert not excerpt_found(evidence, [earlier])
    assert excerpt_found(evidence, [later, earlier])
    apart = RetrievedChunk("c", later.rel_path, 5, later.text, end_position=6)
    assert not excerpt_found(evidence, [earlier, apart])


def test_a_passage_hit_spans_the_positions_of_the_chunks_it_joins() -> None:
    hit = SearchHit(
        chunk_id="k7",
        doc_id="d",
        title=None,
        rel_path="content/leave.md",
        position=7,
        heading_path=[],
        page_start=None,
        page_end=None,
        is_table=False,
        text_chat="text",
        rank=1,
        source_uri="file:///leave.md",
        file_type="md",
        score=1.0,
        scores={},
        citation="/v1/chunks/k7",
        passage_chunk_ids=["k6", "k7", "k8", "k9"],
    )
    passage = as_retrieved([hit])[0]
    assert (passage.position, passage.last_position) == (6, 9)
    chunk = as_retrieved([hit.model_copy(update={"passage_chunk_ids": []})])[0]
    assert (chunk.position, chunk.last_position) == (7, 7)


def test_an_excerpt_quoting_a_question_heading_and_its_answer_is_found_under_it() -> None:
    """An FAQ's question is the chunk's own heading, the last part of its breadcrumb; the
    outer headings, repeated atop every chunk of their section, still match nothing."""
    chunk = _chunk(
        "a", "Benefits > FAQ > Q. Does Sourcegraph match my 401k?\n\n- Not at this time.", 7
    )
    evidence = Evidence(
        "content/leave.md", "#### Q. Does Sourcegraph match my 401k?\n\n- Not at this time."
    )
    assert excerpt_found(evidence, [chunk])
    assert not excerpt_found(Evidence("content/leave.md", "Benefits"), [chunk])


def test_an_excerpt_in_another_file_does_not_count() -> None:
    chunk = _chunk("a", SOURCE, 0, path="content/other.md")
    assert not excerpt_found(Evidence("content/leave.md", "Employees receive 20 days"), [chunk])


def test_small_differences_pass_the_threshold_and_different_text_does_not() -> None:
    chunk = _chunk("a", "Employees receive 20 days of paid vacation each year.", 0)
    assert excerpt_found(
        Evidence("content/leave.md", "receive 20 days of paid vacation per year"), [chunk]
    )
    assert not excerpt_found(
        Evidence("content/leave.md", "receive 30 weeks of unpaid sabbatical leave"), [chunk]
    )


def test_first_hit_rank_needs_every_excerpt() -> None:
    ranking = [
        _chunk("x", "Nothing relevant here at all, only filler text.", 9),
        _chunk("a", "Employees receive 20 days of paid vacation per year.", 0),
        _chunk(
            "b", "Expenses over 500 EUR need the approval of a director.", 0, "content/expenses.md"
        ),
    ]
    vacation = Evidence("content/leave.md", "Employees receive 20 days of paid vacation per year.")
    expenses = Evidence(
        "content/expenses.md", "Expenses over 500 EUR need the approval of a director."
    )
    assert first_hit_rank([vacation], ranking) == 2
    assert first_hit_rank([vacation, expenses], ranking) == 3
    assert first_hit_rank([], ranking) is None


def test_recall_and_mrr_on_hand_computed_cases() -> None:
    ranks = [1, 3, None, 2]
    assert recall_at(ranks, 1) == 0.25
    assert recall_at(ranks, 2) == 0.5
    assert recall_at(ranks, 3) == 0.75
    assert mean_reciprocal_rank(ranks) == pytest.approx((1 + 1 / 3 + 0 + 1 / 2) / 4)


def test_recall_is_reported_by_question_language_when_cases_name_theirs() -> None:
    """A German question and an English one over the same passage are counted apart."""
    from evals.golden_set import GoldenCase
    from evals.retrieval_eval import RetrieverConfig, evaluate

    def case(case_id: str, question: str, language: str | None) -> GoldenCase:
        excerpt = "Unused days carry over to the first quarter of the next year"
        return GoldenCase(
            id=case_id,
            question=question,
            evidence=[{"file": "content/leave.md", "excerpt": excerpt}],
            answer="Up to five days.",
            type="lookup",
            language=language,
        )

    def rank(question: str, k: int) -> list[RetrievedChunk]:
        # Finds the passage for questions that name it in English only.
        return [_chunk("c1", SOURCE, 0)] if "carry over" in question else []

    cases = [
        case("en-1", "Do unused days carry over?", "en"),
        case("de-1", "Verfallen nicht genommene Urlaubstage?", "de"),
        case("de-2", "Werden Resttage übertragen?", "de"),
    ]
    result = evaluate(cases, [RetrieverConfig("probe", rank)], k_max=8).results[0]
    assert result.by_language == {
        "de": {k: 0.0 for k in range(1, 9)},
        "en": {k: 1.0 for k in range(1, 9)},
    }
    unnamed = case("x", "Do unused days carry over?", None)
    assert evaluate([unnamed], [RetrieverConfig("probe", rank)]).results[0].by_language == {}
