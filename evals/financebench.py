"""FinanceBench (Patronus AI) questions as a golden set over the SEC filings they cite.

Each FinanceBench line names its filing (`doc_name`, stored as `<doc_name>.pdf`), the
question, the analyst's answer and evidence: text extracted from the filing with its 0-based
page. The evidence becomes an excerpt (with its 1-based page) that the retrieval eval matches
fuzzily against retrieved chunks, since FinanceBench's extraction keeps PDF line breaks and
spacing that parsed Markdown does not.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from evals.golden_set import CaseType, EvidenceItem, GoldenCase, GoldenSetError

# Metric questions are computed from financial-statement tables; the rest ask for facts.
_CASE_TYPES: dict[str, CaseType] = {"metrics-generated": "table"}


def is_financebench(path: Path) -> bool:
    """Whether a JSONL file is in FinanceBench's format (its lines carry `financebench_id`)."""
    with path.open(encoding="utf-8") as lines:
        first = next((line for line in lines if line.strip()), "")
    try:
        return "financebench_id" in json.loads(first)
    except json.JSONDecodeError:
        return False


def financebench_cases(path: Path) -> list[GoldenCase]:
    """Every question of a FinanceBench JSONL file as a golden case, in file order."""
    cases = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            cases.append(
                GoldenCase(
                    id=row["financebench_id"],
                    question=row["question"],
                    answer=row["answer"],
                    type=_CASE_TYPES.get(row.get("question_type", ""), "lookup"),
                    evidence=[
                        EvidenceItem(
                            file=f"{item.get('doc_name') or row['doc_name']}.pdf",
                            excerpt=item["evidence_text"],
                            page=item["evidence_page_num"] + 1,
                        )
                        for item in row["evidence"]
                        if item.get("evidence_text", "").strip()
                    ],
                )
            )
        except (json.JSONDecodeError, KeyError, TypeError, ValidationError) as error:
            raise GoldenSetError(f"{path}:{number}: not a FinanceBench case: {error}") from error
    return cases
