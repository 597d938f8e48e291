"""Readers' verdicts on answers as golden-set candidates: the review loop in which subject
experts turn what people asked into evaluation cases.

Each verdict becomes one case with exactly the keys a golden set has. The evidence names the
files the answer cited, with an empty excerpt for the reviewer to copy from the file, so
`evals/check_golden.py` refuses the candidate until a person has filled it in; the answer is
the one given (thumbs up) or the reader's correction (thumbs down, when they wrote one).

A candidate's id names the API key that sent the verdict (its name, never the key), so a
reviewer sees who proposed what, and the golden set keeps saying where a case came from.
"""

from __future__ import annotations

import pandas as pd

from evals.golden_set import CaseType

#: The type a candidate starts as; the reviewer sets the real one.
CANDIDATE_TYPE: CaseType = "lookup"


def candidate_id(caller: str, answer_id: str) -> str:
    """The id of the candidate made from `caller`'s verdict on the answer `answer_id`."""
    return f"feedback-{caller}-{answer_id[:12]}"


def feedback_candidates(feedback: pd.DataFrame) -> list[dict]:
    """One golden-set case per verdict, in the frame's order."""
    cases = []
    for row in feedback.itertuples(index=False):
        corrected = row.rating == "down" and isinstance(row.comment, str) and row.comment.strip()
        files = list(dict.fromkeys(row.cited_files))
        cases.append(
            {
                "id": candidate_id(row.caller, row.answer_id),
                "question": row.question,
                "evidence": [{"file": file, "excerpt": ""} for file in files],
                "answer": row.comment.strip() if corrected else row.answer,
                "type": CANDIDATE_TYPE,
            }
        )
    return cases
