"""Dagster's daemon, one tick at a time, in the test's process: each sensor evaluated as the
daemon evaluates it (with its cursor and the instance), and each run it requests executed
on that instance with the request's job, partition and tags, as the run launcher would.

Tests drive a deployment's own sensors this way, so what they request is what a deployment
runs; the eval assets are left out of the runs, as they score the sample corpus's golden
set and only cost time on any other corpus.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import dagster as dg


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
        job = definition.job_name
        return [
            request if request.job_name else request.with_replaced_attrs(job_name=job)
            for request in data.run_requests or []
        ]

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
