"""What assets put on their Dagster pages: progress log lines and Markdown tables."""

from __future__ import annotations

import time
from collections.abc import Mapping

import dagster as dg

from lorehouse.display import printable
from lorehouse.sources.connectors import SourceSync
from lorehouse.stages.progress import ProgressCallback


def progress_logger(
    context: dg.AssetExecutionContext, what: str, every_seconds: float = 5.0
) -> ProgressCallback:
    """A callback that logs `done/total` at most every few seconds, and always at the end."""
    last = [0.0]

    def report(done: int, total: int) -> None:
        now = time.monotonic()
        if done == total or now - last[0] >= every_seconds:
            last[0] = now
            percent = 100 * done / total if total else 100.0
            context.log.info(f"{what}: {done}/{total} ({percent:.0f}%)")

    return report


class PartitionProgress:
    """One progress display over the partitions a run covers, in documents.

    Each partition's stage reports its own work (documents, texts or answers) as it goes;
    this turns that into documents done of all the run's documents, each partition weighted
    by its share of the inventory, so a run over sixteen partitions reads as one count from
    0 to the corpus, logged at most every few seconds and once at the end.
    """

    def __init__(
        self,
        context: dg.AssetExecutionContext,
        what: str,
        documents: Mapping[str, int],
        every_seconds: float = 5.0,
    ) -> None:
        self._log = context.log
        self._what = what
        self._documents = documents
        self._total = sum(documents.values())
        self._every = every_seconds
        self._before = 0
        self._last = time.monotonic()
        self._started: list[str] = []

    def partition(self, key: str) -> ProgressCallback:
        """The callback for partition `key`'s stage; partitions are started one at a time."""
        self._before = sum(self._documents.get(k, 0) for k in self._started)
        self._started.append(key)
        size = self._documents.get(key, 0)

        def report(done: int, total: int) -> None:
            now = time.monotonic()
            if now - self._last >= self._every:
                self._last = now
                self._show(self._before + round(size * done / total if total else size))

        return report

    def finish(self) -> None:
        self._show(self._total)

    def _show(self, done: int) -> None:
        percent = 100 * done / self._total if self._total else 100.0
        self._log.info(
            f"{self._what}: {done}/{self._total} ({percent:.0f}%) "
            f"over {len(self._started)} of {len(self._documents)} partitions"
        )


def markdown_table(header: list[str], rows: list[list[object]]) -> str:
    """A small Markdown table for asset metadata; a cell's line breaks would end its row."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _cell(value: object) -> str:
    return " ".join(str(value).split()).replace("|", "\\|")


def sources_table(syncs: Mapping[str, SourceSync]) -> str:
    """Each connected source's sync in this run: what it did and when it last answered."""
    return markdown_table(
        ["source", "kind", "sync", "items", "changed", "deleted", "last answered", "error"],
        [
            [
                name,
                sync.kind,
                sync.outcome,
                sync.items,
                sync.changed,
                sync.deleted,
                sync.synced_at.isoformat(timespec="seconds") if sync.synced_at else "never",
                printable(sync.error or ""),
            ]
            for name, sync in sorted(syncs.items())
        ],
    )
