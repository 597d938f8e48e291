"""The sensors: the source change sensor starts an inventory run whenever files are added,
changed or removed, and the upload sensor whenever the upload folder changes; the
changed-partitions sensor carries each inventory run on to its partitions' runs (each of
which publishes its own rows), and the partitions done on to the whole index's checks and
evals."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import dagster as dg

from assets.resources import DocumentSourceResource
from lorehouse.settings import Settings, get_settings
from lorehouse.sources.base import DocumentSource
from lorehouse.sources.manifest import Manifest, take_manifest
from pipelines.jobs import (
    BUILT_ASSET,
    INVENTORY_ASSET,
    INVENTORY_JOB,
    LAST_PARTITIONED_ASSET,
    MERGE_JOB,
    PARTITIONED_ASSETS,
    PARTITIONS_JOB,
    PUBLISH_JOB,
    TRIGGER_TAG,
    publishes_in_partition_runs,
)
from pipelines.partition_state import PartitionState, partition_states


def source_change_sensor(settings: Settings) -> dg.SensorDefinition:
    """The sensor, polling as often as LOREHOUSE_SOURCE_POLL_SECONDS says; stopped until
    turned on in the UI (listing a large bucket has a cost)."""
    return _inventory_sensor(
        "source_change_sensor",
        settings,
        dg.DefaultSensorStatus.STOPPED,
        "Lists the source; requests inventory_job when a file is added, changed or removed.",
    )(evaluate_source_change)


def _inventory_sensor(
    name: str, settings: Settings, status: dg.DefaultSensorStatus, description: str
) -> Callable[[Callable[..., object]], dg.SensorDefinition]:
    """The decorator of a sensor that requests inventory_job, polling as often as
    LOREHOUSE_SOURCE_POLL_SECONDS says."""
    return dg.sensor(
        name=name,
        job_name=INVENTORY_JOB,
        minimum_interval_seconds=settings.source_poll_seconds,
        default_status=status,
        description=description,
    )


def evaluate_source_change(
    context: dg.SensorEvaluationContext, document_source: DocumentSourceResource
) -> dg.SensorResult | dg.SkipReason:
    """Cursor: the last manifest (path -> size, ETag or mtime, digest), compressed.

    The run key is the new manifest's fingerprint, so one state of the source is indexed
    once even if the sensor sees it twice before the cursor is saved.
    """
    return _run_for_changes(context, document_source.open(), "source_change")


def upload_sensor(
    settings: Settings, upload_source: Callable[[], DocumentSource]
) -> dg.SensorDefinition:
    """The sensor that takes chat page uploads in: it lists only the upload folder, so it
    runs by default and as often as the change sensor may, at a cost that follows the
    uploads rather than the corpus, and requests the same inventory run when a file is
    added or removed there."""

    def evaluate_uploads(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
        return _run_for_changes(context, upload_source(), "upload")

    return _inventory_sensor(
        "upload_sensor",
        settings,
        dg.DefaultSensorStatus.RUNNING,
        "Lists the upload folder; requests inventory_job when a file is uploaded or an "
        "upload deleted.",
    )(evaluate_uploads)


def _run_for_changes(
    context: dg.SensorEvaluationContext, source: DocumentSource, trigger: str
) -> dg.SensorResult | dg.SkipReason:
    """An inventory run request when `source` changed since the manifest in the cursor."""
    previous = Manifest.decode(context.cursor)
    current, changes = take_manifest(source, previous)
    cursor = current.encode()
    if not changes:
        if cursor != context.cursor:
            context.update_cursor(cursor)  # keeps refreshed change tokens of touched files
        return dg.SkipReason(
            f"no file added, changed or removed ({len(current.files)} files, "
            f"{changes.files_hashed} hashed)"
        )
    context.log.info(f"source changed: {changes.describe()}")
    return dg.SensorResult(
        run_requests=[
            dg.RunRequest(
                run_key=current.fingerprint(),
                tags={
                    TRIGGER_TAG: trigger,
                    "lorehouse/added": str(len(changes.added)),
                    "lorehouse/changed": str(len(changes.changed)),
                    "lorehouse/removed": str(len(changes.removed)),
                },
            )
        ],
        cursor=cursor,
    )


#: The tag under which Dagster records the code version a materialization was built with.
CODE_VERSION_TAG = "dagster/code_version"
#: Inventory materializations read per tick; older ones wait for the next tick.
_INVENTORIES_PER_TICK = 20


@dataclass
class ChainCursor:
    """Where changed_partitions_sensor stands: the last inventory materialization it handled,
    the partitions it launched runs for that are not published yet, each with the inventory
    materialization it was launched after, and the partitions published since the whole
    index was last checked.

    Each partition keeps its own mark: with one mark for all, a second inventory moved it
    past a partition that had finished in between and that the second did not name again,
    so that partition never counted as done.
    """

    seen: int | None = None
    pending: dict[str, int] = field(default_factory=dict)
    published: dict[str, int] = field(default_factory=dict)

    @classmethod
    def decode(cls, cursor: str | None) -> ChainCursor:
        if not cursor:
            return cls()
        saved = json.loads(cursor)
        pending = saved.get("pending") or {}
        if isinstance(pending, list):  # a cursor written before marks were per partition
            pending = dict.fromkeys(pending, saved.get("since") or 0)
        return cls(seen=saved.get("seen"), pending=pending, published=saved.get("published") or {})

    def encode(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    def reached(self, instance: dg.DagsterInstance, asset: dg.AssetKey) -> list[str]:
        """The pending partitions `asset` was materialized for since the inventory each was
        launched after; one read of the event log per distinct inventory."""
        found = []
        for since in sorted(set(self.pending.values())):
            done = instance.get_materialized_partitions(asset, after_cursor=since)
            found += [key for key, mark in self.pending.items() if mark == since and key in done]
        return sorted(found)

    def waiting(self, instance: dg.DagsterInstance) -> list[str]:
        """The pending partitions not published since the inventory each was launched after."""
        published = set(self.reached(instance, LAST_PARTITIONED_ASSET))
        return sorted(key for key in self.pending if key not in published)


def changed_partitions_sensor(
    settings: Settings,
    partitions: dg.UnresolvedAssetJobDefinition,
    publish: dg.UnresolvedAssetJobDefinition,
    merge: dg.UnresolvedAssetJobDefinition,
) -> dg.SensorDefinition:
    """After each inventory_job run, one partitions_job run per partition that changed, each
    publishing its own rows as it ends (or a publish_job run for it where partition pods
    cannot reach the shared stores); then merge_job, the whole index's checks and evals,
    once none of them is still queued or running. Running by default, since it only reads
    Dagster's own event log."""
    separate = not publishes_in_partition_runs(settings)
    return dg.sensor(
        name="changed_partitions_sensor",
        jobs=[partitions, publish, merge],
        minimum_interval_seconds=settings.source_poll_seconds,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="After inventory_job, runs each changed partition as its own "
        "partitions_job run, which publishes it to search as it ends; then merge_job, the "
        "whole index's checks and evals, once none is queued or running.",
    )(lambda context: evaluate_changed_partitions(context, separate_publish=separate))


