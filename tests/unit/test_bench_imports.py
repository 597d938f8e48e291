"""The benchmarks import Lorehouse's own names inside their functions (so `--help` starts
fast); a renamed or moved name would only surface when someone runs the benchmark, often
an hour into a long one. Every `from lorehouse... import name` of a bench script must
resolve."""

from __future__ import annotations

import ast
import importlib
import importlib.util

import pytest

from lorehouse.settings import REPO_ROOT

BENCH = sorted((REPO_ROOT / "bench").glob("*.py"))


def _lorehouse_imports(path) -> list[tuple[str, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    return [
        (node.module, alias.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0
        if node.module.split(".")[0] in {"lorehouse", "pipelines", "assets", "api"}
        for alias in node.names
    ]


@pytest.mark.parametrize("path", BENCH, ids=lambda path: path.name)
def test_every_name_a_bench_script_imports_exists(path) -> None:
    missing = [
        f"{module}.{name}"
        for module, name in _lorehouse_imports(path)
        if not hasattr(importlib.import_module(module), name)
        and importlib.util.find_spec(f"{module}.{name}") is None
    ]
    assert not missing, f"{path.name} imports names that do not exist: {missing}"
