"""Settings: what the defaults are read from on this machine.

The repository's folders, the data folder a project finds from any folder below it, and the
cores a process may run on: the defaults that depend on where Lorehouse runs, kept apart from
the settings' descriptions so each group can use them.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
BUNDLED_SAMPLE_CORPUS = REPO_ROOT / "sample_corpus"

#: The name of a project's data folder, found from any folder below it.
PROJECT_DATA_DIR = ".lorehouse"


def default_data_dir(start: Path | None = None) -> Path:
    """The data folder when none is set: the nearest `.lorehouse` folder in `start` (the
    working directory) or above it, as git finds its repository, so every command of a
    project finds its stores from any subfolder; else one per user, in the user's data folder.
    """
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / PROJECT_DATA_DIR).is_dir():
            return folder / PROJECT_DATA_DIR
    user_data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(user_data) / "lorehouse"


def available_cores() -> int:
    """CPU cores this process may run on: its affinity where the OS tells it (a container
    pinned to 2 of 64 cores gets 2), else the machine's count (macOS, Windows)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def search_turns_default(server_processes: int) -> int:
    """Searches at once per server process: the cores it may use, shared among the
    processes serving beside it (two processes on two cores search one at a time each)."""
    return max(1, available_cores() // server_processes)
