"""Where each index partition stands in the Dagster instance: published, queued, running,
failed (and why) or stalled, and since when. `lorehouse partitions` prints it, and
changed_partitions_sensor says it for the partitions its merge waits on.

Dagster's UI shows runs and materializations, but not which of them a partition is waiting
on: a queued run looks the same whether it waits for a free slot or for a daemon that is not
running, and a run whose pod died keeps saying "started". Here each partition's runs are read
against the run queue's own limits, so "waiting behind another run" and "stalled" differ.
"""

from __future__ import annotations

import re
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

import dagster as dg

from lorehouse.stores.partitions import bucket_of_key
from pipelines.jobs import INDEX_JOB, LAST_PARTITIONED_ASSET, PARTITIONED_ASSETS

if TYPE_CHECKING:
    from dagster._utils.error import SerializableErrorInfo

State = Literal["published", "queued", "running", "failed", "stalled", "never built"]

#: The tags Dagster gives a run of one partition, and a run of a range of them.
PARTITION_TAG = "dagster/partition"
RANGE_START_TAG = "dagster/asset_partition_range_start"
RANGE_END_TAG = "dagster/asset_partition_range_end"
#: The tag the run queue orders queued runs by, higher first, then oldest first.
PRIORITY_TAG = "dagster/priority"
#: Runs that hold a slot of the run queue's limits, as the queue's daemon counts them.
ACTIVE = (dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.CANCELING)
FINISHED = (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)
#: Finished index_job runs read, newest first: each covers a range of partitions, and older
#: ones than this are older than the builds they could have replaced.
RANGE_RUNS_READ = 100
#: A failure reason is one line of at most this many characters; the UI has the rest.
REASON_CHARS = 200
#: The wait of a queued run that only the instance's max_concurrent_runs holds back.
MAX_RUNS = "max_concurrent_runs"
#: Characters of a run id shown, as the Dagster UI shows them.
SHORT_RUN_ID = 8


@dataclass(frozen=True)
class PartitionState:
    """One partition: its state, since when (seconds since the epoch, UTC), the run that
    state is about, what a person should know about it, and when it was last published
    whatever it is doing now."""

    partition: str
    state: State
    since: float | None
    run_id: str | None
    detail: str = ""
    #: The runs a queued partition's run waits behind, by id: those holding its limit.
    waiting_behind: tuple[str, ...] = ()
    published_at: float | None = None

    def summary(self) -> str:
        """`p03 failed: chunks: ValueError: ...`, one line for a message that lists several."""
        return f"{self.partition} {self.state}" + (f": {self.detail}" if self.detail else "")

    def as_json(self) -> dict[str, Any]:
        return {
            "partition": self.partition,
            "state": self.state,
            "since": _iso(self.since),
            "run_id": self.run_id,
            "detail": self.detail,
            "waiting_behind": list(self.waiting_behind),
            "published_at": _iso(self.published_at),
        }


