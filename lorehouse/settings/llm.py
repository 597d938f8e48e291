"""Settings: LLM.

The language model litellm calls for enrichment, answers and translations. Unset, every
stage runs offline.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, Field


class LLMSettings(BaseModel):
    """The language model's settings."""

    #: The heading the configuration page lists these settings under.
    heading: ClassVar[str] = "LLM"

    llm_model: str | None = Field(
        default=None,
        description=(
            "litellm model string (openai/gpt-4o-mini, anthropic/..., bedrock/..., ollama/...) "
            "that enriches chunks and writes answers; unset: extractive enrichment and answers."
        ),
    )
    llm_api_base: str | None = Field(
        default=None, description="Endpoint override (an Ollama or OpenAI-compatible server)."
    )
    llm_concurrency: int = Field(default=4, ge=1, le=64, description="LLM calls in flight.")
    llm_max_attempts: int = Field(
        default=3, ge=1, le=10, description="Tries per call (invalid output, rate limits)."
    )
    llm_timeout_seconds: float = Field(default=60.0, gt=0, description="Per-call timeout.")
    enrichment_max_output_tokens: int = Field(
        default=400,
        ge=16,
        le=16_000,
        description="Output limit of one chunk's enrichment (summary, keywords, FAQs).",
    )
    answer_max_output_tokens: int = Field(
        default=800,
        ge=16,
        le=16_000,
        description="Output limit of an answer (and of the question rewriting before it).",
    )
    prompts_dir: Path | None = Field(
        default=None,
        description=(
            "Folder of prompt overrides: a file named like a bundled prompt "
            "(chunk_enrichment.v1.md, answerer.v2.md, ...) replaces it. Enrichment answers are "
            "cached by prompt content, so editing a prompt re-enriches on the next run."
        ),
    )
