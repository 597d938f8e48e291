"""Reads a golden set file, whichever format it is in: Lorehouse's own JSONL, FinanceBench's
(read through `evals.financebench`) or Docugami's SEC 10-Q CSV (`evals.docugami`), each mapped
to golden cases."""

from __future__ import annotations

from pathlib import Path

from evals.docugami import docugami_cases, is_docugami
from evals.financebench import financebench_cases, is_financebench
from evals.golden_set import GoldenCase, jsonl_cases


def load_golden(path: Path) -> list[GoldenCase]:
    """Every case of a golden set, in file order; FinanceBench and Docugami files as such."""
    if is_docugami(path):
        return docugami_cases(path)
    if is_financebench(path):
        return financebench_cases(path)
    return list(jsonl_cases(path))
