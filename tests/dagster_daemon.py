"""Dagster's daemon, one tick at a time, in the test's process: each sensor evaluated as the
daemon evaluates it (with its cursor and the instance), and each run it requests executed
on that instance with the request's job, partition and tags, as the run launcher would.

Tests drive a deployment's own sensors this way, so what they request is what a deployment
runs; the eval assets are left out of the runs, as they score the sample corpus's golden
set and only cost time on any other corpus.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg

from lorehouse.api_keys import add_key
from lorehouse.settings import Settings
from pipelines.definitions import build_definitions


@dataclass
class SensorTicks:
    defs: dg.Definitions
    instance: dg.DagsterInstance
    cursors: dict[str, str | None] = field(default_factory=dict)
    #: (job, partition, tags) of every run executed, in order.
    launched: list[tuple[str, str | None, dict[str, str]]] = field(default_factory=list)

    def tick(self, sensor: str) -> list[dg.RunRequest]:
        """One evaluation of `sensor`; its cursor is kept for the next."""
        definition = self.defs.resolve_sensor_def(sensor)
        with dg.build_sensor_context(
            instance=self.instance,
            cursor=self.cursors.get(sensor),
            repository_def=self.defs.get_repository_def(),
            resources=self.defs.resources,
        ) as context:
            data = definition.evaluate_tick(context)
        self.cursors[sensor] = data.cursor or self.cursors.get(sensor)
        requests = data.run_requests or []
        if any(request.job_name is None for request in requests):
            job = definition.job_name  # a sensor of one job may leave it out of its requests
            requests = [request.with_replaced_attrs(job_name=job) for request in requests]
        return requests

    def run(self, job_name: str, **kwargs: object) -> dg.ExecuteInProcessResult:
        """A run of `job_name` without the eval assets; fails the test when the run fails."""
        job = self.defs.resolve_job_def(job_name)
        selected = [key for key in job.asset_layer.selected_asset_keys if "eval" not in key.path[0]]
        result = job.execute_in_process(
            instance=self.instance,
            asset_selection=selected,
            **kwargs,  # type: ignore[arg-type]
        )
        assert result.success, f"{job_name} failed"
        return result

    def settle(self, sensor: str, rounds: int = 8) -> list[tuple[str, str | None]]:
        """Ticks `sensor`, then changed_partitions_sensor until it requests nothing, running
        every request; returns the (job, partition) of the runs, in order."""
        start = len(self.launched)
        requests = self.tick(sensor)
        for _ in range(rounds):
            if not requests:
                break
            for request in requests:
                assert request.job_name is not None
                self.run(
                    request.job_name,
                    partition_key=request.partition_key,
                    tags=dict(request.tags),
                )
                self.launched.append((request.job_name, request.partition_key, dict(request.tags)))
            requests = self.tick("changed_partitions_sensor")
        else:
            raise AssertionError(f"the sensors still request runs after {rounds} rounds")
        return [(job, partition) for job, partition, _ in self.launched[start:]]


@dataclass
class UploadDeployment:
    """A deployment that takes uploads, indexed once: a folder of documents and an upload
    folder as two named sources, keys of a member of two groups, of an outsider and of a key
    without groups, and its sensors to tick."""

    settings: Settings
    keys: dict[str, str]
    ticks: SensorTicks

    def headers(self, who: str) -> dict[str, str]:
        return {"X-API-Key": self.keys[who]}


#: The documents every upload deployment starts with: one in English, one in German.
STARTING_DOCUMENTS = {
    "leave.md": "# Leave\n\nEveryone gets twenty days of paid leave a year.\n",
    "reisen.md": "# Dienstreisen\n\nHotelkosten werden bis 150 Euro pro Nacht erstattet. "
    "Die Reisekostenabrechnung reichen Sie innerhalb von 30 Tagen nach der Reise ein.\n",
}


@contextmanager
def upload_deployment(root: Path) -> Iterator[UploadDeployment]:
    """The deployment under `root`, built by one index_job run on an instance of its own."""
    (root / "docs").mkdir(parents=True)  # the upload folder is made by the first listing
    for name, text in STARTING_DOCUMENTS.items():
        (root / "docs" / name).write_text(text)
    keys_file = root / "keys.yaml"
    keys = {
        "member": add_key(keys_file, "mia", ["research", "lab"]),
        "outsider": add_key(keys_file, "otto", ["sales"]),
        "groupless": add_key(keys_file, "gil", []),
    }
    settings = Settings(
        source_uri=f"docs={root / 'docs'} uploads={root / 'uploads'}",
        upload_folder="uploads",
        languages="en de",
        data_dir=root / "data",
        api_keys_file=keys_file,
        workers=1,
        index_partitions=2,
    )
    with dg.instance_for_test() as instance:
        ticks = SensorTicks(build_definitions(settings), instance)
        ticks.run("index_job")
        yield UploadDeployment(settings, keys, ticks)
