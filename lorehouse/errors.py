"""Errors that carry the stage, the document and a countable reason, so failures can be acted on."""

from __future__ import annotations

from lorehouse.models import FailureReason


class LorehouseError(Exception):
    """Base class for every error Lorehouse raises on purpose."""


class SourceError(LorehouseError):
    """The document source cannot be listed or read (missing folder, bad S3 prefix)."""


class ParseError(LorehouseError):
    """A document cannot be turned into Markdown; `reason` is one of the fixed failure reasons."""

    def __init__(self, reason: FailureReason, detail: str) -> None:
        super().__init__(f"{reason.value}: {detail}")
        self.reason = reason
        self.detail = detail