def partition_states(
    instance: dg.DagsterInstance,
    keys: Sequence[str],
    stall_seconds: float,
    now: float | None = None,
) -> list[PartitionState]:
    """The state of each partition of `keys`, in that order.

    A run is the partition's when it carries the partition's `dagster/partition` tag (a
    partitions_job run, a UI backfill's run) or a partition range that holds it (index_job,
    `lorehouse materialize`), and its selection includes a per-document stage. Then:

    - running: a run of the partition has started (or is starting, or being canceled) and
      logged an event within `stall_seconds`;
    - stalled: that run has logged nothing for longer than `stall_seconds` (the stages log
      progress every few seconds, so its process is gone or hangs); or the partition's first
      queued run has had nothing ahead of it in the run queue for longer than that, counted
      from when it was queued or the queue last started or finished a run, whichever is later
      (the daemon that dequeues runs is not doing so); or a run was created and never
      submitted for that long;
    - queued: its first queued run waits, behind the runs named in `waiting_behind` (those
      holding the run queue limit that blocks it, such as another run of the same partition
      or the `lorehouse/writes=partition` slots, or the runs ahead of it in the queue that
      will take the free ones), or is next to start;
    - published: `chunk_embeddings` (the last per-document stage) was materialized for it
      after its last finished run started, `since` the materialization;
    - failed: its last finished run failed or was canceled before publishing it; the detail
      is the failed step and the first line of its error, `since` the run's end;
    - never built: no run and no materialization.

    Finished range runs are read from index_job's newest `RANGE_RUNS_READ` that ended after
    the oldest publication; another job's range run shows through what it materialized.
    """
    now = time.time() if now is None else now
    unfinished = [
        _Run(record)
        for record in instance.get_run_records(
            dg.RunsFilter(
                statuses=[*ACTIVE, dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED]
            )
        )
    ]
    published = {key: _latest_publication(instance, key) for key in keys}
    never = any(record is None for record in published.values())
    oldest = min((r.timestamp for r in published.values() if r is not None), default=None)
    ranges = [
        _Run(record)
        for record in instance.get_run_records(
            dg.RunsFilter(
                job_name=INDEX_JOB,
                statuses=list(FINISHED),
                # A run that ended before the oldest publication replaced none of them.
                updated_after=None if never or oldest is None else _utc(oldest),
            ),
            limit=RANGE_RUNS_READ,
        )
    ]
    reader = _Reader(instance, unfinished, stall_seconds, now)
    states = []
    for key in keys:
        (own,) = instance.get_run_records(
            dg.RunsFilter(tags={PARTITION_TAG: key}, statuses=list(FINISHED)), limit=1
        ) or [None]
        finished = [run for run in ranges if run.covers(key)]
        if own is not None:
            finished.append(_Run(own))
        last = max(finished, key=lambda run: run.created, default=None)
        states.append(reader.state(key, published[key], last))
    return states


class _Run:
    """A run record with what this module asks of it."""

    def __init__(self, record: dg.RunRecord) -> None:
        self.record = record
        run: dg.DagsterRun = record.dagster_run
        self.run_id = run.run_id
        self.job_name = run.job_name
        self.status = run.status
        self.tags: Mapping[str, str] = run.tags
        self.storage_id: int = record.storage_id
        self.created = record.create_timestamp.timestamp()
        self.updated = record.update_timestamp.timestamp()
        self.started: float | None = record.start_time
        self.ended: float | None = record.end_time
        self._selection = run.asset_selection

    def covers(self, key: str) -> bool:
        """Whether this run builds partition `key`'s per-document stages."""
        if self._selection is not None and not self._selection & set(PARTITIONED_ASSETS):
            return False
        if PARTITION_TAG in self.tags:
            return self.tags[PARTITION_TAG] == key
        start, end = self.tags.get(RANGE_START_TAG), self.tags.get(RANGE_END_TAG)
        if start is None or end is None:
            return False
        try:
            return bucket_of_key(start) <= bucket_of_key(key) <= bucket_of_key(end)
        except ValueError:  # a range of some other partitioning
            return False

    def what(self) -> str:
        """`p03`, `p00...p15` or the job's name: what a person knows the run by."""
        if PARTITION_TAG in self.tags:
            return self.tags[PARTITION_TAG]
        if RANGE_START_TAG in self.tags and RANGE_END_TAG in self.tags:
            return f"{self.job_name} {self.tags[RANGE_START_TAG]}...{self.tags[RANGE_END_TAG]}"
        return self.job_name

    @property
    def short(self) -> str:
        return self.run_id[:SHORT_RUN_ID]


@dataclass(frozen=True)
class _Wait:
    """Why a queued run has not started: the limit it waits on and the runs holding it, or
    none when it is next to start."""

    limit: str | None = None
    behind: tuple[_Run, ...] = ()


