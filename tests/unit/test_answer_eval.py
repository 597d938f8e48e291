"""The judge's verdicts and labels, with litellm's own mock responses."""

from __future__ import annotations

import pytest

from evals.answer_eval import JudgeVerdict, judge_answer, label_for
from evals.golden_set import GoldenCase
from lorehouse.llm import LLMClient, LLMFailure

CASE = GoldenCase(
    id="leave-1",
    question="How many weeks of parental leave do primary caregivers get?",
    evidence=[],
    answer="16 weeks of paid leave.",
    type="lookup",
)


def _judge(reply: str) -> LLMClient:
    return LLMClient("openai/gpt-4o-mini", max_attempts=2, call_options={"mock_response": reply})


def test_a_valid_verdict_is_parsed() -> None:
    reply = '{"reasoning": "Matches the reference.", "score": 5, "refused": false}'
    verdict = judge_answer(_judge(reply), CASE, "Primary caregivers get 16 weeks [1].", "[1] ...")
    assert verdict == JudgeVerdict(reasoning="Matches the reference.", score=5, refused=False)


@pytest.mark.parametrize(
    "reply",
    [
        "Score: 5",
        '{"reasoning": "Great.", "score": 7, "refused": false}',
        '{"score": 3, "refused": false}',
    ],
)
def test_an_invalid_verdict_is_an_error_not_a_score(reply: str) -> None:
    client = _judge(reply)
    with pytest.raises(LLMFailure, match="invalid output"):
        judge_answer(client, CASE, "Sixteen weeks.", "")
    assert client.usage.calls == 2  # asked again before giving up


def test_labels_follow_the_score_and_refusals() -> None:
    def verdict(score: int, refused: bool = False) -> JudgeVerdict:
        return JudgeVerdict(reasoning="r", score=score, refused=refused)

    assert [label_for(verdict(s), answerable=True) for s in range(6)] == [
        "incorrect",
        "incorrect",
        "partial",
        "partial",
        "correct",
        "correct",
    ]
    # refusing an answerable question is its own failure mode
    assert label_for(verdict(0, refused=True), answerable=True) == "refused"
    # refusing an unanswerable one is right; inventing an answer to it is not
    assert label_for(verdict(5, refused=True), answerable=False) == "correct"
    assert label_for(verdict(0), answerable=False) == "incorrect"


def test_key_facts_are_the_reference_numbers_and_names_the_answer_must_state() -> None:
    from evals.key_facts import key_facts, score_key_facts

    reference = "Up to $2,000 for desk setup ($2,650 for Design team members)."
    assert key_facts(reference) == ("2000", "2650", "Design")
    stated = score_key_facts(reference, "New teammates may spend up to **$2,000** on a desk.")
    assert stated.found == ("2000",) and stated.share == 1 / 3
    # 20 is not 200, and 2000 is not 2000.5.
    assert score_key_facts("20 weeks", "200 weeks").found == ()
    assert score_key_facts("2,000", "2000.5").found == ()
    assert score_key_facts("no facts here", "anything").share == 1.0
    # A number is read with what is glued to it on both sides: an answer copying the
    # reference's own "20th century", "2.5yrs" or "113k" states 20, 2.5 and 113.
    assert score_key_facts("Newspapers of the 20th century.", "20th century papers").share == 1
    assert score_key_facts("On 29 August 2022.", "to be held on 29th August, 2022").share == 1
    assert score_key_facts("Every 2.5yrs", "Engineering: 2.5yrs").share == 1
    assert score_key_facts("FinTabNet 113k", "FinTabNet (113k samples)").share == 1
    # A name ends where its word ends.
    assert score_key_facts("Open a PR in GitHub.", "Kindly press the button on GitHub.").found == (
        "GitHub",
    )
    # One amount, written two ways.
    assert score_key_facts("= $1,384.80", "34.62 x 40 = $1384.8").found == ("1384.80",)
    assert score_key_facts("$11,250.00 net", "net $11,250").share == 1
    assert score_key_facts("1.05 mm", "1.5 mm").found == ()


