"""Answer eval: the /v1/ask pipeline answers each golden case, then an LLM judge grades it.

The judge sees the question, the expert's reference answer, the bot's answer and the source
text the bot retrieved, and returns a 0-5 score with its reasoning.
The label is derived from the score and the judge's "refused" flag, not asked for, so it is
always consistent with the score. A case the judge could not grade keeps its answer and the
judge's error, with no score: a failed judgement is never turned into a number.
"""

from __future__ import annotations

import re
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, Field

from evals.golden_set import GoldenCase
from evals.key_facts import score_key_facts
from evals.metrics import DEFAULT_THRESHOLD, Evidence, contains, normalize
from lorehouse.agents.ask import AskResponse
from lorehouse.agents.citations import CITATION
from lorehouse.llm import LLMClient, LLMFailure
from lorehouse.stages.progress import ProgressCallback

#: `judge_model` of a run scored by the offline key-fact metric alone.
NO_JUDGE = "none"
JUDGE_PROMPT = "answer_judge.v1"
Label = Literal["correct", "partial", "incorrect", "refused"]
LABELS: tuple[Label, ...] = ("correct", "partial", "incorrect", "refused")
#: The judge reads at most this much retrieved text, so one long table cannot crowd it out.
MAX_SOURCE_CHARS = 12_000
_UNANSWERABLE_NOTE = (
    "\nThis question is deliberately unanswerable from the documents: the correct behaviour "
    "is to say the documents do not contain the answer.\n"
)


class JudgeVerdict(BaseModel):
    """The judge's reply; reasoning comes first so the score follows from it."""

    reasoning: str = Field(min_length=1)
    score: int = Field(ge=0, le=5)
    refused: bool


def label_for(verdict: JudgeVerdict, answerable: bool) -> Label:
    """Correct 4-5, partial 2-3, incorrect 0-1; a refusal of an answerable case is `refused`.

    Refusing an unanswerable case is the right answer, so it is graded by its score.
    """
    if verdict.refused and answerable:
        return "refused"
    if verdict.score >= 4:
        return "correct"
    if verdict.score >= 2:
        return "partial"
    return "incorrect"


@dataclass
class AnswerOutcome:
    """One case: what the bot said and what the judge made of it."""

    case_id: str
    case_type: str
    question: str
    reference_answer: str
    #: What the reader is shown: the lead, then each excerpt under its citation number.
    answer: str
    answer_mode: str
    degraded: bool
    n_citations: int
    answer_seconds: float
    #: The reference answer's numbers and named terms, and how many the answer states.
    key_facts: int = 0
    key_facts_found: int = 0
    #: Whether the pipeline said the documents do not answer.
    declined: bool = False
    #: The lead (the answer's first statement, with its citation) and its words.
    lead: str = ""
    lead_words: int = 0
    #: Reference key facts the lead alone states, and the lead and excerpts together.
    lead_key_facts_found: int = 0
    shown_key_facts_found: int = 0
    #: Whether a statement of the lead is part of an evidence excerpt (None: the case has none).
    lead_from_evidence: bool | None = None
    #: Whether the answer asserted its lead (False: passages only, or declined).
    asserted: bool = False
    score: int | None = None
    label: Label | None = None
    reasoning: str | None = None
    judge_error: str | None = None
    #: The question's language, where the golden set names it.
    language: str | None = None


#: Kept in reports, not in the eval_answers rows, whose columns predate it.
_NOT_STORED = frozenset({"language"})


def _groups(
    outcomes: list[AnswerOutcome], measure: Callable[[list[AnswerOutcome]], dict]
) -> dict[str, dict]:
    """`measure` of the outcomes of each case type, and of each question language named."""
    types = sorted({o.case_type for o in outcomes})
    languages = sorted({o.language for o in outcomes if o.language})
    grouped = {"by_type": {t: measure([o for o in outcomes if o.case_type == t]) for t in types}}
    if languages:
        grouped["by_language"] = {
            language: measure([o for o in outcomes if o.language == language])
            for language in languages
        }
    return grouped