class _Reader:
    """The run queue as its daemon sees it, read once, and each partition's state from it."""

    def __init__(
        self,
        instance: dg.DagsterInstance,
        unfinished: list[_Run],
        stall_seconds: float,
        now: float,
    ) -> None:
        self._instance = instance
        self._stall = stall_seconds
        self._now = now
        self._active = [run for run in unfinished if run.status in ACTIVE]
        self._not_started = [r for r in unfinished if r.status == dg.DagsterRunStatus.NOT_STARTED]
        queued = [run for run in unfinished if run.status == dg.DagsterRunStatus.QUEUED]
        # The daemon's order: priority first, then the order the runs were queued in.
        self._queued = sorted(queued, key=lambda run: (-_priority(run), run.storage_id))
        self._waits = _simulate_queue(instance, self._active, self._queued)
        self._last_events: dict[str, float] = {}
        self._queue_moved: float | None = None

    def state(
        self, key: str, publication: dg.EventLogRecord | None, last: _Run | None
    ) -> PartitionState:
        published_at = publication.timestamp if publication is not None else None
        active = [run for run in self._active if run.covers(key)]
        pending = [run for run in self._queued if run.covers(key)]
        if active:
            return self._running(
                key, max(active, key=lambda run: run.created), pending, published_at
            )
        if pending:
            return self._waiting(key, pending, published_at)
        created = [run for run in self._not_started if run.covers(key)]
        run = max(created, key=lambda run: run.created, default=None)
        if run is not None and (last is None or run.created > last.created):
            if self._now - run.created > self._stall:
                return PartitionState(
                    key,
                    "stalled",
                    run.created,
                    run.run_id,
                    f"run {run.short} was created {duration_text(self._now - run.created)} "
                    "ago and never submitted to the run queue; delete it and launch again",
                    published_at=published_at,
                )
            return PartitionState(
                key, "queued", run.created, run.run_id, "being submitted", published_at=published_at
            )
        # Published by the last run, or by an older one when the last ended well without
        # building the last stage (a selection of the earlier ones).
        if publication is not None and (
            last is None
            or publication.timestamp >= _began(last)
            or last.status == dg.DagsterRunStatus.SUCCESS
        ):
            return PartitionState(
                key,
                "published",
                publication.timestamp,
                publication.run_id,
                published_at=published_at,
            )
        if last is None:
            return PartitionState(key, "never built", None, None)
        if last.status == dg.DagsterRunStatus.SUCCESS:
            return PartitionState(
                key,
                "never built",
                None,
                last.run_id,
                f"run {last.short} built only the stages before "
                f"{LAST_PARTITIONED_ASSET.to_user_string()}",
            )
        return PartitionState(
            key,
            "failed",
            last.ended or last.updated,
            last.run_id,
            failure_reason(self._instance, last.record),
            published_at=published_at,
        )

    def _running(
        self, key: str, run: _Run, pending: list[_Run], published_at: float | None
    ) -> PartitionState:
        last_event = self._last_event(run)
        behind = f"; run {pending[0].short} is queued behind it" if pending else ""
        quiet = self._now - last_event
        if quiet > self._stall:
            return PartitionState(
                key,
                "stalled",
                last_event,
                run.run_id,
                f"no event for {duration_text(quiet)} (the limit is "
                f"{duration_text(self._stall)}): its process may be gone; terminate the run "
                f"and launch the partition again{behind}",
                published_at=published_at,
            )
        doing = run.job_name if PARTITION_TAG in run.tags else run.what()
        if run.status == dg.DagsterRunStatus.CANCELING:
            doing = f"{doing}, being canceled"
        return PartitionState(
            key,
            "running",
            run.started or run.created,
            run.run_id,
            f"{doing}, last event {duration_text(quiet)} ago{behind}",
            published_at=published_at,
        )

    def _waiting(self, key: str, pending: list[_Run], published_at: float | None) -> PartitionState:
        run = pending[0]
        more = f"; {len(pending) - 1} more queued" if len(pending) > 1 else ""
        wait = self._waits.get(run.run_id, _Wait())
        if wait.limit is not None:
            return PartitionState(
                key,
                "queued",
                run.created,
                run.run_id,
                f"waiting {self._behind(wait)}{more}",
                tuple(holder.run_id for holder in wait.behind),
                published_at,
            )
        free_since = max(run.created, self._last_queue_move())
        if self._now - free_since > self._stall:
            return PartitionState(
                key,
                "stalled",
                free_since,
                run.run_id,
                f"nothing is ahead of it in the run queue, yet it has not started for "
                f"{duration_text(self._now - free_since)}: is the Dagster daemon running "
                "(`dagster dev` starts one) and the code location loaded?",
                published_at=published_at,
            )
        return PartitionState(
            key,
            "queued",
            run.created,
            run.run_id,
            f"next to start{more}",
            published_at=published_at,
        )

    def _behind(self, wait: _Wait) -> str:
        """`for a lorehouse/writes=partition slot (2 taken): 1a2b3c4d (p01, running), ...`:
        the limit and the runs holding it, each with what it is doing."""
        holders = ", ".join(
            f"{run.short} ({run.what()}, {self._doing(run)})" for run in wait.behind
        )
        if wait.limit == MAX_RUNS:
            return f"for one of the {len(wait.behind)} runs the instance runs at once: {holders}"
        return f"for a {wait.limit} slot ({len(wait.behind)} taken): {holders}"

    def _doing(self, run: _Run) -> str:
        if run.status == dg.DagsterRunStatus.QUEUED:
            return "queued ahead"
        quiet = self._now - self._last_event(run)
        return f"stalled {duration_text(quiet)}" if quiet > self._stall else "running"

    def _last_event(self, run: _Run) -> float:
        """When the run last logged anything; its last status change when it logged nothing."""
        if run.run_id not in self._last_events:
            records = self._instance.get_records_for_run(run.run_id, limit=1, ascending=False)
            self._last_events[run.run_id] = (
                records.records[0].event_log_entry.timestamp if records.records else run.updated
            )
        return self._last_events[run.run_id]

    def _last_queue_move(self) -> float:
        """When the queue last started or finished a run: a free slot the daemon takes within
        seconds, so a run with nothing ahead waits only that long."""
        if self._queue_moved is None:
            moved = self._instance.get_run_records(
                dg.RunsFilter(statuses=[*ACTIVE, *FINISHED]), limit=1, order_by="update_timestamp"
            )
            self._queue_moved = moved[0].update_timestamp.timestamp() if moved else 0.0
        return self._queue_moved


