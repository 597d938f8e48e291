"""Searched unit vectors in a file the host's processes map: one copy for every API worker,
the same results as vectors held in memory, and a new version never served old vectors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import lorehouse.search.shared_vectors as shared_vectors
from lorehouse.search.retriever import access_clause
from lorehouse.stores.lance_index import ChunkIndex
from tests.unit.test_vector_search import DIMENSION, _table_rows

ROWS = 400


def _vectors(seed: int, rows: int = ROWS) -> np.ndarray:
    vectors = np.random.default_rng(seed).standard_normal((rows, DIMENSION))
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def _index(path: Path, cache: Path | None) -> ChunkIndex:
    return ChunkIndex(str(path), ann_min_rows=100_000, vector_cache=cache)


def _nearest(index: ChunkIndex, query: np.ndarray, where: str | None = None) -> list[str]:
    rows = index.snapshot().vector_search(query, where, 10, ["chunk_id"])
    return [row["chunk_id"] for row in rows]


def test_a_second_process_maps_the_vectors_the_first_wrote_and_finds_the_same_rows(
    tmp_path: Path,
) -> None:
    restricted = np.arange(ROWS) % 7 == 0
    _index(tmp_path / "lancedb", None).upsert(_table_rows(_vectors(1), restricted), [])
    cache = tmp_path / "cache"
    query = _vectors(2, 1)[0]
    outsider = access_clause([])
    held = _index(tmp_path / "lancedb", None)
    expected = (_nearest(held, query), _nearest(held, query, outsider))
    assert not isinstance(held.snapshot()._unit_vectors, np.memmap)

    first = _index(tmp_path / "lancedb", cache)
    assert (_nearest(first, query), _nearest(first, query, outsider)) == expected
    written = sorted(p.name for p in cache.glob("*.npy"))
    assert len(written) == 2 and isinstance(first.snapshot()._unit_vectors, np.memmap)
    # Another process (an API worker) maps the same file: it reads no vector of its own.
    script = (
        "import sys, numpy as np\n"
        "from lorehouse.stores.lance_index import ChunkIndex\n"
        f"index = ChunkIndex({str(tmp_path / 'lancedb')!r}, ann_min_rows=100_000, "
        f"vector_cache=__import__('pathlib').Path({str(cache)!r}))\n"
        "snapshot = index.snapshot()\n"
        "snapshot._load()\n"
        "vectors = snapshot._unit_vectors\n"
        "print(isinstance(vectors, np.memmap), vectors.filename)\n"
    )
    found = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout.split()
    assert found[0] == "True" and Path(found[1]).parent == cache
    assert sorted(p.name for p in cache.glob("*.npy")) == written


def test_a_new_version_gets_its_own_file_and_the_old_one_goes_once_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    index = _index(tmp_path / "lancedb", cache)
    vectors = _vectors(3)
    index.upsert(_table_rows(vectors, np.zeros(ROWS, dtype=bool)), [])
    query = vectors[5]
    assert _nearest(index, query)[0] == "c00005"
    before = set(cache.glob("*.npy"))
    # The row moves far from the query: a search of the new version must not score the old.
    moved = vectors.copy()
    moved[5] = -moved[5]
    index.upsert(_table_rows(moved, np.zeros(ROWS, dtype=bool)).slice(5, 1), [])
    monkeypatch.setattr(shared_vectors, "STALE_AFTER", 0.0)
    assert _nearest(index, query)[0] != "c00005"
    after = set(cache.glob("*.npy"))
    assert len(after) == 2 and not after & before


def test_a_torn_or_unwritable_file_leaves_searches_reading_from_memory(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    index = _index(tmp_path / "lancedb", cache)
    vectors = _vectors(4)
    index.upsert(_table_rows(vectors, np.zeros(ROWS, dtype=bool)), [])
    assert _nearest(index, vectors[9])[0] == "c00009"
    (vectors_file,) = cache.glob("*.vectors.npy")
    vectors_file.write_bytes(vectors_file.read_bytes()[:1000])  # a file cut short
    again = _index(tmp_path / "lancedb", cache)
    assert _nearest(again, vectors[9])[0] == "c00009"  # read from the table, written again
    assert vectors_file.stat().st_size > 1000
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the folder would be")
    unwritable = _index(tmp_path / "lancedb", blocked / "vectors")
    assert _nearest(unwritable, vectors[9])[0] == "c00009"
    assert not isinstance(unwritable.snapshot()._unit_vectors, np.memmap)
