"""bench/ scripts imported by tests: they are scripts, not a package, and import their
neighbours (machine.py, reindex.py) by name."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from lorehouse.settings import REPO_ROOT


def bench_script(name: str) -> ModuleType:
    """bench/<name>.py as the module `<name>_bench`, its folder on the path while it loads."""
    sys.path.insert(0, str(REPO_ROOT / "bench"))
    try:
        spec = importlib.util.spec_from_file_location(
            f"{name}_bench", REPO_ROOT / "bench" / f"{name}.py"
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        # Registered first: dataclasses look their module up while they are made.
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(REPO_ROOT / "bench"))
