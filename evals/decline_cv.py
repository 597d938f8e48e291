"""Chooses the extractive answer's decline threshold by cross-validation over golden sets.

For every case of each set (each over its own materialized store) the pipeline retrieves the
context as `/v1/ask` does, and the answerer reads it (`read_context`): how similar its best
sentence is to the question, which the answer declines below
(`LOREHOUSE_ANSWER_MIN_SIMILARITY`). Folds are drawn over all cases together; in each, the
threshold is the one that declines the most unanswerable training cases while wrongly
declining at most `--max-wrong` of the answerable ones, then it is scored on the held-out
fold. The spread of the chosen thresholds and held-out rates says how well the choice
carries.

    python evals/decline_cv.py handbook_dev.jsonl=STORE_DIR docs_dev.jsonl=STORE_DIR2
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path

from evals.golden_set import jsonl_cases
from lorehouse.agents.extractive.reading import read_context
from lorehouse.settings import Settings
from lorehouse.wiring import Lorehouse

GRID = [round(0.01 * step, 2) for step in range(101)]


@dataclass
class CaseReading:
    golden_set: str
    case_id: str
    case_type: str
    answerable: bool
    best_similarity: float


def read_cases(golden: Path, data_dir: Path) -> list[CaseReading]:
    """Each case's context as the answerer reads it."""
    settings = Settings(data_dir=data_dir)
    lorehouse = Lorehouse(settings)
    pipeline = lorehouse.ask_pipeline()
    readings = []
    for case in jsonl_cases(golden):
        prepared = pipeline.prepare(case.question, (), None, 8, (), None)
        reading = read_context(pipeline.embedder, case.question, prepared.context)
        readings.append(
            CaseReading(
                golden.name,
                case.id,
                case.type,
                case.type != "unanswerable",
                reading.best_similarity if reading else 0.0,
            )
        )
    return readings


def rates(cases: list[CaseReading], threshold: float) -> tuple[float, float]:
    """(unanswerable declined, answerable wrongly declined) at `threshold`."""

    def declined(case: CaseReading) -> bool:
        return case.best_similarity < threshold

    answerable = [c for c in cases if c.answerable]
    unanswerable = [c for c in cases if not c.answerable]
    right = sum(map(declined, unanswerable)) / max(1, len(unanswerable))
    wrong = sum(map(declined, answerable)) / max(1, len(answerable))
    return right, wrong


def choose(cases: list[CaseReading], max_wrong: float) -> float:
    """The threshold declining most unanswerable cases within the wrong-decline budget."""
    allowed = [t for t in GRID if rates(cases, t)[1] <= max_wrong]
    return max(allowed, key=lambda t: (rates(cases, t)[0], -t), default=0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sets", nargs="+", help="GOLDEN=DATA_DIR pairs")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--max-wrong", type=float, default=0.05)
    parser.add_argument("--readings", type=Path, help="read and write the readings here")
    args = parser.parse_args()
    if args.readings and args.readings.exists():
        cases = [CaseReading(**row) for row in json.loads(args.readings.read_text())]
    else:
        cases = []
        for pair in args.sets:
            golden, data_dir = pair.split("=", 1)
            cases += read_cases(Path(golden), Path(data_dir))
        if args.readings:
            args.readings.write_text(json.dumps([asdict(c) for c in cases]))
    shuffled = cases[:]
    random.Random(0).shuffle(shuffled)
    folds = [shuffled[i :: args.folds] for i in range(args.folds)]
    chosen, held_right, held_wrong = [], [], []
    for index, held in enumerate(folds):
        train = [c for j, fold in enumerate(folds) if j != index for c in fold]
        threshold = choose(train, args.max_wrong)
        right, wrong = rates(held, threshold)
        chosen.append(threshold)
        held_right.append(right)
        held_wrong.append(wrong)
        print(
            f"fold {index}: threshold {threshold:.2f}  held-out declined {right:.2f}, "
            f"wrongly declined {wrong:.2f}"
        )
    median = statistics.median(chosen)
    print(
        f"thresholds {min(chosen):.2f}-{max(chosen):.2f} (median {median:.2f});"
        f" held-out declined {statistics.mean(held_right):.2f} "
        f"(range {min(held_right):.2f}-{max(held_right):.2f}), wrongly declined "
        f"{statistics.mean(held_wrong):.2f} (range {min(held_wrong):.2f}-{max(held_wrong):.2f})"
    )
    overall = choose(cases, args.max_wrong)
    for name in sorted({c.golden_set for c in cases}):
        subset = [c for c in cases if c.golden_set == name]
        right, wrong = rates(subset, overall)
        print(f"{name} at {overall:.2f}: declined {right:.2f}, wrongly declined {wrong:.2f}")


if __name__ == "__main__":
    main()