def evaluate_changed_partitions(
    context: dg.SensorEvaluationContext, separate_publish: bool = False
) -> dg.SensorResult | dg.SkipReason:
    """The partitions to run are those the inventory named (their documents changed) and
    those whose last materialization was built by other code (a new parser or model).

    A partition is done once `published_partition` was materialized for it after that
    inventory (by the runs launched here, a retry from the UI or a full index_job run): its
    rows are searchable then, whatever the others' state. With `separate_publish`, a
    partition whose vectors are built but not published gets a publish_job run. merge_job
    (checks, evals, whatever no partition can publish alone) is requested once some
    partitions were published and none still pending is queued or running: a failed one
    delays neither the others' freshness nor the checks, and stays pending until its retry
    is done."""
    instance = context.instance
    cursor = ChainCursor.decode(context.cursor)
    requests: list[dg.RunRequest] = []
    stale: set[str] | None = None  # read once a tick, when an inventory run needs it
    found = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=INVENTORY_ASSET, after_storage_id=cursor.seen),
        limit=_INVENTORIES_PER_TICK,
        ascending=True,
    ).records
    for record in found:
        cursor.seen = record.storage_id
        run = instance.get_run_by_id(record.run_id)
        if run is None or run.job_name != INVENTORY_JOB:
            continue  # a full index run covers every partition and merges itself
        materialization = record.asset_materialization
        named = materialization.metadata.get("changed_partitions") if materialization else None
        if stale is None:
            stale = _built_by_other_code(context)
        keys = sorted({*(named.value if named else []), *stale})
        # Launched again even when pending: a run already done read the older slice.
        requests += [
            _chained(f"inventory-{record.storage_id}-{key}", PARTITIONS_JOB, key) for key in keys
        ]
        # A partition named again waits for its new run; the others keep their own mark.
        cursor.pending.update(dict.fromkeys(keys, record.storage_id))
    if requests:
        context.log.info(f"running partitions {', '.join(r.partition_key or '' for r in requests)}")
        return dg.SensorResult(run_requests=requests, cursor=cursor.encode())
    if not cursor.pending and not cursor.published:
        context.update_cursor(cursor.encode())
        return dg.SkipReason(
            "the last inventory run changed no partition"
            if found
            else "no inventory run since the last merge"
        )
    waiting = cursor.waiting(instance)
    published = sorted(set(cursor.pending) - set(waiting))
    if published:
        context.log.info(f"partitions {', '.join(published)} published")
    if separate_publish:
        built = [key for key in cursor.reached(instance, BUILT_ASSET) if key in waiting]
        requests += [
            _chained(f"publish-{cursor.pending[key]}-{key}", PUBLISH_JOB, key) for key in built
        ]
    cursor.published.update({key: cursor.pending[key] for key in published})
    cursor.pending = {key: cursor.pending[key] for key in waiting}
    states = (
        partition_states(instance, waiting, get_settings().partition_stall_seconds)
        if waiting
        else []
    )
    # A failed, stalled or never built partition does not hold the checks back; nor does one
    # whose launched run is gone (still published as before its inventory).
    in_flight = [state.partition for state in states if state.state in ("queued", "running")]
    if cursor.published and not in_flight and not requests:
        marks = f"{max(cursor.published.values())}-{'-'.join(sorted(cursor.published))}"
        requests.append(_chained(f"merge-{marks}", MERGE_JOB))
        context.log.info(f"checking the index after partitions {', '.join(cursor.published)}")
        cursor.published = {}
    if waiting:
        context.log.info(f"still waiting for partitions {_described(states)}")
    if requests:
        return dg.SensorResult(run_requests=requests, cursor=cursor.encode())
    context.update_cursor(cursor.encode())
    return dg.SkipReason(f"partitions not published yet: {_described(states)}")


