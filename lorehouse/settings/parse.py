"""Settings: Parse.

How files are parsed and cut into chunks, with the limits that keep one bad file from
stopping a run.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, Field

from lorehouse.settings.machine import (
    available_cores,
)


class ParseSettings(BaseModel):
    """The parsing and chunking settings."""

    #: The heading the configuration page lists these settings under.
    heading: ClassVar[str] = "Parse"

    workers: int = Field(
        default_factory=available_cores,
        ge=1,
        description="Processes used to parse documents in parallel.",
    )
    parse_timeout_seconds: float = Field(
        default=120.0,
        gt=0,
        description=(
            "A file still parsing after this long, plus LOREHOUSE_PARSE_TIMEOUT_SECONDS_PER_MB "
            "for each MB it holds, is cut off."
        ),
    )
    parse_timeout_seconds_per_mb: float = Field(
        default=60.0,
        ge=0,
        description=(
            "Parsing time allowed per MB of a file on top of LOREHOUSE_PARSE_TIMEOUT_SECONDS, "
            "so a long annual report is not cut off while a stuck small file is."
        ),
    )
    max_file_bytes: int = Field(
        default=200 * 1024 * 1024, gt=0, description="Larger files are recorded as too_large."
    )
    parse_memory_mb: int = Field(
        default=2048,
        ge=0,
        description=(
            "Memory (MB) one parse worker may take on top of what it starts with; a file "
            "needing more is recorded as too_large. 0 means no ceiling."
        ),
    )
    pdf_ocr_languages: str | None = Field(
        default=None,
        description=(
            "Tesseract languages (e.g. 'eng' or 'eng+deu') to OCR scanned PDF pages with; "
            "unset leaves scans as failed with no_text_layer."
        ),
    )
    pdf_ocr_dpi: int = Field(
        default=300, ge=72, le=600, description="Resolution scanned pages are rendered at for OCR."
    )
    chunk_max_tokens: int = Field(
        default=256,
        ge=32,
        le=256,
        description=(
            "Largest chunk, in embedding-model tokens (the MiniLM embedder reads 256 at most)."
        ),
    )
