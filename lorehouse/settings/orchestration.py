"""Settings: Orchestration.

Where the stores live and how Dagster builds them: partitions, executors, schedules,
sensors and when a run counts as stalled.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field, field_validator

from lorehouse.settings.machine import (
    default_data_dir,
)


class OrchestrationSettings(BaseModel):
    """Where the stores live and how Dagster builds them."""

    #: The heading the configuration page lists these settings under.
    heading: ClassVar[str] = "Orchestration"

    data_dir: Path = Field(
        default_factory=lambda: default_data_dir(),
        description=(
            "Where the DuckDB database and the LanceDB tables live. Unset: the nearest "
            "`.lorehouse` folder in the working directory or above it (a project's), else "
            "`lorehouse` in the user's data folder ($XDG_DATA_HOME or ~/.local/share)."
        ),
    )
    index_partitions: int = Field(
        default=16,
        ge=1,
        le=256,
        description=(
            "Hash buckets of the documents that parse, chunk and enrich as Dagster "
            "partitions: each owns its own store file, so buckets run side by side in "
            "separate processes or pods. Changing it reruns every partition, each taking its "
            "documents' rows and vectors from the shared stores: nothing is parsed or "
            "embedded again."
        ),
    )
    partitions_uri: str | None = Field(
        default=None,
        description=(
            "An s3:// prefix the partitions' files are kept under, for partition runs on "
            "pods that share no volume: each step pulls its partition's DuckDB file and "
            "pushes it back, and the partitions' LanceDB folders live there. Unset: they stay "
            "under data_dir/partitions (one machine, or a ReadWriteMany volume)."
        ),
    )
    writer_run_k8s_config: dict[str, Any] | None = Field(
        default=None,
        description=(
            "The `dagster-k8s/config` of the runs that write the shared stores (index_job, "
            "inventory_job, publish_job, merge_job), as JSON: with partitions_uri set, the "
            "run launcher's own config leaves the feature-store volume out, so partition runs "
            "schedule on any node (and publish through publish_job), and this mounts it (and "
            "pins the node) for the writer runs alone."
        ),
    )
    index_batch_documents: int = Field(
        default=500,
        ge=1,
        description=(
            "Documents the enrichment and embedding stages read, compare and write at a "
            "time: a run's memory depends on this, not on the corpus size."
        ),
    )
    dagster_executor: Literal["in_process", "multiprocess"] = Field(
        default="in_process",
        description=(
            "How Dagster runs the steps of a run launched by the daemon, the UI or `dagster job "
            "execute`: in one process (stages are sequential and parsing has its own pool), or "
            "one process per step, up to `workers` at a time, which is how the steps spread "
            "over pods or workers in a cluster. `lorehouse materialize` always runs in process."
        ),
    )
    reindex_cron: str = Field(
        default="0 2 * * *", description="When the nightly reindex schedule runs."
    )
    index_max_age_hours: float = Field(
        default=26.0,
        gt=0,
        description=(
            "A stage that has not succeeded for this long is flagged stale in the Dagster UI "
            "(the nightly interval plus slack)."
        ),
    )
    source_poll_seconds: int = Field(
        default=60,
        ge=5,
        description="How often the sensors look for work: the change sensor lists the source "
        "for added, changed or removed files, and the partitions sensor carries an inventory "
        "run on to its partitions' runs and the merge.",
    )
    partition_stall_seconds: int = Field(
        default=1800,
        ge=60,
        description="How long a partition run may go without a log event, or a queued one "
        "wait with nothing ahead of it in the run queue, before `lorehouse partitions` and the "
        "partitions sensor call it stalled rather than running or waiting: the stages log "
        "progress every few seconds, so a run this quiet has lost its process or hangs on a "
        "call, and a queued run with a free slot this long waits on a daemon that is not "
        "dequeuing.",
    )

    @field_validator("partitions_uri")
    @classmethod
    def _partitions_uri_in_a_bucket(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        value = value.strip()
        if not value.startswith("s3://") or len(value) <= len("s3://"):
            raise ValueError(
                "LOREHOUSE_PARTITIONS_URI must be an s3:// bucket prefix "
                "(partitions on a shared volume need no setting: they stay under data_dir)"
            )
        return value
