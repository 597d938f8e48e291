"""Errors that carry the stage, the document and a countable reason, so failures can be acted on."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from lorehouse.models import FailureReason

if TYPE_CHECKING:
    from pydantic import ValidationError


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


def validation_summary(error: ValidationError, whole: str = "value", shown: int = 3) -> str:
    """A pydantic error as one line: where and what for the first few problems, without the
    input echoed back or the documentation links, for a log line or a command's error.
    `whole` names a problem with the value as a whole (no field)."""
    return field_errors(error.errors()[:shown], whole)


def field_errors(items: Iterable[Mapping[str, Any]], whole: str = "value") -> str:
    """Field errors (pydantic's, or a 422's `detail` list) as `field: message; ...`."""
    return "; ".join(
        f"{'.'.join(str(part) for part in item.get('loc', ())) or whole}: {item.get('msg')}"
        for item in items
    )
