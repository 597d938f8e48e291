"""Golden sets: questions with verbatim evidence excerpts and a reference answer (JSONL)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from evals.metrics import Evidence
from lorehouse.errors import validation_summary

CaseType = Literal["lookup", "table", "paraphrase", "multi_doc", "ambiguous", "unanswerable"]


class EvidenceItem(BaseModel):
    file: str = Field(min_length=1, description="Path relative to the corpus root.")
    excerpt: str = Field(
        description=(
            "Copied verbatim from the file. Empty: any passage of the file is the evidence (a "
            "set that names only its documents, as Docugami's does; `check_golden.py` still "
            "requires excerpts of Lorehouse's own sets)."
        )
    )
    page: int | None = Field(
        default=None, ge=1, description="1-based page of the excerpt, where the file has pages."
    )


class GoldenCase(BaseModel):
    """One question; unanswerable cases have no evidence and count in answer eval only."""

    id: str = Field(min_length=1)
    question: str = Field(min_length=1)
    evidence: list[EvidenceItem]
    answer: str = Field(min_length=1)
    type: CaseType
    #: The question's language (ISO 639-1), for reports by language: a German question over
    #: German documents and an English one over the same are measured apart.
    language: str | None = Field(default=None, pattern=r"^[a-z]{2}$")

    def evidence_items(self) -> list[Evidence]:
        return [Evidence(item.file, item.excerpt) for item in self.evidence]

    @property
    def retrievable(self) -> bool:
        """Whether the case counts in retrieval eval (it has evidence to find)."""
        return bool(self.evidence)


class GoldenSetError(ValueError):
    """A golden set line is not a valid case; the message names the line."""


class GoldenSetNotIndexed(GoldenSetError):
    """None of the files a golden set cites is in the index it would be scored on."""


def jsonl_cases(path: Path) -> Iterator[GoldenCase]:
    """The cases of a Lorehouse JSONL golden set, in file order; a file without any is an
    error, since its scores (all zero) would read as a retriever that finds nothing."""
    cases = 0
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            case = GoldenCase.model_validate(json.loads(line))
        except json.JSONDecodeError as error:
            raise GoldenSetError(f"{path}:{number}: not a JSON object: {error}") from error
        except ValidationError as error:
            raise GoldenSetError(f"{path}:{number}: {validation_summary(error)}") from error
        cases += 1
        yield case
    if not cases:
        raise GoldenSetError(f"{path} holds no cases: one JSON object a line")
