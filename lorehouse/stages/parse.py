"""The parse stage: Markdown for every document whose bytes or parser version changed.

Results are written in batches as they complete, so an interrupted run keeps what it
finished and the next one resumes from there.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

from lorehouse.models import DocumentFailure, ParsedDocument, RawDocument
from lorehouse.parsing.registry import ParseOptions
from lorehouse.parsing.runner import (
    PARSE_STAGE,
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
    """What the parse stage did, for asset metadata and the CLI summary."""

    parsed: list[ParsedDocument] = field(default_factory=list)
    failed: list[DocumentFailure] = field(default_factory=list)
    skipped: int = 0
    seconds: float = 0.0
    file_types: dict[str, str] = field(default_factory=dict)
    rel_paths: dict[str, str] = field(default_factory=dict)

    @property
    def parsed_by_type(self) -> Counter[str]:
        return Counter(self.file_types[d.doc_id] for d in self.parsed)

    @property
    def failed_by_reason(self) -> Counter[str]:
        return Counter(f.reason.value for f in self.failed)

    @property
    def pages(self) -> int:
        return sum(len({span.page for span in d.page_map}) for d in self.parsed)


def documents_to_parse(store: DuckDBStore, options: ParseOptions) -> tuple[list[RawDocument], int]:
    """Documents whose bytes or parser version changed since they were last parsed."""
    done = store.stage_fingerprints(PARSE_STAGE)
    pending: list[RawDocument] = []
    skipped = 0
    for document in store.raw_documents().values():
        fingerprint = (document.content_sha256, parser_version_of(document.file_type, options))
        if done.get(document.doc_id) == fingerprint:
            skipped += 1
        else:
            pending.append(document)
    return sorted(pending, key=lambda d: d.rel_path), skipped


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
    resumes from there (finished documents match their fingerprint and are skipped).
    """
    started = time.perf_counter()
    options = options or ParseOptions()
    pending, skipped = documents_to_parse(store, options)
    report = ParseReport(
        skipped=skipped,
        file_types={d.doc_id: d.file_type.value for d in pending},
        rel_paths={d.doc_id: d.rel_path for d in pending},
    )
    versions = {d.doc_id: parser_version_of(d.file_type, options) for d in pending}
    parsed_batch: list[ParsedDocument] = []
    failed_batch: list[DocumentFailure] = []

    def flush() -> None:
        store.write_parsed(parsed_batch)
        store.write_failures(failed_batch, versions)
        parsed_batch.clear()
        failed_batch.clear()

    def record(outcome: ParsedDocument | DocumentFailure) -> None:
        if isinstance(outcome, ParsedDocument):
            report.parsed.append(outcome)
            parsed_batch.append(outcome)
        else:
            report.failed.append(outcome)
            failed_batch.append(outcome)
        if len(parsed_batch) + len(failed_batch) >= batch_size:
            flush()
        if on_progress is not None:
            on_progress(len(report.parsed) + len(report.failed), len(pending))

    jobs = (ParseJob(document=d, load=lambda d=d: source.read_bytes(d.rel_path)) for d in pending)
    parse_many(jobs, limits, on_outcome=record, options=options)
    flush()
    report.seconds = time.perf_counter() - started
    return report
