"""What assets put on their Dagster pages: progress log lines and Markdown tables."""

from __future__ import annotations

import time

import dagster as dg

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


def markdown_table(header: list[str], rows: list[list[object]]) -> str:
    """A small Markdown table for asset metadata; a cell's line breaks would end its row."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _cell(value: object) -> str:
    return " ".join(str(value).split()).replace("|", "\\|")