@dataclass
class AnswerEvalReport:
    run_id: str
    started_at: datetime
    judge_model: str
    outcomes: list[AnswerOutcome] = field(default_factory=list)

    @property
    def judged(self) -> list[AnswerOutcome]:
        return [o for o in self.outcomes if o.score is not None]

    def mean_score(self) -> float | None:
        judged = self.judged
        return sum(o.score or 0 for o in judged) / len(judged) if judged else None

    def score_distribution(self) -> dict[int, int]:
        counts = Counter(o.score for o in self.judged)
        return {score: counts.get(score, 0) for score in range(6)}

    def label_counts(self) -> dict[str, int]:
        counts = Counter(o.label for o in self.judged)
        return {label: counts.get(label, 0) for label in LABELS}

    def mean_by_type(self) -> dict[str, float]:
        types = sorted({o.case_type for o in self.judged})
        return {
            case_type: sum(o.score or 0 for o in self.judged if o.case_type == case_type)
            / sum(1 for o in self.judged if o.case_type == case_type)
            for case_type in types
        }

    def key_fact_summary(self) -> dict:
        """The offline answer metric: key facts stated, by type; unanswerable cases declined.

        Needs no judge. An answer counts as stating the facts when it holds every number and
        named term of the reference answer; `mean_share` is the average share stated.
        """
        scored = [o for o in self.outcomes if o.case_type != "unanswerable" and o.key_facts]

        def shares(outcomes: list[AnswerOutcome]) -> dict[str, float | int]:
            return {
                "answers": len(outcomes),
                "mean_share": round(
                    sum(o.key_facts_found / o.key_facts for o in outcomes) / len(outcomes), 3
                ),
                "all_stated": round(
                    sum(o.key_facts_found == o.key_facts for o in outcomes) / len(outcomes), 3
                ),
            }

        unanswerable = [o for o in self.outcomes if o.case_type == "unanswerable"]
        return {
            **(shares(scored) if scored else {"answers": 0}),
            **_groups(scored, shares),
            "unanswerable": len(unanswerable),
            "unanswerable_declined": sum(o.declined for o in unanswerable),
        }

    def lead_summary(self) -> dict:
        """How the answer reads to a person: per type and overall, the share of answers whose
        lead alone states a reference key fact, the share whose lead is taken from the
        evidence, the share of key facts the lead and excerpts state together, the lead's
        median words, and the declines (right and wrong). Of the leads asserted (not passages
        only): the share stating a key fact (precision), the share of answerable questions
        asserted (coverage) and of unanswerable ones (near misses asserted)."""
        answerable = [o for o in self.outcomes if o.case_type != "unanswerable"]
        unanswerable = [o for o in self.outcomes if o.case_type == "unanswerable"]

        def measures(outcomes: list[AnswerOutcome]) -> dict[str, float | int | None]:
            with_facts = [o for o in outcomes if o.key_facts]
            with_evidence = [o for o in outcomes if o.lead_from_evidence is not None]
            leads = sorted(o.lead_words for o in outcomes if not o.declined)
            return {
                "answers": len(outcomes),
                "lead_states_fact": _share(
                    sum(o.lead_key_facts_found > 0 for o in with_facts), len(with_facts)
                ),
                "lead_from_evidence": _share(
                    sum(bool(o.lead_from_evidence) for o in with_evidence), len(with_evidence)
                ),
                "shown_key_facts": _share(
                    sum(o.shown_key_facts_found / o.key_facts for o in with_facts),
                    len(with_facts),
                ),
                "median_lead_words": leads[len(leads) // 2] if leads else None,
                "wrongly_declined": _share(sum(o.declined for o in outcomes), len(outcomes)),
                "asserted_precision": _share(
                    sum(o.lead_key_facts_found > 0 for o in with_facts if o.asserted),
                    sum(o.asserted for o in with_facts),
                ),
                "coverage": _share(sum(o.asserted for o in outcomes), len(outcomes)),
            }

        return {
            **measures(answerable),
            **_groups(answerable, measures),
            "unanswerable": len(unanswerable),
            "unanswerable_declined": _share(
                sum(o.declined for o in unanswerable), len(unanswerable)
            ),
            "near_misses_asserted": _share(
                sum(o.asserted for o in unanswerable), len(unanswerable)
            ),
        }

    def worst(self, n: int = 5) -> list[AnswerOutcome]:
        """The lowest-scored cases, the ones worth reading first."""
        return sorted(self.judged, key=lambda o: (o.score, o.case_id))[:n]

    def summary(self) -> dict:
        """The CLI's --json object."""
        mean = self.mean_score()
        return {
            "run_id": self.run_id,
            "judge_model": self.judge_model,
            "n_cases": len(self.outcomes),
            "n_judged": len(self.judged),
            "judge_failures": len(self.outcomes) - len(self.judged),
            "mean_score": None if mean is None else round(mean, 3),
            "score_distribution": {str(k): v for k, v in self.score_distribution().items()},
            "labels": self.label_counts(),
            "mean_score_by_type": {k: round(v, 3) for k, v in self.mean_by_type().items()},
            "key_facts": self.key_fact_summary(),
            "lead": self.lead_summary(),
        }

    def rows(self, golden_set: str) -> list[dict]:
        """Rows for DuckDB `eval_answers`, one per case."""
        return [
            {
                "run_id": self.run_id,
                "evaluated_at": self.started_at,
                "golden_set": golden_set,
                "judge_model": self.judge_model,
                **{k: v for k, v in vars(outcome).items() if k not in _NOT_STORED},
            }
            for outcome in self.outcomes
        ]


def _share(part: float, whole: int) -> float | None:
    return round(part / whole, 3) if whole else None


def shown_answer(response: AskResponse) -> str:
    """Everything a reader is shown, as the judge and the key-fact metric read it: the lead,
    then each excerpt under its citation number."""
    excerpts = [
        f"[{excerpt.number}] " + " ".join(sentence.text for sentence in excerpt.sentences)
        for excerpt in response.excerpts
    ]
    return "\n\n".join([response.answer, *excerpts])


def lead_of(response: AskResponse) -> str:
    """The statement a reader takes away first: the answer, which is the lead, when the
    response shows excerpts apart; otherwise (an LLM's prose, an answer without excerpts)
    its text up to and including the first citation."""
    if response.excerpts or not response.answerable:
        return response.answer
    first = CITATION.search(response.answer)
    return response.answer[: first.end()] if first else response.answer


#: A lead statement shorter than this ("Yes.", "Critical: 1 day") is in many excerpts by
#: chance, so it alone does not show that the lead was taken from the evidence.
MIN_QUOTED_CHARACTERS = 20


#: A column name before its cell in a table row's lead ("trip: team; limit: $1,850.").
_ROW_LABEL = re.compile(r"(?:^|;)\s*[^;:]{1,60}:\s")


def lead_from_evidence(lead: str, evidence: Sequence[Evidence]) -> bool | None:
    """Whether a statement of the lead is part of an evidence excerpt, or an excerpt part of it.

    "Lead states a key fact" counts any sentence holding one of the reference's numbers or
    names, so a lead that picks sentences for holding numbers scores there without answering
    ("Cost per person: $30" for the co-working budget of "$300-500"). A lead copied from the
    passage the reference rests on is a stricter reading; it misses a fact stated the same way
    in another document, so the two are read together. None for a case without evidence.
    """
    if not evidence:
        return None
    statements = [normalize(text) for text in CITATION.split(lead)]
    # A table row leads as "Trip: Team; Limit: $1,850.", its source row has the cells alone.
    statements += [_ROW_LABEL.sub(" ", statement) for statement in statements]
    excerpts = [normalize(item.excerpt) for item in evidence]
    return any(
        contains(excerpt, statement, DEFAULT_THRESHOLD)
        or contains(statement, excerpt, DEFAULT_THRESHOLD)
        for statement in statements
        if len(statement) >= MIN_QUOTED_CHARACTERS
        for excerpt in excerpts
    )


def judge_answer(judge: LLMClient, case: GoldenCase, answer: str, sources: str) -> JudgeVerdict:
    """The judge's verdict on one answer; LLMFailure when no valid verdict came back."""
    return judge.complete(
        judge.prompt(JUDGE_PROMPT),
        JudgeVerdict,
        question=case.question,
        reference=case.answer,
        case_note=_UNANSWERABLE_NOTE if case.type == "unanswerable" else "",
        answer=answer,
        sources=sources[:MAX_SOURCE_CHARS] or "(nothing was retrieved)",
    ).value


#: Asks the pipeline one question; returns its response and the text of its context passages.
Asker = Callable[[str], tuple[AskResponse, str]]


def evaluate_answers(
    cases: Sequence[GoldenCase],
    ask: Asker,
    judge: LLMClient | None,
    concurrency: int = 4,
    on_case: ProgressCallback | None = None,
) -> AnswerEvalReport:
    """Answers every case (one at a time, as the pipeline is local) and scores its key facts;
    a judge, when there is one, grades them in parallel."""
    report = AnswerEvalReport(
        run_id=uuid.uuid4().hex[:12],
        started_at=datetime.now(UTC),
        judge_model=judge.model if judge else NO_JUDGE,
    )
    answered: list[tuple[GoldenCase, AnswerOutcome, str]] = []
    for case in cases:
        started = time.perf_counter()
        response, sources = ask(case.question)
        lead = lead_of(response)
        shown = shown_answer(response)
        facts = score_key_facts(case.answer, shown)
        outcome = AnswerOutcome(
            case_id=case.id,
            case_type=case.type,
            question=case.question,
            reference_answer=case.answer,
            answer=shown,
            answer_mode=response.mode,
            degraded=response.degraded,
            n_citations=len(response.citations),
            answer_seconds=time.perf_counter() - started,
            key_facts=len(facts.facts),
            key_facts_found=len(facts.found),
            declined=not response.answerable,
            lead=lead,
            lead_words=len(CITATION.sub(" ", lead).split()),
            lead_key_facts_found=len(score_key_facts(case.answer, lead).found),
            lead_from_evidence=lead_from_evidence(lead, case.evidence_items()),
            asserted=response.asserted,
            shown_key_facts_found=len(facts.found),
            language=case.language,
        )
        answered.append((case, outcome, sources))

    done = 0

    def grade(item: tuple[GoldenCase, AnswerOutcome, str]) -> AnswerOutcome:
        case, outcome, sources = item
        if judge is None:
            return outcome
        try:
            verdict = judge_answer(judge, case, outcome.answer, sources)
        except LLMFailure as error:
            outcome.judge_error = str(error)
            return outcome
        outcome.score = verdict.score
        outcome.label = label_for(verdict, answerable=case.type != "unanswerable")
        outcome.reasoning = verdict.reasoning
        return outcome

    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        for outcome in pool.map(grade, answered):
            report.outcomes.append(outcome)
            done += 1
            if on_case:
                on_case(done, len(answered))
    return report
