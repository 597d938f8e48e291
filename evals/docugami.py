"""Docugami's KG-RAG "SEC 10-Q" questions as a golden set over the filings they cite.

`qna_data.csv` (columns Question, Source Docs, Question Type, Source Chunk Type, Answer) holds
195 human-reviewed questions over 20 10-Q filings. It names no evidence excerpt, only its
documents, as glob patterns ("*AAPL*", "*2023 Q3 AAPL*") over the `docs/` folder beside it: a
case's evidence is each matching filing as a whole, so retrieval is scored at the document
level (some passage of every cited filing in the top k) and answers by their key facts.
"""

from __future__ import annotations

import csv
import fnmatch
import re
from pathlib import Path

from pydantic import ValidationError

from evals.golden_set import CaseType, EvidenceItem, GoldenCase, GoldenSetError

COLUMNS = ("Question", "Source Docs", "Question Type", "Source Chunk Type", "Answer")
#: The answers name their sources ("(SOURCE: 2023 Q1 AAPL.pdf)", "SOURCE(S): ..."): file
#: names, not facts an answer should state, and their years and tickers would count as such.
_SOURCE_NOTE = re.compile(r"\(?\s*SOURCE(?:\(S\))?:[^\n)]*\)?", re.IGNORECASE)


def is_docugami(path: Path) -> bool:
    """Whether a file is a CSV with Docugami's question columns."""
    if path.suffix.lower() != ".csv":
        return False
    with path.open(encoding="utf-8-sig", newline="") as rows:
        header = next(csv.reader(rows), [])
    return tuple(name.strip() for name in header) == COLUMNS


def _case_type(question_type: str, chunk_type: str) -> CaseType:
    if question_type.startswith("Multi-Doc"):
        return "multi_doc"
    return "table" if chunk_type.strip() == "Table" else "lookup"


def docugami_cases(path: Path, documents: Path | None = None) -> list[GoldenCase]:
    """Every question of the CSV as a golden case, in file order.

    `documents` is the folder the "Source Docs" patterns are matched in (default: `docs/`
    beside the CSV); the evidence files are named relative to it.
    """
    folder = documents or path.parent / "docs"
    names = sorted(p.name for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []
    if not names:
        raise GoldenSetError(f"{path}: no documents in {folder} to match its Source Docs")
    cases = []
    with path.open(encoding="utf-8-sig", newline="") as rows:
        for number, row in enumerate(csv.DictReader(rows), start=2):
            try:
                patterns = [p.strip() for p in row["Source Docs"].split(",") if p.strip()]
                files = [n for n in names if any(fnmatch.fnmatch(n, p) for p in patterns)]
                if not files:
                    raise GoldenSetError(f"no document matches {row['Source Docs']!r}")
                cases.append(
                    GoldenCase(
                        id=f"docugami-{number - 1:03d}",
                        question=row["Question"].strip(),
                        answer=" ".join(_SOURCE_NOTE.sub(" ", row["Answer"]).split()),
                        type=_case_type(row["Question Type"], row["Source Chunk Type"]),
                        evidence=[EvidenceItem(file=name, excerpt="") for name in files],
                    )
                )
            except (KeyError, AttributeError, ValidationError, GoldenSetError) as error:
                raise GoldenSetError(f"{path}:{number}: not a Docugami case: {error}") from error
    return cases
