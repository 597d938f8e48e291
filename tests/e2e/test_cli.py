"""The commands a user types: lorehouse materialize and docs, dagster asset materialize."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from lorehouse.settings import REPO_ROOT

BIN = Path(sys.executable).parent


def _run(args: list[str], data_dir: Path, **extra_env: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "LOREHOUSE_DATA_DIR": str(data_dir),
        "LOREHOUSE_WORKERS": "2",
        "DAGSTER_HOME": str(data_dir / "dagster_home"),
        "COLUMNS": "200",
        **extra_env,
    }
    (data_dir / "dagster_home").mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        args, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def test_lorehouse_materialize_then_docs(tmp_path: Path) -> None:
    run = _run([str(BIN / "lorehouse"), "materialize"], tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "parsed: 10/10 (100%)" in run.stderr
    assert "check parsed_documents.parsed_documents_contract: passed" in run.stderr
    assert "│ pdf " in run.stdout and "│ all " in run.stdout
    docs = _run([str(BIN / "lorehouse"), "docs"], tmp_path)
    assert docs.returncode == 0, docs.stderr
    assert "security/incident-response-plan.docx" in docs.stdout
    assert "security" in docs.stdout and "parsed" in docs.stdout


def test_lorehouse_materialize_rejects_an_unknown_selection(tmp_path: Path) -> None:
    run = _run([str(BIN / "lorehouse"), "materialize", "--select", "no_such_asset"], tmp_path)
    assert run.returncode == 2
    assert "matches no asset" in run.stderr or "Invalid selection" in run.stderr


def test_docs_before_any_run_says_what_to_do(tmp_path: Path) -> None:
    run = _run([str(BIN / "lorehouse"), "docs"], tmp_path)
    assert run.returncode == 1
    assert "lorehouse materialize" in run.stderr


def test_dagster_cli_materializes_every_asset(tmp_path: Path) -> None:
    run = _run(
        [
            str(BIN / "dagster"),
            "asset",
            "materialize",
            "-m",
            "pipelines.definitions",
            "--select",
            "*",
        ],
        tmp_path,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "RUN_SUCCESS" in run.stderr + run.stdout
    assert (tmp_path / "lorehouse.duckdb").exists()


def test_workspace_loads_as_dagster_dev_loads_it(tmp_path: Path) -> None:
    run = _run([str(BIN / "dagster"), "definitions", "validate", "-w", "workspace.yaml"], tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "All code locations passed validation" in run.stderr + run.stdout
