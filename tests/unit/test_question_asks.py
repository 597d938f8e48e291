"""A question with several asks is searched whole and once per ask, and each ask's answer
reaches the top hits; a question with one ask, or a statement, is searched as it is."""

from __future__ import annotations

from pathlib import Path

import pytest

from evals.metrics import Evidence, RetrievedChunk, first_hit_rank
from lorehouse.search.asks import MAX_ASKS, QuestionAsks, interleave, question_asks
from lorehouse.search.hits import SearchResult
from lorehouse.search.retriever import Retriever
from lorehouse.stores.lance_index import ChunkIndex
from tests.conftest import default_embedder

PARENTAL_LEAVE = Evidence(
    "hr/parental-leave-faq.md", "Primary caregivers: **20 weeks** at full pay."
)
HOTEL_BREAKFAST = Evidence(
    "handbook/travel-and-expenses.docx",
    "The limit is per room per night and includes taxes and breakfast.",
)
TWO_ASKS = (
    "How many weeks of parental leave do primary caregivers get, "
    "and does the hotel limit include breakfast?"
)


@pytest.mark.parametrize(
    ("question", "asks", "context"),
    [
        (
            "How long do I have to submit an expense, and what happens if it is older than that?",
            ("How long do I have to submit an expense", "what happens if it is older than that?"),
            "",
        ),
        (
            "I just got promoted. Does the people team send anything, and will I get more "
            "stock options?",
            ("Does the people team send anything", "will I get more stock options?"),
            "I just got promoted.",
        ),
        (
            "Can I get a disability accommodation for that, or is there some leave I can take?",
            ("Can I get a disability accommodation for that", "is there some leave I can take?"),
            "",
        ),
    ],
)
def test_a_question_is_cut_where_a_conjunction_opens_a_new_ask(
    question: str, asks: tuple[str, ...], context: str
) -> None:
    assert question_asks(question) == QuestionAsks(asks, context)


@pytest.mark.parametrize(
    ("question", "asks"),
    [
        (
            "What am I paid while on parental leave compared with medical leave?",
            ("What am I paid while on parental leave", "What am I paid while on medical leave"),
        ),
        (
            "Did net earnings increase in Q2 of FY2023 compared to Q2 of FY2022?",
            (
                "Did net earnings increase in Q2 of FY2023",
                "Did net earnings increase in Q2 of FY2022",
            ),
        ),
        (
            "What was the operating profit in H1 2023 versus H1 2022?",
            (
                "What was the operating profit in H1 2023",
                "What was the operating profit in H1 2022",
            ),
        ),
    ],
)
def test_a_comparison_is_asked_of_each_side(question: str, asks: tuple[str, ...]) -> None:
    assert question_asks(question) == QuestionAsks(asks, "")


def test_each_ask_is_searched_with_the_statements_around_it() -> None:
    split = question_asks("I just got promoted. Does the team send anything, and will I get more?")
    assert split is not None
    assert split.queries() == [
        "I just got promoted. Does the team send anything",
        "I just got promoted. will I get more?",
    ]


@pytest.mark.parametrize(
    "question",
    [
        "How many weeks of parental leave do primary caregivers get?",
        # An ask of one or two words has no subject of its own.
        "When and where was Microsoft founded?",
        # A claim is one statement, whatever its clauses (BEIR SciFact's queries are claims).
        "Men are more susceptible to death due to pneumonia and what follows is mortality.",
        "Can I work from China or Russia, either while living there or on a trip?",
        # The two sides of a comparison name different kinds of thing: no words to swap.
        "Is remote work cheaper compared to an office?",
        "Men are more susceptible to death due to pneumonia when compared to women.",
    ],
)
def test_a_single_ask_or_a_statement_is_not_split(question: str) -> None:
    assert question_asks(question) is None


def test_a_question_of_many_asks_costs_at_most_max_asks_extra_searches() -> None:
    # 30 asks in one request would be 31 searches: one caller's question slowing everyone's.
    many = " and ".join(f"what is the limit for expense type {n}" for n in range(30)) + "?"
    split = question_asks(many.capitalize())
    assert split is not None and len(split.asks) == MAX_ASKS
    assert split.asks[0] == "What is the limit for expense type 0"
    assert split.asks[-1] == f"what is the limit for expense type {MAX_ASKS - 1}"


def test_interleaving_leads_with_the_whole_question_and_skips_repeats() -> None:
    whole = ["a", "b", "c", "d", "e"]
    per_ask = [["x", "a", "y"], ["b", "z"]]
    assert interleave(whole, per_ask, key=str, limit=7) == ["a", "b", "x", "z", "c", "d", "y"]
    assert interleave(whole, per_ask, key=str, limit=3) == ["a", "b", "x"]
    # Every ranking runs out before the limit: everything once, nothing invented.
    assert interleave(["a"], [["a", "b"]], key=str, limit=10) == ["a", "b"]


@pytest.fixture(scope="module")
def index(materialized_sample: Path) -> ChunkIndex:
    return ChunkIndex(str(materialized_sample / "lancedb"))


def _found_at(result: SearchResult, evidence: Evidence) -> int | None:
    ranked = [RetrievedChunk(h.chunk_id, h.rel_path, h.position, h.text_chat) for h in result.hits]
    return first_hit_rank([evidence], ranked)


def test_both_asks_are_answered_in_the_top_four(index: ChunkIndex) -> None:
    split = Retriever(index, default_embedder()).search(TWO_ASKS, top_k=10)
    assert split.asks == [
        "How many weeks of parental leave do primary caregivers get",
        "does the hotel limit include breakfast?",
    ]
    assert [hit.rank for hit in split.hits] == list(range(1, 11))
    assert len({hit.chunk_id for hit in split.hits}) == 10
    assert _found_at(split, PARENTAL_LEAVE) <= 4
    assert _found_at(split, HOTEL_BREAKFAST) <= 4
    # Searched whole, the parental-leave chunks crowd the hotel answer out of the top four.
    whole = Retriever(index, default_embedder(), split_asks=False).search(TWO_ASKS, top_k=10)
    assert whole.asks == []
    assert _found_at(whole, HOTEL_BREAKFAST) > 4


def test_no_ask_reaches_a_document_the_caller_may_not_read(index: ChunkIndex) -> None:
    question = (
        "Who leads the response to a security incident, and what is the hotel limit per night?"
    )
    retriever = Retriever(index, default_embedder())
    outsider = retriever.search(question, top_k=20, caller_groups=[])
    assert len(outsider.asks) == 2
    assert outsider.hits
    assert not [hit for hit in outsider.hits if hit.rel_path.startswith("security/")]
    member = retriever.search(question, top_k=20, caller_groups=["security"])
    assert [hit for hit in member.hits if hit.rel_path.startswith("security/")]
