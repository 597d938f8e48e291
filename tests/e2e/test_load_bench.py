"""bench/load.py end to end, with tiny numbers: it starts `lorehouse serve` on the materialized
sample corpus, loads /v1/search and /v1/ask, and reports every request as succeeded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lorehouse.settings import REPO_ROOT


# The budget includes building the session's materialized store when this test runs alone;
# the benchmark itself takes about 20 s.
@pytest.mark.benchmark
@pytest.mark.timeout(300)
def test_load_bench_runs_both_phases_without_errors(
    materialized_sample: Path, tmp_path: Path
) -> None:
    out = tmp_path / "load.json"
    run = subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "bench" / "load.py"),
            "--data-dir",
            str(materialized_sample),
            "--search-clients",
            "4",
            "--search-seconds",
            "3",
            "--ask-clients",
            "2",
            "--ask-seconds",
            "3",
            "--drain-seconds",
            "20",
            "--json",
            str(out),
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=150,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["errors"] == 0
    phases = {phase["name"]: phase for phase in result["phases"]}
    assert set(phases) == {"search", "ask"}
    for phase in phases.values():
        assert phase["requests"] > 0 and phase["ok"] == phase["requests"]
        assert phase["errors"] == 0 and phase["error_kinds"] == {}
        latency = phase["latency_ms"]
        assert 0 < latency["p50"] <= latency["p95"] <= latency["p99"] <= latency["max"]
        assert phase["rss_peak_mib"] >= phase["rss_end_mib"] > 0
        # What a request costs the server, the capacity figure: CPU seconds over responses.
        expected = 1000 * phase["server_cpu_seconds"] / phase["requests"]
        assert phase["server_cpu_ms_per_request"] == pytest.approx(expected) and expected > 0
    assert phases["search"]["clients"] == 4 and phases["ask"]["clients"] == 2
    assert "| search | POST /v1/search | 4 |" in run.stdout
    assert result["machine"]["cpu_count"] == os.cpu_count()
