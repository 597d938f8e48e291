"""Runs parsers over many documents: in worker processes, with a per-file timeout.

A parser that hangs, crashes or balloons on one hostile file must cost that file only. Each
file is parsed in a pool worker that is killed when it overruns its timeout and that cannot
grow past a memory ceiling, and every outcome comes back as either a ParsedDocument or a
DocumentFailure with a reason, never as an exception.
"""

from __future__ import annotations

import hashlib
import logging
import resource
import time
import warnings
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import PurePosixPath

import psutil
from pebble import ProcessExpired, ProcessPool

from lorehouse.errors import ParseError, SourceError
from lorehouse.models import DocumentFailure, FailureReason, FileType, ParsedDocument, RawDocument
from lorehouse.parsing.registry import ParseOptions, import_parser_libraries, parser_for

PARSE_STAGE = "parse"
_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ParseJob:
    """A document to parse and how to fetch its bytes (called in the parent process)."""

    document: RawDocument
    load: Callable[[], bytes]


ParseOutcome = ParsedDocument | DocumentFailure


@dataclass(frozen=True)
class ParseLimits:
    """What one run of the parse stage may spend, per file and in all.

    `memory_mb` is address space a worker may add to what it starts with: the fork of a
    parent that has loaded models already maps gigabytes it never touches, so an absolute
    ceiling would either be meaningless or kill the worker before it parses anything.
    """

    workers: int
    timeout_seconds: float
    max_file_bytes: int
    memory_mb: int | None = None
    timeout_seconds_per_mb: float = 0.0

    def timeout_for(self, size_bytes: int) -> float:
        """Seconds one file may take: a base every file gets, plus an allowance per MB.

        Parsing time grows with what a file holds, and more so beside another parse on the
        same cores, so one limit for every file either fails large reports or lets a hung
        small file hold a worker for minutes.
        """
        return self.timeout_seconds + self.timeout_seconds_per_mb * size_bytes / 2**20


def parser_version_of(file_type: FileType, options: ParseOptions) -> str:
    """The version a document of this type would be parsed with now ("none" if unsupported)."""
    parser = parser_for(file_type)
    return parser.qualified_version(options) if parser is not None else "none"


def _not_readable(rel_path: str) -> str:
    """Why a file's bytes were not parsed: its name may claim a type its content is not."""
    suffix = PurePosixPath(rel_path).suffix
    named = f", though it is named {suffix}" if suffix else ""
    return f"the content is not in a format Lorehouse reads{named}"


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
                _not_readable(document.rel_path),
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
        return failure(
            document,
            FailureReason.TOO_LARGE,
            "needed more memory than a parse may use (LOREHOUSE_PARSE_MEMORY_MB)",
        )
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
    limits: ParseLimits,
    on_outcome: Callable[[ParseOutcome], None],
    options: ParseOptions | None = None,
) -> None:
    """Parses every job in a pool of `limits.workers` processes; reports outcomes as they land.

    At most two files per worker are held in memory at once, so a large corpus streams.
    """
    workers = max(1, limits.workers)
    in_flight: dict[Future, RawDocument] = {}
    import_parser_libraries()  # before the workers fork, so they share them
    with (
        warnings.catch_warnings(),
        ProcessPool(
            max_workers=workers,
            max_tasks=200,
            initializer=_cap_memory,
            initargs=(limits.memory_mb,),
        ) as pool,
    ):
        # lancedb warns in each child forked from a process that loaded it, and Lance before
        # each fork: a fork taken while one of their operations is in flight could deadlock
        # the child. The workers only parse bytes and never touch LanceDB or Lance, and none
        # of their operations runs while the parse stage does (stages run one after another,
        # or each in its own process), so users are not shown either. Workers forked while
        # these filters are set inherit them.
        warnings.filterwarnings(
            "ignore", message="lancedb fork support is experimental", category=RuntimeWarning
        )
        warnings.filterwarnings("ignore", message="lance is not fork-safe", category=UserWarning)
        for job in jobs:
            early = _precheck(job, limits.max_file_bytes)
            if isinstance(early, DocumentFailure):
                on_outcome(early)
                continue
            future = pool.schedule(
                parse_document,
                args=(early, job.document, options),
                timeout=limits.timeout_for(len(early)),
            )
            in_flight[future] = job.document
            while len(in_flight) >= 2 * workers:
                _drain(in_flight, on_outcome, limits)
        while in_flight:
            _drain(in_flight, on_outcome, limits)


def _cap_memory(memory_mb: int | None) -> None:
    """Runs in each new worker: allocations past the ceiling fail inside the parser.

    The parsers are imported first, so the ceiling is measured from a worker that has
    already mapped its libraries and models (PyMuPDF loads an ONNX layout model on import).
    Python turns a refused allocation into MemoryError (recorded as too_large); a native
    library that aborts instead kills only this worker, which the pool reports.
    """
    if memory_mb is None:
        return
    import_parser_libraries()
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    ceiling = psutil.Process().memory_info().vms + memory_mb * 1024 * 1024
    if hard != resource.RLIM_INFINITY:
        ceiling = min(ceiling, hard)
    resource.setrlimit(resource.RLIMIT_AS, (ceiling, hard))


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
    if hashlib.sha256(data).hexdigest() != document.content_sha256:
        # The inventory worked out who may read these bytes' predecessor; what the source
        # holds now is parsed once the next inventory has hashed and labelled it.
        return failure(
            document,
            FailureReason.CHANGED,
            "the file changed after it was listed; the next run reads the new version",
        )
    return data


def _drain(
    in_flight: dict[Future, RawDocument],
    on_outcome: Callable[[ParseOutcome], None],
    limits: ParseLimits,
) -> None:
    done, _ = wait(list(in_flight), return_when=FIRST_COMPLETED)
    for future in done:
        document = in_flight.pop(future)
        on_outcome(_result(future, document, limits))


def _result(future: Future, document: RawDocument, limits: ParseLimits) -> ParseOutcome:
    try:
        return future.result()
    except FutureTimeout:
        return failure(
            document,
            FailureReason.TIMEOUT,
            f"parsing took longer than {limits.timeout_for(document.size_bytes):.0f} s",
        )
    except ProcessExpired as error:
        return failure(
            document,
            FailureReason.CORRUPT,
            f"the parser process died (exit code {error.exitcode}); likely a crash in a native "
            f"library or the {limits.memory_mb} MB memory ceiling",
        )
    except Exception as error:  # noqa: BLE001 - e.g. an outcome that could not be pickled
        return failure(document, FailureReason.CORRUPT, f"{type(error).__name__}: {error}")