def test_a_citation_number_is_not_a_stated_fact() -> None:
    """An answer citing passage [4] has not said "4 weeks": before this was checked, 10 of
    the handbook dev set's 122 answers were credited with a fact only their citations held."""
    from evals.key_facts import score_key_facts

    reference = "Up to 4 weeks paid, then 8 weeks unpaid."
    assert score_key_facts(reference, "Medical leave is paid for a month. [4] [8]").found == ()
    assert score_key_facts(
        reference, "The first 4 weeks are paid [1], 8 more unpaid [2]."
    ).found == (
        "4",
        "8",
    )


def test_a_lead_holding_the_right_number_elsewhere_is_not_from_the_evidence() -> None:
    """The co-working question's lead "Cost per person: $30" states no fact of "$300-500",
    but a wrong row can hold one; the evidence reading asks whether the lead was taken from
    the passage the reference rests on."""
    from evals.answer_eval import lead_from_evidence
    from evals.metrics import Evidence

    evidence = [
        Evidence(
            "expenses.md",
            "We offer our teammates a **$300–500 monthly budget** to join a coworking space.",
        )
    ]
    taken = "We offer our teammates a $300–500 monthly budget to join a coworking space. [1]"
    assert lead_from_evidence(taken, evidence) is True
    assert (
        lead_from_evidence("Expense: Co-working space; Cost per person: $300. [2]", evidence)
        is False
    )
    # The second statement of a two-part lead counts; a lead longer than a short excerpt too.
    assert lead_from_evidence(f"Desks are provided in every office. [3] {taken}", evidence)
    assert lead_from_evidence(
        "Expect a 7-10 day turn around on receiving reimbursements, once approved. [1]",
        [Evidence("expenses.md", "Expect a 7-10 day turn around on receiving reimbursements.")],
    )
    # A statement too short to show where it came from, and a case without evidence.
    assert lead_from_evidence("Yes. [1]", [Evidence("a.md", "Yes. You may keep it.")]) is False
    assert lead_from_evidence(taken, []) is None


def test_a_table_row_lead_is_matched_by_its_cells() -> None:
    """A row leads with its column names; the evidence quotes the row's cells."""
    from evals.answer_eval import lead_from_evidence
    from evals.metrics import Evidence

    evidence = [Evidence("travel.md", "| Team offsite | $1,850 per person | Finance |")]
    row = "Trip: Team offsite; Limit: $1,850 per person; Approver: Finance. [1]"
    assert lead_from_evidence(row, evidence)
    other = "Trip: Company trip; Limit: $2,400 per person; Approver: CEO. [1]"
    assert not lead_from_evidence(other, evidence)


def test_asserted_leads_are_measured_for_precision_coverage_and_near_misses() -> None:
    from datetime import UTC, datetime

    from evals.answer_eval import AnswerEvalReport, AnswerOutcome

    def outcome(case_type: str, asserted: bool, right: bool) -> AnswerOutcome:
        return AnswerOutcome(
            case_id=f"{case_type}-{asserted}-{right}",
            case_type=case_type,
            question="?",
            reference_answer="20 weeks",
            answer="",
            answer_mode="extractive",
            degraded=False,
            n_citations=1,
            answer_seconds=0.1,
            key_facts=0 if case_type == "unanswerable" else 1,
            lead_key_facts_found=int(right),
            asserted=asserted,
        )

    report = AnswerEvalReport("r", datetime.now(UTC), "none")
    report.outcomes = [
        outcome("lookup", True, True),
        outcome("lookup", True, False),
        outcome("lookup", False, True),  # passages only: right, but not asserted
        outcome("table", False, False),
        outcome("unanswerable", True, False),
        outcome("unanswerable", False, False),
    ]
    lead = report.lead_summary()
    assert (lead["asserted_precision"], lead["coverage"]) == (0.5, 0.5)
    assert lead["near_misses_asserted"] == 0.5
    assert lead["by_type"]["lookup"]["coverage"] == round(2 / 3, 3)
