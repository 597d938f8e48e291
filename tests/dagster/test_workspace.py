"""workspace.yaml at the top level: what `dagster dev -w workspace.yaml` and a webserver
deployment load. The webserver started on it must serve the same assets, jobs and schedules
as the code location pyproject.toml's [tool.dg] names."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml

from lorehouse.settings import REPO_ROOT
from tests.dagster.conftest import _free_port

BIN = Path(sys.executable).parent
WORKSPACE = REPO_ROOT / "workspace.yaml"

LOCATION_QUERY = """
{
  workspaceOrError {
    ... on Workspace {
      locationEntries {
        name
        locationOrLoadError {
          __typename
          ... on RepositoryLocation {
            repositories { jobs { name } schedules { name } assetNodes { assetKey { path } } }
          }
          ... on PythonError { message }
        }
      }
    }
  }
}
"""


def test_workspace_yaml_names_the_code_location_of_tool_dg() -> None:
    import tomllib

    dg = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["dg"]["project"]
    (entry,) = yaml.safe_load(WORKSPACE.read_text())["load_from"]
    assert entry["python_module"]["module_name"] == dg["code_location_target_module"]
    assert entry["python_module"]["location_name"] == dg["code_location_name"]


def test_the_webserver_serves_every_asset_from_workspace_yaml(tmp_path: Path) -> None:
    from pipelines.definitions import defs

    port = _free_port()
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path), "LOREHOUSE_DATA_DIR": str(tmp_path)}
    (tmp_path / "dagster.yaml").write_text("")
    server = subprocess.Popen(
        [str(BIN / "dagster-webserver"), "-w", str(WORKSPACE), "-h", "127.0.0.1", "-p", str(port)],
        cwd=tmp_path,  # the workspace's paths are relative to the file, not the shell
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        location = _loaded_location(port, server)
    finally:
        server.terminate()
        server.wait(timeout=60)
    assert location["name"] == "lorehouse"
    loaded = location["locationOrLoadError"]
    assert loaded["__typename"] == "RepositoryLocation", loaded
    (repository,) = loaded["repositories"]
    served = {"/".join(node["assetKey"]["path"]) for node in repository["assetNodes"]}
    expected = {key.to_user_string() for key in defs.resolve_asset_graph().get_all_asset_keys()}
    assert served == expected
    jobs = {job["name"] for job in repository["jobs"]}
    assert {"index_job", "partitions_job", "merge_job", "inventory_job"} <= jobs
    assert {schedule["name"] for schedule in repository["schedules"]}


def _loaded_location(port: int, server: subprocess.Popen[bytes]) -> dict[str, object]:
    """The workspace's one location once the webserver has loaded it (two minutes at most)."""
    deadline = time.monotonic() + 120
    while True:
        if server.poll() is not None:
            pytest.fail(f"dagster-webserver exited: {server.stderr.read().decode()[-3000:]}")
        try:
            reply = httpx.post(
                f"http://127.0.0.1:{port}/graphql", json={"query": LOCATION_QUERY}, timeout=30
            )
            (entry,) = reply.json()["data"]["workspaceOrError"]["locationEntries"]
            if entry["locationOrLoadError"] is not None:
                return entry
        except (httpx.TransportError, KeyError, ValueError):
            pass
        assert time.monotonic() < deadline, "the webserver did not load workspace.yaml"
        time.sleep(1)
