"""What a benchmark ran on: cores, Python, platform and the versions of the libraries timed.

Every figure in docs/benchmarks.md and docs/experiments/ is printed beside this, because
absolute timings mean little without the machine and the library versions behind them.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any


def machine_info(libraries: Sequence[str]) -> dict[str, Any]:
    versions = {}
    for name in libraries:
        try:
            versions[name] = version(name)
        except PackageNotFoundError:
            versions[name] = "not installed"
    return {
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "libraries": versions,
    }


def write_raw_numbers(path: Path, payload: dict[str, Any]) -> None:
    """Writes a benchmark's raw figures as JSON (relative paths from the working directory)."""
    out = path if path.is_absolute() else Path.cwd() / path
    out.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    print(f"Raw numbers written to {out}")


def measure_in_child(script: str, arguments: Sequence[str], folder_prefix: str) -> dict[str, Any]:
    """Runs `script --child ... FOLDER` in a fresh process with a scratch folder and returns
    the JSON object it printed last: each measurement of memory starts from an empty heap."""
    with tempfile.TemporaryDirectory(prefix=folder_prefix) as folder:
        out = subprocess.run(
            [sys.executable, script, *arguments, folder],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    return json.loads(out.strip().splitlines()[-1])


def measure_grid(
    script: str,
    sizes: Sequence[int],
    modes: Sequence[str],
    options: Sequence[str],
    folder_prefix: str,
    cells: Callable[[dict[str, Any]], Sequence[object]],
) -> list[dict[str, Any]]:
    """Each (size, mode) measured by `script --child MODE SIZE FOLDER` in its own process,
    its Markdown table row printed as it finishes (as docs/benchmarks.md shows it)."""
    results = []
    for size in sizes:
        for mode in modes:
            arguments = [*options, "--child", mode, str(size)]
            result = measure_in_child(script, arguments, folder_prefix)
            results.append(result)
            print("| " + " | ".join(str(cell) for cell in cells(result)) + " |", flush=True)
    return results
