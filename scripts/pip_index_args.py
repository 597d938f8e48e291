"""The package indexes and wheel folders pip is configured with, as uv's command-line options.

uv does not read pip's configuration files or PIP_* variables; a machine set up for pip (a
mirror, an internal index, a folder of prebuilt wheels) must install the same packages from
the same places with uv, so `make` passes them on.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

OPTIONS = {"index-url": "--index-url", "extra-index-url": "--extra-index-url"}


def main() -> None:
    listed = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, check=False
    ).stdout
    args: list[str] = []
    for line in listed.splitlines():
        key, _, value = line.partition("=")
        name = key.split(".", 1)[-1]
        values = shlex.split(value.strip().strip("'\""))
        if name in OPTIONS:
            for url in values:
                args += [OPTIONS[name], url]
        elif name == "find-links":
            for url in values:
                args += ["--find-links", url]
    for url in os.environ.get("PIP_FIND_LINKS", "").split():
        args += ["--find-links", url]
    for url in os.environ.get("PIP_EXTRA_INDEX_URL", "").split():
        args += ["--extra-index-url", url]
    if url := os.environ.get("PIP_INDEX_URL"):
        args += ["--index-url", url]
    print(shlex.join(_unique_pairs(args)))


def _unique_pairs(args: list[str]) -> list[str]:
    seen: set[tuple[str, str]] = set()
    out: list[str] = []
    for option, value in zip(args[::2], args[1::2], strict=True):
        if (option, value) not in seen:
            seen.add((option, value))
            out += [option, value]
    return out


if __name__ == "__main__":
    main()
