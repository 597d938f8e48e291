"""The mapped ANN index: a caller's mask is a prefilter, a new version reuses the training of
the one before it while their sizes suit, and a file faiss cannot read is rebuilt, not
served."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lorehouse.search import ann

DIMENSION = 24


def _clustered(rows: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((30, DIMENSION))
    vectors = centres[rng.integers(0, 30, rows)] + 0.5 * rng.standard_normal((rows, DIMENSION))
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def test_rows_outside_the_mask_are_never_proposed_even_when_they_are_the_nearest() -> None:
    vectors = _clustered(3000, 1)
    index = ann.NeighbourIndex(ann.build(vectors), probes=ann.list_count(3000))
    query = vectors[42]
    nearest = np.argsort(-(vectors @ query))[:50]
    allowed = np.ones(len(vectors), dtype=bool)
    allowed[nearest] = False  # the 50 nearest rows belong to a group the caller is not in
    found = index.search(query, allowed, 100)
    assert len(found) == 100
    assert allowed[found].all()
    # Every list probed: the best proposals are the exact best of the allowed rows.
    exact = np.argsort(-np.where(allowed, vectors @ query, -np.inf))[:10]
    assert set(exact) <= set(found[:30].tolist())


def test_a_new_version_reuses_the_training_while_its_size_suits() -> None:
    grown = _clustered(5000, 2)  # a version with a thousand rows more than the one before
    old = ann.build(grown[:4000])
    reused = ann.build(grown, trained=old)
    centroids = old.quantizer.reconstruct_n(0, old.nlist)
    assert reused.nlist == old.nlist and reused.ntotal == len(grown)
    assert np.array_equal(reused.quantizer.reconstruct_n(0, reused.nlist), centroids)
    # Its own rows are found by their own vectors (among the first few: 8-bit codes).
    search = ann.NeighbourIndex(reused, probes=8)
    allowed = np.ones(len(grown), dtype=bool)
    assert all(i in search.search(grown[i], allowed, 5) for i in range(0, 5000, 100))
    # A table grown past what the old lists suit is trained again.
    far = ann.build(_clustered(40_000, 4), trained=old)
    assert far.nlist == ann.list_count(40_000) != old.nlist


def test_a_file_faiss_cannot_read_is_not_served(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    torn = tmp_path / ann.INDEX_FILE
    vectors = _clustered(1000, 5)
    ann.write(ann.build(vectors), torn)
    torn.write_bytes(torn.read_bytes()[:200])
    assert ann.open_mapped(torn) is None
    assert "not mapped" in caplog.text
    with pytest.raises(OSError, match="cannot write"):
        ann.write(ann.build(vectors), tmp_path / "missing" / ann.INDEX_FILE)
