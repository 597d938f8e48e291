"""`lorehouse eval retrieval --explain` on a corpus built so each case misses in its own way."""

from __future__ import annotations

import json
from pathlib import Path

from evals.explain import MISS_REASONS
from evals.runner import EXPLAIN_K, run_retrieval_eval
from lorehouse.inventory import document_id
from lorehouse.llm import LLMClient
from lorehouse.settings import Settings
from lorehouse.stores.duckdb_store import DuckDBStore
from lorehouse.wiring import Lorehouse
from tests.conftest import materialize_everything

# Ten pages that all answer "how do I book a desk" better than the page holding the evidence.
DISTRACTORS = {
    f"desks/floor-{n}.md": (
        f"# Booking a desk on floor {n}\n\nTo book a desk on floor {n}, open the desk booking "
        f"tool, pick floor {n} and book the desk for the day. Desk booking on floor {n} opens "
        "at 8 am; cancel your desk booking if you do not come in.\n"
    )
    for n in range(1, 11)
}
ZEBRA = (
    "# Zebra room\n\nThe zebra room on the ground floor holds the espresso machine and "
    "the quiet corner with six armchairs for reading.\n"
)
LONG_SECTION = "# Travel history\n\n" + " ".join(
    f"In year {year} the company flew {year % 97} people to the offsite in city number "
    f"{year % 13}, and the budget for that trip was {year * 3} euros in total."
    for year in range(1900, 1990)
)
SPLIT_EXCERPT = LONG_SECTION.split("\n\n", 1)[1][200:2600]


def _case(case_id: str, question: str, file: str, excerpt: str) -> dict:
    return {
        "id": case_id,
        "question": question,
        "evidence": [{"file": file, "excerpt": excerpt}],
        "answer": "x",
        "type": "lookup",
    }


def test_each_way_of_missing_is_told_apart_and_stored(tmp_path: Path) -> None:
    source = tmp_path / "corpus"
    for rel_path, text in {
        **DISTRACTORS,
        "rooms/zebra.md": ZEBRA,
        "history/travel.md": LONG_SECTION,
    }.items():
        (source / rel_path).parent.mkdir(parents=True, exist_ok=True)
        (source / rel_path).write_text(text)
    (source / "broken.pdf").write_bytes(b"%PDF-1.7\n" + b"\x00garbage" * 50)
    data_dir = tmp_path / "data"
    assert materialize_everything(source, data_dir, with_evals=False).success  # type: ignore[attr-defined]

    golden = tmp_path / "golden.jsonl"
    cases = [
        _case("not-parsed", "What does the broken report say?", "broken.pdf", "x" * 50),
        # Asked so that ten desk pages outrank every chunk of the travel history.
        _case("split", "How do I book a desk?", "history/travel.md", SPLIT_EXCERPT),
        _case(
            "ranked-low",
            "How do I book a desk?",
            "rooms/zebra.md",
            "holds the espresso machine and the quiet corner with six armchairs",
        ),
        _case(
            "found",
            "How do I book a desk on floor 3?",
            "desks/floor-3.md",
            "To book a desk on floor 3, open the desk booking tool",
        ),
    ]
    golden.write_text("\n".join(json.dumps(case) for case in cases))

    # A language model that always names floor 7 as the only source: the agentic retrieval
    # then searches floor 7 alone and misses the other files' evidence.
    floor_7 = document_id("desks/floor-7.md")
    chooses_floor_7 = LLMClient(
        "openai/gpt-4o-mini",
        backoff_seconds=0,
        max_attempts=1,
        call_options={"mock_response": json.dumps({"documents": [floor_7], "all": False})},
    )
    settings = Settings(data_dir=data_dir, rerank="none")
    run = run_retrieval_eval(
        Lorehouse(settings, answer_llm=chooses_floor_7), golden, include_naive=False
    )
    reasons = {(m.retriever, m.case_id): m for m in run.misses}
    assert reasons["hybrid", "not-parsed"].reason == "not_parsed"
    assert reasons["hybrid", "split"].reason == "split_across_chunks"
    low = reasons["hybrid", "ranked-low"]
    assert low.reason == "ranked_below_k"
    assert all(rank is None or rank > EXPLAIN_K for rank in low.ranks.values()), low.ranks
    assert low.ranks["hybrid"] is not None and "hybrid" in low.detail
    assert reasons["agentic", "found"].reason == "excluded_by_sources"
    assert ("hybrid", "found") not in reasons
    assert {m.reason for m in run.misses} == set(MISS_REASONS)

    stored = DuckDBStore(settings.duckdb_path).table("eval_retrieval_misses")
    assert set(stored["run_id"]) == {run.report.run_id}
    assert len(stored) == len(run.misses)
    assert set(stored["reason"]) == set(MISS_REASONS)