def _chained(run_key: str, job_name: str, partition_key: str | None = None) -> dg.RunRequest:
    """A run the chain requests; its run key makes a request seen twice launch one run."""
    return dg.RunRequest(
        run_key=run_key,
        job_name=job_name,
        partition_key=partition_key,
        tags={TRIGGER_TAG: "changed_partitions"},
    )


def _described(states: list[PartitionState]) -> str:
    """The waiting partitions and each one's state, so a partition waiting its turn reads
    apart from a stalled one; one published before the inventory has no run since."""
    return (
        f"{', '.join(state.partition for state in states)}: "
        + "; ".join(
            f"{state.partition} not run since the inventory"
            if state.state == "published"
            else state.summary()
            for state in states
        )
        + " (retry a failed one from its partition page)"
    )


def _built_by_other_code(context: dg.SensorEvaluationContext) -> set[str]:
    """Partitions never materialized, or last materialized by a stage whose code version is
    not the deployment's: they rebuild even though no document changed."""
    repository = context.repository_def
    if repository is None:
        return set()
    stale: set[str] = set()
    for key in PARTITIONED_ASSETS:
        definition = repository.assets_defs_by_key[key]
        current = definition.code_versions_by_key.get(key)
        partitions = definition.partitions_def
        if partitions is None:
            continue
        for partition in partitions.get_partition_keys():
            (latest, *_) = context.instance.fetch_materializations(
                dg.AssetRecordsFilter(asset_key=key, asset_partitions=[partition]), limit=1
            ).records or [None]
            built = latest.asset_materialization if latest else None
            if built is None or (
                current is not None and built.tags.get(CODE_VERSION_TAG) != current
            ):
                stale.add(partition)
    return stale
