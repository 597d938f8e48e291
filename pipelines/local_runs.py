"""Runs started in this process (`lorehouse materialize`) as the Dagster UI lists them.

A run the webserver or daemon launches records where its job came from: the code location
and repository of the workspace. The UI's Overview timeline draws a run in its job's row only
when it has that origin, so a run from `execute_in_process` showed under Runs but left the
timeline saying "No runs". Here such a run is given the origin of the same job in the
workspace's code location (`workspace.yaml`), and the UI draws it beside the scheduled runs.
"""

import sys
from collections.abc import Iterator
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