@dataclass(frozen=True)
class _Limit:
    """One of the run queue's tag concurrency limits (pipelines/dagster.yaml)."""

    key: str
    value: str | None
    per_value: bool
    limit: int

    @classmethod
    def read(cls, config: Mapping[str, Any]) -> _Limit:
        value = config.get("value")
        if isinstance(value, str):
            return cls(config["key"], value, False, config["limit"])
        per_value = bool(value and value.get("applyLimitPerUniqueValue"))
        return cls(config["key"], None, per_value, config["limit"])

    def slot(self, run: _Run) -> str | None:
        """The slot of this limit `run` takes (`key=value`, or `key` for the whole key), or
        None when the limit is not about it."""
        if self.key not in run.tags:
            return None
        if self.per_value:
            return f"{self.key}={run.tags[self.key]}"
        if self.value is None:
            return self.key
        return f"{self.key}={self.value}" if run.tags[self.key] == self.value else None


def _simulate_queue(
    instance: dg.DagsterInstance, active: list[_Run], queued: list[_Run]
) -> dict[str, _Wait]:
    """Each queued run's wait, found as the queue's daemon decides: runs in priority order,
    each started unless a limit it falls under is full, the runs started before it counted."""
    config = instance.get_concurrency_config().run_queue_config
    if config is None:  # no run queue: runs start when they are launched
        return {}
    limits = [_Limit.read(limit) for limit in config.tag_concurrency_limits or []]
    holders: dict[str, list[_Run]] = defaultdict(list)
    started = list(active)
    for run in active:
        for limit in limits:
            if (slot := limit.slot(run)) is not None:
                holders[slot].append(run)
    waits: dict[str, _Wait] = {}
    for run in queued:
        full = [
            slot
            for limit in limits
            if (slot := limit.slot(run)) is not None and len(holders[slot]) >= limit.limit
        ]
        if full:
            waits[run.run_id] = _Wait(full[0], tuple(holders[full[0]]))
            continue
        if 0 <= config.max_concurrent_runs <= len(started):
            waits[run.run_id] = _Wait(MAX_RUNS, tuple(started))
            continue
        waits[run.run_id] = _Wait()
        started.append(run)
        for limit in limits:
            if (slot := limit.slot(run)) is not None:
                holders[slot].append(run)
    return waits


