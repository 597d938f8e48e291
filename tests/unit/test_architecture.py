"""The domain library stays free of orchestration and web frameworks."""

from __future__ import annotations

import ast

from lorehouse.settings import REPO_ROOT

FORBIDDEN = {"dagster", "dagster_aws", "dagster_webserver", "fastapi", "starlette", "uvicorn"}


def test_lorehouse_imports_no_dagster_or_fastapi() -> None:
    offenders = []
    for path in sorted((REPO_ROOT / "lorehouse").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] in FORBIDDEN]
    assert not offenders
