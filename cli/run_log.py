"""How a run of `lorehouse materialize` reads on the terminal: the stages' own log lines as
they come, and each failed step as one line once the run is over.

Dagster's console logger writes a failed step's whole stack, and then a line for every step
after it that did not run: the one line naming the cause was buried in a hundred. Here the
stages log as before, the failure events are left out, and `failure_lines` says which step
failed and why; `lorehouse --debug materialize` keeps Dagster's own logger, stacks and all.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import dagster as dg

if TYPE_CHECKING:
    from collections.abc import Iterable

    from dagster._core.events import DagsterEvent
    from dagster._utils.error import SerializableErrorInfo

#: Dagster's events whose log lines the run's summary replaces.
SUMMARISED_EVENTS = frozenset({dg.DagsterEventType.STEP_FAILURE, dg.DagsterEventType.RUN_FAILURE})
#: How Dagster words the line it logs for each step that did not run after a failure.
NOT_RUN_LINE = "Dependencies for step "


class WithoutFailureDumps(logging.Filter):
    """Leaves out the records of failed steps and runs, and those of the steps they kept
    from running; every other record passes as it is."""

    def filter(self, record: logging.LogRecord) -> bool:
        meta = getattr(record, "dagster_meta", None) or {}
        event = meta.get("dagster_event")
        if event is not None:
            return event.event_type not in SUMMARISED_EVENTS
        return not str(meta.get("orig_message", "")).startswith(NOT_RUN_LINE)


@dg.logger(
    config_schema={
        "log_level": dg.Field(str, is_required=False, default_value="INFO"),
        "name": dg.Field(str, is_required=False, default_value="dagster"),
    },
    description="Dagster's console logger without the failed steps' stacks.",
)
def terminal_logger(init_context: dg.InitLoggerContext) -> logging.Logger:
    logger = dg.colored_console_logger.logger_fn(init_context)  # type: ignore[attr-defined]
    logger.addFilter(WithoutFailureDumps())
    for handler in logger.handlers:
        handler.setFormatter(ShortLines())
    return logger


class ShortLines(logging.Formatter):
    """`22:19:47 chunks - chunked: 10/10 (100%)`: the time, the step and its message.

    Dagster's console line also carries the date, the logger, the level, the job and the
    run's id, the same on every line of one `materialize`, which pushed the message past the
    terminal's edge; the run's id is printed once, when the run ends, and the whole line is
    kept under `--debug`.
    """

    def format(self, record: logging.LogRecord) -> str:
        meta = getattr(record, "dagster_meta", None) or {}
        message = str(meta.get("orig_message") or record.getMessage())
        step = meta.get("step_key")
        level = "" if record.levelno < logging.WARNING else f"{record.levelname}: "
        where = f"{step} - " if step else ""
        return f"{self.formatTime(record, '%H:%M:%S')} {where}{level}{message}"


def failure_lines(result: dg.ExecuteInProcessResult, instance: dg.DagsterInstance) -> list[str]:
    """One line per failed step, naming it and the error that stopped it, then the assets
    the run was to materialize that it did not."""
    failed = [event for event in result.get_step_failure_events() if event.step_failure_data]
    lines = [
        f"{event.step_key} failed: {_cause(event.step_failure_data.error)}"
        for event in failed
        if event.step_failure_data.error is not None
    ]
    if not lines and (run_failure := result.get_run_failure_event()) is not None:
        lines.append(run_failure.message or "the run failed")
    planned = instance.get_records_for_run(
        result.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED
    ).records
    left = sorted(
        _names(record.event_log_entry.get_dagster_event() for record in planned)
        - _names(result.get_asset_materialization_events())
        - {event.step_key for event in failed}
    )
    if left:
        lines.append(f"Not materialized, as they come after it: {', '.join(left)}.")
    return lines


def _names(events: Iterable[DagsterEvent]) -> set[str]:
    """The assets `events` are about, by name."""
    return {event.asset_key.to_user_string() for event in events if event.asset_key}


def _cause(error: SerializableErrorInfo) -> str:
    """The error a step raised, without Dagster's wrapper: its type's name and message."""
    while error.cause is not None:
        error = error.cause
    message = error.message.strip()
    # Dagster's message repeats the qualified type name: "lorehouse.errors.SourceError: ...".
    _, qualified, rest = message.partition(f"{error.cls_name}: ")
    text = rest if qualified else message
    if error.cls_name == "Failure":  # raised on purpose: its description says it all
        return text
    return f"{error.cls_name}: {text}"
