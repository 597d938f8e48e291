"""Settings: Evaluation.

The golden set the evals score, the recall gate, and the judge model.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal

from pydantic import BaseModel, Field

from lorehouse.settings.machine import (
    REPO_ROOT,
)


class EvaluationSettings(BaseModel):
    """The evaluation settings."""

    #: The heading the configuration page lists these settings under.
    heading: ClassVar[str] = "Evaluation"

    eval_golden_set: Path = Field(
        default=REPO_ROOT / "evals" / "golden" / "sample_corpus.jsonl",
        description="Golden set the retrieval_eval asset scores (JSONL).",
    )
    eval_gate: Literal["warn", "error"] = Field(
        default="warn",
        description="How the recall gate reports a drop of more than 3 points of recall@8.",
    )
    judge_model: str | None = Field(
        default=None,
        description=(
            "litellm model that grades answers in the answer eval (0-5 against the reference). "
            "Unset: the answer eval reports the judge-free measures only. Use a strong model."
        ),
    )
    judge_api_base: str | None = Field(
        default=None, description="Endpoint override for the judge model."
    )
    judge_max_output_tokens: int = Field(
        default=500,
        ge=16,
        le=16_000,
        description="Output limit of the answer-eval judge: its reasoning, score and flags.",
    )
