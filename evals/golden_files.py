"""Reads a golden set file, whichever format it is in: Lorehouse's own JSONL, or FinanceBench's
(read through `evals.financebench`, which maps its questions to golden cases)."""

from __future__ import annotations

from pathlib import Path

from evals.financebench import financebench_cases, is_financebench
from evals.golden_set import GoldenCase, jsonl_cases


def load_golden(path: Path) -> list[GoldenCase]:
    """Every case of a golden set, in file order; FinanceBench files are read as such."""
    if is_financebench(path):
        return financebench_cases(path)
    return list(jsonl_cases(path))
