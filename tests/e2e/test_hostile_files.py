"""Hostile files cost their own file only: each ends parsed or failed with a reason, bounded.

The folder is the one `bench/hostile.py` builds (decompression bombs, truncated and renamed
files, deep nesting, symlink loops...), with smaller bombs so the test stays quick; the
benchmark runs the full 1 GiB set through every asset and reports the figures.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest

from lorehouse.chunking import Chunker
from lorehouse.embedding.minilm import default_token_counter
from lorehouse.parsing.runner import ParseLimits
from lorehouse.settings import REPO_ROOT
from lorehouse.sources import LocalFolderSource
from lorehouse.stages.chunk import run_chunking
from lorehouse.stages.inventory import run_inventory
from lorehouse.stages.parse import run_parse
from lorehouse.stores.duckdb_store import DuckDBStore

sys.path.insert(0, str(REPO_ROOT / "bench"))
import hostile  # bench/hostile.py, which builds the folder

# The folder's elapsed time is asserted: nothing else may share the machine.
pytestmark = pytest.mark.serial

MAX_FILE_BYTES = 2 * 1024 * 1024
MEMORY_MB = 512
TIMEOUT_SECONDS = 20.0

EXPECTED = {
    "binary/random.md": ("failed", "unsupported_type"),
    "bombs/budget.xlsx": ("failed", "corrupt"),
    "bombs/deck.pptx": ("failed", "corrupt"),
    "bombs/laughs.docx": ("failed", "corrupt"),
    "bombs/report.docx": ("failed", "corrupt"),
    "bombs/stream.pdf": ("failed", "empty"),
    "empty/empty.md": ("failed", "empty"),
    "empty/empty.pdf": ("failed", "empty"),
    "good/parental-leave-faq.md": ("parsed", None),
    "good/travel-and-expenses.docx": ("parsed", None),
    "links/dangling.md": ("failed", "unreadable"),
    "links/loop": ("failed", "unreadable"),
    "links/self.md": ("failed", "unreadable"),
    "nested/deep-quotes.md": ("parsed", None),
    "nested/deep.html": ("failed", "corrupt"),
    "nested/one-line.md": ("parsed", None),
    "renamed/actually-docx.pdf": ("parsed", None),
    "renamed/actually-html.xlsx": ("parsed", None),
    "renamed/actually-pdf.docx": ("parsed", None),
    "renamed/picture.md": ("failed", "unsupported_type"),
    "size/over-limit.md": ("failed", "too_large"),
    "truncated/handbook-1pct.pdf": ("failed", "corrupt"),
    "truncated/handbook-50pct.pdf": ("parsed", None),
    "truncated/handbook-95pct.pdf": ("parsed", None),
}


@pytest.mark.timeout(300)
def test_every_hostile_file_ends_parsed_or_failed_with_its_reason(tmp_path: Path) -> None:
    source_root = tmp_path / "source"
    source_root.mkdir()
    described = hostile.build_hostile_folder(source_root, MAX_FILE_BYTES, bomb_bytes=256 << 20)
    assert set(described) == set(EXPECTED)
    store = DuckDBStore(tmp_path / "lorehouse.duckdb")
    source = LocalFolderSource(source_root)

    watch = hostile.MemoryWatch(pid=os.getpid())
    watcher = threading.Thread(target=watch.run, daemon=True)
    watcher.start()
    started = time.monotonic()
    run_inventory(source, store, max_file_bytes=MAX_FILE_BYTES)
    limits = ParseLimits(
        workers=2,
        timeout_seconds=TIMEOUT_SECONDS,
        max_file_bytes=MAX_FILE_BYTES,
        memory_mb=MEMORY_MB,
    )
    report = run_parse(source, store, limits)
    chunked = run_chunking(store, Chunker(256, default_token_counter().count))
    elapsed = time.monotonic() - started
    watch.stop()
    watcher.join()

    outcomes = {s.rel_path: (s.status, s.reason) for s in store.document_statuses()}
    assert outcomes == EXPECTED
    details = {s.rel_path: s.detail or "" for s in store.document_statuses()}
    for bomb in ("bombs/report.docx", "bombs/budget.xlsx", "bombs/deck.pptx"):
        assert "refused as a decompression bomb" in details[bomb], details[bomb]
    for link in ("links/self.md", "links/dangling.md", "links/loop"):
        assert "is a symbolic link; links are not followed" in details[link], details[link]
    assert not any("process died" in detail for detail in details.values())
    # Every parsed document was chunked, and no chunk carries an unbounded text.
    chunks = store.table("chunks")
    assert chunked.documents_dropped == 0
    parsed = set(store.table("documents_parsed", columns=["doc_id"])["doc_id"])
    assert report.parsed == len(parsed) and set(chunks["doc_id"]) == parsed
    assert chunks["text_chat"].str.len().max() < 4000
    # Bounded: a worker never grew past its ceiling (plus what it started with), and the
    # whole folder took well under one timeout per file.
    assert watch.peak_child_bytes < (MEMORY_MB + 512) * 1024 * 1024
    assert elapsed < TIMEOUT_SECONDS * 3
