"""The parse stage: Markdown for every document whose bytes or parser version changed.

Results are written in batches as they complete, so an interrupted run keeps what it
finished and the next one resumes from there.
"""

from __future__ import annotations

import functools
import heapq
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import pyarrow as pa

from lorehouse.models import DocumentFailure, FileType, ParsedDocument, RawDocument
from lorehouse.parsing.registry import ParseOptions
from lorehouse.parsing.runner import (
    ParseJob,
    ParseLimits,
    parse_many,
    parser_version_of,
)
from lorehouse.sources.base import DocumentSource
from lorehouse.stages.progress import ProgressCallback
from lorehouse.stores.duckdb_store import DuckDBStore


@dataclass
class ParseReport:
    """What the parse stage did, for asset metadata and the CLI summary.

    Counts and a few examples, never the parsed documents themselves: a first build of a
    large corpus parses every document in one run.
    """

    parsed: int = 0
    #: The failures of this run, up to `FAILURES_KEPT` (every one is in `documents_failed`).
    failed: list[DocumentFailure] = field(default_factory=list)
    failed_by_reason: Counter[str] = field(default_factory=Counter)
    parsed_by_type: Counter[str] = field(default_factory=Counter)
    pages: int = 0
    #: The slowest parses of this run, slowest first: (ms, path, page spans).
    slowest: list[tuple[float, str, int]] = field(default_factory=list)
    skipped: int = 0
    seconds: float = 0.0

    def add_parsed(self, document: ParsedDocument, rel_path: str, file_type: str) -> None:
        self.parsed += 1
        self.parsed_by_type[file_type] += 1
        self.pages += len({span.page for span in document.page_map})
        entry = (document.parse_ms, rel_path, len(document.page_map))
        if len(self.slowest) < SLOWEST_KEPT:
            heapq.heappush(self.slowest, entry)
        else:
            heapq.heappushpop(self.slowest, entry)

    def add_failed(self, failure: DocumentFailure) -> None:
        self.failed_by_reason[failure.reason.value] += 1
        if len(self.failed) < FAILURES_KEPT:
            self.failed.append(failure)

    def absorb(self, other: ParseReport) -> None:
        """Adds another run's counts (another partition's), as one report of both."""
        self.parsed += other.parsed
        self.failed.extend(other.failed[: FAILURES_KEPT - len(self.failed)])
        self.failed_by_reason.update(other.failed_by_reason)
        self.parsed_by_type.update(other.parsed_by_type)
        self.pages += other.pages
        self.slowest = heapq.nlargest(SLOWEST_KEPT, self.slowest + other.slowest)
        heapq.heapify(self.slowest)
        self.skipped += other.skipped
        self.seconds += other.seconds

    @property
    def failed_count(self) -> int:
        return sum(self.failed_by_reason.values())

    def slowest_first(self) -> list[tuple[float, str, int]]:
        return sorted(self.slowest, reverse=True)


#: Failures and slow files a report keeps as examples.
FAILURES_KEPT = 1000
SLOWEST_KEPT = 10
#: Documents read from the inventory at a time.
PAGE_DOCUMENTS = 5000


@functools.cache
def parser_versions(options: ParseOptions) -> Mapping[str, str]:
    """file type -> the parser version a document of that type would be parsed with now.

    Cached: a version hashes its parser's code, which does not change within a process, and
    a run over many partitions asks once per partition."""
    return MappingProxyType(
        {file_type.value: parser_version_of(file_type, options) for file_type in FileType}
    )


def documents_to_parse(
    store: DuckDBStore, doc_ids: pa.Array, page: int = PAGE_DOCUMENTS
) -> Iterator[RawDocument]:
    """The documents `store.to_parse` found, by path, their inventory rows read a page at a
    time."""
    for start in range(0, len(doc_ids), page):
        yield from store.raw_documents_for(doc_ids[start : start + page].to_pylist())


def run_parse(
    source: DocumentSource,
    store: DuckDBStore,
    limits: ParseLimits,
    on_progress: ProgressCallback | None = None,
    batch_size: int = 50,
    options: ParseOptions | None = None,
) -> ParseReport:
    """Parses new and changed documents, writing results in batches as they complete.

    Writing in batches means an interrupted run keeps what it finished, and the next run
    resumes from there (finished documents match their fingerprint and are skipped). The
    documents to parse are read from the store a page at a time and only counts are kept,
    so the stage's memory does not grow with the corpus.
    """
    started = time.perf_counter()
    options = options or ParseOptions()
    versions = parser_versions(options)
    doc_ids = store.to_parse(versions)
    total = len(doc_ids)
    report = ParseReport(skipped=store.row_count("documents_raw") - total)
    in_flight: dict[str, RawDocument] = {}
    parsed_batch: list[ParsedDocument] = []
    failed_batch: list[DocumentFailure] = []
    failed_versions: dict[str, str] = {}

    def flush() -> None:
        store.write_parsed(parsed_batch)
        store.write_failures(failed_batch, failed_versions)
        parsed_batch.clear()
        failed_batch.clear()
        failed_versions.clear()

    def record(outcome: ParsedDocument | DocumentFailure) -> None:
        document = in_flight.pop(outcome.doc_id)
        if isinstance(outcome, ParsedDocument):
            report.add_parsed(outcome, document.rel_path, document.file_type.value)
            parsed_batch.append(outcome)
        else:
            report.add_failed(outcome)
            failed_batch.append(outcome)
            failed_versions[outcome.doc_id] = versions[document.file_type.value]
        if len(parsed_batch) + len(failed_batch) >= batch_size:
            flush()
        if on_progress is not None:
            on_progress(report.parsed + report.failed_count, total)

    def jobs() -> Iterator[ParseJob]:
        for document in documents_to_parse(store, doc_ids):
            in_flight[document.doc_id] = document
            yield ParseJob(document=document, load=lambda d=document: source.read_bytes(d.rel_path))

    if total:  # a pool of parser processes is started only for work
        parse_many(jobs(), limits, on_outcome=record, options=options)
    flush()
    report.seconds = time.perf_counter() - started
    return report
