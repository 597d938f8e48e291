"""Runs started in this process (`lorehouse materialize`) as the Dagster UI lists them.

A run the webserver or daemon launches records where its job came from: the code location
and repository of the workspace. The UI's Overview timeline draws a run in its job's row only
when it has that origin, so a run from `execute_in_process` showed under Runs but left the
timeline saying "No runs". Here such a run is given the origin of the same job in the
workspace's code location (`workspace.yaml`), and the UI draws it beside the scheduled runs.
"""

import os
import socket
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import dagster as dg
import yaml
from dagster._core.definitions.repository_definition import SINGLETON_REPOSITORY_NAME
from dagster._core.remote_origin import (
    ManagedGrpcPythonEnvCodeLocationOrigin,
    RemoteJobOrigin,
    RemoteRepositoryOrigin,
)
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin

from lorehouse.settings import REPO_ROOT

#: The module every deployment loads the code location from (workspace.yaml, [tool.dg]).
CODE_LOCATION_MODULE = "pipelines.definitions"


def workspace_location_name(workspace: Path = REPO_ROOT / "workspace.yaml") -> str:
    """The code location's name as `dagster dev -w workspace.yaml` shows it; Dagster names a
    location after its module when the workspace gives no name."""
    if workspace.is_file():
        for entry in yaml.safe_load(workspace.read_text()).get("load_from", []):
            module = entry.get("python_module", {})
            if module.get("module_name") == CODE_LOCATION_MODULE:
                return str(module.get("location_name") or CODE_LOCATION_MODULE)
    return CODE_LOCATION_MODULE


def workspace_job_origin(job_name: str) -> RemoteJobOrigin:
    """Where the UI finds `job_name`: the workspace's code location, its one repository."""
    location = ManagedGrpcPythonEnvCodeLocationOrigin(
        LoadableTargetOrigin(
            executable_path=sys.executable,
            module_name=CODE_LOCATION_MODULE,
            working_directory=str(REPO_ROOT),
        ),
        location_name=workspace_location_name(),
    )
    return RemoteJobOrigin(RemoteRepositoryOrigin(location, SINGLETON_REPOSITORY_NAME), job_name)


@contextmanager
def runs_with_workspace_origin(instance: dg.DagsterInstance, job_name: str) -> Iterator[None]:
    """Within the block, runs of `job_name` that `instance` creates carry the workspace's
    origin for it. `execute_in_process` takes no origin, and creates its run through the
    instance it is given, so the origin is added there."""
    create = instance.create_run_for_job
    origin = workspace_job_origin(job_name)

    def with_origin(*args: Any, **kwargs: Any) -> dg.DagsterRun:
        if kwargs.get("job_def") is not None and kwargs["job_def"].name == job_name:
            kwargs.setdefault("remote_job_origin", origin)
        return create(*args, **kwargs)

    instance.create_run_for_job = with_origin  # type: ignore[method-assign]
    try:
        yield
    finally:
        del instance.create_run_for_job


#: Where a run started in this process (`lorehouse materialize`) runs: its host and process,
#: so a later one can tell that it died.
HOST_TAG = "lorehouse/host"
PID_TAG = "lorehouse/pid"


def local_run_tags() -> dict[str, str]:
    """The tags that say which process on which host runs a run started here."""
    return {HOST_TAG: socket.gethostname(), PID_TAG: str(os.getpid())}


def free_slots_of_dead_runs(instance: dg.DagsterInstance, pools: Iterable[str]) -> list[str]:
    """Frees the slots of `pools` held by runs this host started in process whose process is
    gone, marking those runs failed; returns their ids.

    Dagster frees a step's slot when the step ends, and its daemon frees a run's once the run
    has ended. A process killed outright (out of memory, SIGKILL) leaves its run started and
    its slot claimed, so every later step of the pool would wait for it without end: with
    the shared stores' pool, no partition would publish again. A run of another host is left
    to the daemon's run monitoring, since its process cannot be checked from here.
    """
    storage = instance.event_log_storage
    if not storage.supports_global_concurrency_limits:
        return []
    host = socket.gethostname()
    freed: list[str] = []
    for pool in pools:
        info = storage.get_concurrency_info(pool)
        holders = info.active_run_ids | {step.run_id for step in info.pending_steps}
        for run_id in sorted(holders):
            run = instance.get_run_by_id(run_id)
            if run is None or run.tags.get(HOST_TAG) != host:
                continue
            pid = int(run.tags.get(PID_TAG) or 0)
            if pid and _alive(pid):
                continue
            if not run.is_finished:
                instance.report_run_failed(
                    run, f"its process ({pid} on {host}) is gone; its pool slots were freed"
                )
            storage.free_concurrency_slots_for_run(run_id)
            freed.append(run_id)
    return freed


def _alive(pid: int) -> bool:
    """Whether process `pid` exists on this host (signal 0 checks without sending one)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True