def failure_reason(instance: dg.DagsterInstance, record: dg.RunRecord) -> str:
    """Why a finished run did not publish: `step: ErrorType: first line of the message` from
    its first failed step, else the run's own failure message, else that it was canceled."""
    run: dg.DagsterRun = record.dagster_run
    events = instance.get_records_for_run(
        run.run_id, of_type={dg.DagsterEventType.STEP_FAILURE, dg.DagsterEventType.RUN_FAILURE}
    ).records
    failures = [event.event_log_entry.dagster_event for event in events]
    for event in failures:
        if event is not None and event.is_step_failure and event.step_failure_data.error:
            return _short(f"{event.step_key}: {_raised(event.step_failure_data.error)}")
    if run.status == dg.DagsterRunStatus.CANCELED:
        return "canceled before it finished"
    for event in failures:
        if event is not None and event.event_type == dg.DagsterEventType.RUN_FAILURE:
            error = getattr(event.event_specific_data, "error", None)
            return _short(_raised(error) if error is not None else event.message or "")
    return "the run failed"


def _raised(error: SerializableErrorInfo) -> str:
    """The error the stage raised, without Dagster's wrappers around it: its type's name and
    message (a `dg.Failure` says it all in its message)."""
    while error.cause is not None and error.cls_name.startswith("Dagster"):
        error = error.cause
    message = error.message.strip()
    # Dagster's message repeats the qualified type name: "lorehouse.errors.SourceError: ...".
    _, qualified, rest = message.partition(f"{error.cls_name}: ")
    text = rest if qualified else message
    return text if error.cls_name == "Failure" else f"{error.cls_name}: {text}"


def _short(text: str) -> str:
    """The first line, folders of any path cut to the file's name: a long temporary or
    mounted path would otherwise push the reason itself past the cut."""
    line = text.strip().splitlines()[0] if text.strip() else "the run failed"
    line = _FOLDERS.sub("", line)
    return line if len(line) <= REASON_CHARS else line[: REASON_CHARS - 3] + "..."


#: The folders of an absolute path in an error message (`/tmp/x/p01.duckdb` -> `p01.duckdb`).
_FOLDERS = re.compile(r"(?<![\w.:/])(?:/[^/\s\"']+)+/(?=[^/\s\"']+)")


def _latest_publication(instance: dg.DagsterInstance, key: str) -> dg.EventLogRecord | None:
    """The partition's last materialization of the last per-document stage, or None."""
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=LAST_PARTITIONED_ASSET, asset_partitions=[key]), limit=1
    ).records
    return records[0] if records else None


def _began(run: _Run) -> float:
    return run.started if run.started is not None else run.created


def _priority(run: _Run) -> int:
    try:
        return int(run.tags.get(PRIORITY_TAG, "0"))
    except ValueError:
        return 0


def _utc(timestamp: float) -> datetime:
    return datetime.fromtimestamp(timestamp, tz=UTC)


def _iso(timestamp: float | None) -> str | None:
    return _utc(timestamp).isoformat(timespec="seconds") if timestamp is not None else None


def duration_text(seconds: float) -> str:
    """`40 s`, `12 min`, `3 h 5 min` or `2 d 4 h`: how long, as a person says it."""
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, hours = seconds // 60, seconds // 3600
    if hours < 1:
        return f"{minutes} min"
    if hours < 48:
        return f"{hours} h {minutes % 60} min" if minutes % 60 else f"{hours} h"
    return f"{hours // 24} d {hours % 24} h" if hours % 24 else f"{hours // 24} d"
