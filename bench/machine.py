"""What a benchmark ran on: cores, Python, platform and the versions of the libraries timed.

Every figure in BENCHMARKS.md is printed beside this, because absolute timings mean little
without the machine and the library versions behind them.
"""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Sequence
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
