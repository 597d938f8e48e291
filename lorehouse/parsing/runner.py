"""Runs parsers over many documents: in worker processes, with a per-file timeout.

A parser that hangs or crashes on one hostile file must cost that file only. Each file is
parsed in a pool worker that is killed when it overruns its timeout, and every outcome comes
back as either a ParsedDocument or a DocumentFailure with a reason, never as an exception.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from datetime import UTC, datetime

from pebble import ProcessExpired, ProcessPool

from lorehouse.errors import ParseError, SourceError
from lorehouse.models import DocumentFailure, FailureReason, FileType, ParsedDocument, RawDocument
from lorehouse.parsing.registry import ParseOptions, parser_for

PARSE_STAGE = "parse"
_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ParseJob:
    """A document to parse and how to fetch its bytes (called in the parent process)."""

    document: RawDocument
    load: Callable[[], bytes]


ParseOutcome = ParsedDocument | DocumentFailure


def parser_version_of(file_type: FileType, options: ParseOptions) -> str:
    """The version a document of this type would be parsed with now ("none" if unsupported)."""
    parser = parser_for(file_type)
    return parser.qualified_version(options) if parser is not None else "none"


def parse_document(
    data: bytes, document: RawDocument, options: ParseOptions | None = None
) -> ParseOutcome:
    """Parses one document in this process; every failure is returned, not raised."""
    started = time.perf_counter()
    try:
        if not data:
            raise ParseError(FailureReason.EMPTY, "the file has no bytes")
        parser = parser_for(document.file_type)
        if parser is None:
            raise ParseError(
                FailureReason.UNSUPPORTED_TYPE,
                f"content is not a supported format (extension {document.rel_path!r})",
            )
        options = options or ParseOptions()
        output = parser.function(data, document.rel_path, options)
        markdown, page_map = output.builder.build()
        if not markdown.strip():
            raise ParseError(FailureReason.EMPTY, "the file holds no text")
        return ParsedDocument(
            doc_id=document.doc_id,
            content_sha256=document.content_sha256,
            markdown=markdown,
            page_map=page_map,
            parser=parser.name,
            parser_version=parser.qualified_version(options),
            parse_ms=(time.perf_counter() - started) * 1000,
            warnings=output.warnings,
            title=output.title or _first_heading(markdown),
        )
    except ParseError as error:
        return failure(document, error.reason, error.detail)
    except RecursionError:
        return failure(document, FailureReason.CORRUPT, "structure nested too deeply to read")
    except MemoryError:
        return failure(document, FailureReason.TOO_LARGE, "ran out of memory while parsing")
    except Exception as error:  # noqa: BLE001 - a library crash on a malformed file is recorded
        _log.warning("parser crashed on %s", document.rel_path, exc_info=True)
        return failure(document, FailureReason.CORRUPT, f"{type(error).__name__}: {error}")


def failure(document: RawDocument, reason: FailureReason, detail: str) -> DocumentFailure:
    """A failure record for the parse stage."""
    return DocumentFailure(
        doc_id=document.doc_id,
        rel_path=document.rel_path,
        content_sha256=document.content_sha256,
        stage=PARSE_STAGE,
        reason=reason,
        detail=detail[:2000],
        at=datetime.now(UTC),
    )


def _first_heading(markdown: str) -> str | None:
    for line in markdown.splitlines():
        if line.startswith("#"):
            return line.lstrip("#").strip() or None
    return None


def parse_many(
    jobs: Iterable[ParseJob],
    workers: int,
    timeout_seconds: float,
    max_file_bytes: int,
    on_outcome: Callable[[ParseOutcome], None],
    options: ParseOptions | None = None,
) -> None:
    """Parses every job in a pool of `workers` processes and reports each outcome as it lands.

    At most two files per worker are held in memory at once, so a large corpus streams.
    """
    in_flight: dict[Future, RawDocument] = {}
    with ProcessPool(max_workers=max(1, workers), max_tasks=200) as pool:
        for job in jobs:
            early = _precheck(job, max_file_bytes)
            if isinstance(early, DocumentFailure):
                on_outcome(early)
                continue
            future = pool.schedule(
                parse_document, args=(early, job.document, options), timeout=timeout_seconds
            )
            in_flight[future] = job.document
            while len(in_flight) >= 2 * max(1, workers):
                _drain(in_flight, on_outcome, timeout_seconds)
        while in_flight:
            _drain(in_flight, on_outcome, timeout_seconds)


def _precheck(job: ParseJob, max_file_bytes: int) -> bytes | DocumentFailure:
    document = job.document
    if document.size_bytes > max_file_bytes:
        return failure(
            document,
            FailureReason.TOO_LARGE,
            f"{document.size_bytes:,} bytes is over the {max_file_bytes:,}-byte limit",
        )
    try:
        data = job.load()
    except SourceError as error:
        return failure(document, FailureReason.UNREADABLE, str(error))
    if len(data) > max_file_bytes:
        return failure(document, FailureReason.TOO_LARGE, f"{len(data):,} bytes is over the limit")
    return data


def _drain(
    in_flight: dict[Future, RawDocument],
    on_outcome: Callable[[ParseOutcome], None],
    timeout_seconds: float,
) -> None:
    done, _ = wait(list(in_flight), return_when=FIRST_COMPLETED)
    for future in done:
        document = in_flight.pop(future)
        on_outcome(_result(future, document, timeout_seconds))


def _result(future: Future, document: RawDocument, timeout_seconds: float) -> ParseOutcome:
    try:
        return future.result()
    except FutureTimeout:
        return failure(
            document, FailureReason.TIMEOUT, f"parsing took longer than {timeout_seconds:g} s"
        )
    except ProcessExpired as error:
        return failure(
            document,
            FailureReason.CORRUPT,
            f"the parser process died (exit code {error.exitcode}); likely a crash in a native "
            "library or the memory limit",
        )
    except Exception as error:  # noqa: BLE001 - e.g. an outcome that could not be pickled
        return failure(document, FailureReason.CORRUPT, f"{type(error).__name__}: {error}")
