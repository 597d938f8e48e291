"""Settings: Ask.

How an answer is built from the passages found: how much context it reads, and when the
extractive answer asserts, shows passages or declines.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, Field

#: Extractive answers: below this cosine between the question and its best context sentence
#: the answer is "not found". Higher values decline answerable questions long before they
#: decline the unanswerable ones (docs/benchmarks.md, "Answers").
DEFAULT_ANSWER_MIN_SIMILARITY = 0.40
#: Extractive answers: from this cosine up to DEFAULT_ANSWER_MIN_SIMILARITY the closest
#: passages are shown without asserting anything; below it the answer is "not found". A
#: question about a document's subject in other words ("lose my laptop" against "lost
#: devices") lands between the two, an off-topic one below.
DEFAULT_ANSWER_PASSAGES_MIN_SIMILARITY = 0.30
#: Extractive answers: words at most per ask of the question (the first sentence always
#: fits), so an answer states several facts and stays a paragraph for each thing asked.
DEFAULT_ANSWER_MAX_WORDS = 100
#: Extractive answers: the chance (`lorehouse.agents.assertion`) below which the lead is not
#: asserted and the closest passages are shown instead. 0 asserts every lead: no threshold
#: reaches high precision at a useful coverage with the bundled models (the curve is in
#: docs/benchmarks.md); a deployment that prefers fewer wrong leads sets 0.5.
DEFAULT_ANSWER_ASSERT_THRESHOLD = 0.5


class AskSettings(BaseModel):
    """The answer settings."""

    #: The heading the configuration page lists these settings under.
    heading: ClassVar[str] = "Ask"

    ask_context_chunks: int = Field(
        default=8, ge=1, le=50, description="Passages the answerer reads after post-processing."
    )
    answer_min_similarity: float = Field(
        default=DEFAULT_ANSWER_MIN_SIMILARITY,
        ge=0.0,
        le=1.0,
        description=(
            "Extractive answers: a question whose best context sentence is less similar than "
            "this (cosine) is answered as not found."
        ),
    )
    answer_passages_min_similarity: float = Field(
        default=DEFAULT_ANSWER_PASSAGES_MIN_SIMILARITY,
        ge=0.0,
        le=1.0,
        description=(
            "Extractive answers: a question whose best context sentence is at least this "
            "similar, but under LOREHOUSE_ANSWER_MIN_SIMILARITY, is answered with the closest "
            "passages, asserting nothing; below it, as not found."
        ),
    )
    answer_max_words: int = Field(
        default=DEFAULT_ANSWER_MAX_WORDS,
        ge=10,
        le=1000,
        description=(
            "Extractive answers: at most this many words per ask of the question (a question "
            "with two asks gets twice as many); each sentence after the first must add a "
            "number or name not yet stated."
        ),
    )
    answer_assert_threshold: float = Field(
        default=DEFAULT_ANSWER_ASSERT_THRESHOLD,
        ge=0.0,
        le=1.0,
        description=(
            "Extractive answers: a lead less likely than this to state the answer is not "
            "asserted; the answer says the documents don't state it directly and shows the "
            "closest passages. 0 asserts every lead; higher asserts fewer, more of them right; "
            "1 asserts none. A lead under the section the question asks about (an FAQ's own "
            'question, or "What does X say about Y?") is asserted below 1 whatever its chance.'
        ),
    )
    answer_decline_unmentioned: bool = Field(
        default=True,
        description=(
            "Extractive answers: 'not found' when the question names something (a name, an "
            "acronym, a year) that no document the caller may read mentions, rather than "
            "the nearest sentence about something else. A question using another word than "
            "the documents ('PTO' for 'annual leave') is declined too; answers written by an "
            "LLM judge that themselves."
        ),
    )
    answer_sentence_vectors_kept: int = Field(
        default=20_000,
        ge=0,
        description=(
            "Extractive answers: vectors of the last this many context sentences are kept "
            "(about 1.5 KB each), so passages that recur across questions are not embedded "
            "again: embedding them is most of an extractive answer's time. 0 keeps none."
        ),
    )
