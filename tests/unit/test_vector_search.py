"""Vector search past the ANN threshold: the IVF_HNSW_SQ index proposes candidates, the vectors
held in memory rescore them. It must find what an exact search finds, for an outsider, for a
member of the restricted group and under a narrow filter, and never show a row the caller may
not see."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from lorehouse.search.retriever import access_clause
from lorehouse.search.tables import (
    ProjectedSieve,
    SharedProducts,
    at_least_best,
    best_by_position,
    sql_string,
)
from lorehouse.stores.lance_index import ChunkIndex, chunk_schema

DIMENSION = 32
ROWS = 3000
CHUNKS_PER_DOCUMENT = 20
RESTRICTED_DOCUMENT_SHARE = 0.1
TOP_K = 10
BATCH_ROWS = 500


def _table_rows(vectors: np.ndarray, restricted: np.ndarray) -> pa.Table:
    schema = chunk_schema(DIMENSION, "clusters-32")
    ids = [f"c{i:05d}" for i in range(len(vectors))]
    columns = {
        "chunk_id": ids,
        "doc_id": [f"d{i // CHUNKS_PER_DOCUMENT:04d}" for i in range(len(vectors))],
        "acl": [["security"] if flag else [] for flag in restricted.tolist()],
        "text_embed": ids,
        "embed_key": ids,
        "row_hash": ids,
    }
    arrays = [
        pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1), pa.float32()), DIMENSION)
        if field.name == "vector"
        else pa.array(columns.get(field.name, [None] * len(vectors)), type=field.type)
        for field in schema
    ]
    return pa.Table.from_arrays(arrays, schema=schema)


@pytest.fixture(scope="module", params=["at once", "batch by batch"])
def indexed(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> tuple[ChunkIndex, np.ndarray, np.ndarray]:
    """A 3,000-row table with an ANN index, its unit vectors and its restricted rows.

    Written at once and indexed after, or written in batches with the vector index brought
    up to date between them as a build does (a first index, then delta indexes)."""
    rng = np.random.default_rng(11)
    centres = rng.standard_normal((30, DIMENSION))
    vectors = centres[rng.integers(0, 30, ROWS)] + 0.6 * rng.standard_normal((ROWS, DIMENSION))
    vectors = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)
    documents = ROWS // CHUNKS_PER_DOCUMENT
    restricted_documents = rng.random(documents) < RESTRICTED_DOCUMENT_SHARE
    restricted = np.repeat(restricted_documents, CHUNKS_PER_DOCUMENT)
    path: Path = tmp_path_factory.mktemp("ann") / "lancedb"
    index = ChunkIndex(str(path), ann_min_rows=256)
    rows = _table_rows(vectors, restricted)
    if request.param == "at once":
        index.upsert(rows, [])
    else:
        steps = []
        for start in range(0, ROWS, BATCH_ROWS):
            index.upsert(rows.slice(start, BATCH_ROWS), [])
            steps.append(index.index_new_vectors())
            (state,) = [s for s in index.index_state() if s.columns == ["vector"]] or [None]
            # No index step is left more than the threshold behind the table.
            assert state is not None and state.unindexed_rows < index.ann_min_rows
        assert steps == [True] * len(steps)
        stats = index.table().index_stats(state.name)
        assert stats is not None and stats.num_indices == ROWS // BATCH_ROWS
    index.refresh_indexes()
    assert index.has_vector_index()
    return index, vectors, restricted


def _exact(vectors: np.ndarray, query: np.ndarray, allowed: np.ndarray, k: int) -> list[str]:
    scores = np.where(allowed, vectors @ query, -np.inf)
    best = np.argsort(-scores, kind="stable")[: min(k, int(allowed.sum()))]
    return [f"c{i:05d}" for i in best]


def _scope(caller: str, restricted: np.ndarray) -> tuple[np.ndarray, str]:
    """(rows the caller may get, the predicate a search is given) for each kind of caller."""
    allowed = {
        "outsider": ~restricted,
        "member": np.ones(ROWS, dtype=bool),
        "one document": np.arange(ROWS) // CHUNKS_PER_DOCUMENT == 7,
    }[caller]
    where = {
        "outsider": access_clause([]),
        "member": access_clause(["security"]),
        "one document": f"doc_id = {sql_string('d0007')} AND {access_clause(['security'])}",
    }[caller]
    return allowed, where


@pytest.mark.parametrize("caller", ["outsider", "member", "one document"])
def test_the_ann_path_finds_the_exact_neighbours_and_only_what_the_caller_may_see(
    indexed: tuple[ChunkIndex, np.ndarray, np.ndarray], caller: str
) -> None:
    index, vectors, restricted = indexed
    snapshot = index.snapshot()
    assert snapshot.vector_indexed
    allowed, where = _scope(caller, restricted)
    queries = np.random.default_rng(5).standard_normal((40, DIMENSION)).astype(np.float32)
    found_exact = 0
    for query in queries:
        unit = query / np.linalg.norm(query)
        hits = snapshot.vector_search(query, where, TOP_K, ["chunk_id", "acl"])
        positions = [int(hit["chunk_id"][1:]) for hit in hits]
        assert all(allowed[p] for p in positions), "a row outside the caller's access was shown"
        assert len(hits) == min(TOP_K, int(allowed.sum()))
        # Distances are exact cosines of the full vectors, best first.
        cosines = [1.0 - hit["_distance"] for hit in hits]
        assert cosines == pytest.approx([float(vectors[p] @ unit) for p in positions], abs=1e-5)
        assert cosines == sorted(cosines, reverse=True)
        found_exact += len(
            set(hit["chunk_id"] for hit in hits) & set(_exact(vectors, unit, allowed, TOP_K))
        )
    assert found_exact / (len(queries) * min(TOP_K, int(allowed.sum()))) >= 0.99


def test_concurrent_queries_scored_together_each_get_their_own_scores() -> None:
    """Many searches at once share one matrix product; none may get another's scores."""
    rng = np.random.default_rng(3)
    matrix = rng.standard_normal((20_000, 64)).astype(np.float32)
    products = SharedProducts(matrix, min_batch=2)
    queries = rng.standard_normal((64, 64)).astype(np.float32)
    start = threading.Barrier(16)

    def score(number: int) -> list[tuple[int, np.ndarray]]:
        start.wait()
        return [(q, products.scores(queries[q])) for q in range(number, len(queries), 16)]

    with ThreadPoolExecutor(max_workers=16) as pool:
        results = [pair for found in pool.map(score, range(16)) for pair in found]
    assert sorted(q for q, _ in results) == list(range(len(queries)))
    for q, scores in results:
        np.testing.assert_allclose(scores, matrix @ queries[q], rtol=1e-4, atol=1e-4)


def test_a_failed_product_fails_every_query_waiting_on_it() -> None:
    products = SharedProducts(np.ones((10, 4), dtype=np.float32))
    with pytest.raises(ValueError):
        products.scores(np.ones(5, dtype=np.float32))
    # The table stays usable after a failed product.
    np.testing.assert_allclose(products.scores(np.ones(4, dtype=np.float32)), np.full(10, 4.0))


@pytest.fixture(scope="module")
def sieved(tmp_path_factory: pytest.TempPathFactory) -> tuple[ChunkIndex, np.ndarray, np.ndarray]:
    """A table without an ANN index, searched exactly through the sieve.

    Its vectors spread like text embeddings do: most of their variance in a few directions
    (each dimension here spreads 0.85 times as much as the one before), which is what the
    sieve relies on; on the handbook's real vectors it found every exact top 50 and top 150.
    """
    rng = np.random.default_rng(12)
    spread = 0.85 ** np.arange(DIMENSION)
    centres = rng.standard_normal((30, DIMENSION)) * spread
    noise = 0.6 * rng.standard_normal((ROWS, DIMENSION)) * spread
    vectors = centres[rng.integers(0, 30, ROWS)] + noise + 0.05 * rng.standard_normal(DIMENSION)
    vectors = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)
    restricted = np.repeat(
        rng.random(ROWS // CHUNKS_PER_DOCUMENT) < RESTRICTED_DOCUMENT_SHARE, CHUNKS_PER_DOCUMENT
    )
    path: Path = tmp_path_factory.mktemp("sieve") / "lancedb"
    index = ChunkIndex(str(path), ann_min_rows=1_000_000, sieve_min_rows=1000)
    index.upsert(_table_rows(vectors, restricted), [])
    return index, vectors, restricted


@pytest.mark.parametrize("caller", ["outsider", "member", "one document"])
def test_the_sieve_finds_the_exact_neighbours_and_only_what_the_caller_may_see(
    sieved: tuple[ChunkIndex, np.ndarray, np.ndarray], caller: str
) -> None:
    """Ranked first in a third of the dimensions, the rows an exact search would return are
    all among those rescored: the same rows in the same order, never a hidden one."""
    index, vectors, restricted = sieved
    snapshot = index.snapshot()
    assert not snapshot.vector_indexed
    allowed, where = _scope(caller, restricted)
    exact = ChunkIndex(index.uri, ann_min_rows=1_000_000, sieve_min_rows=0).snapshot()
    queries = np.random.default_rng(6).standard_normal((40, DIMENSION)).astype(np.float32)
    for query in queries:
        unit = query / np.linalg.norm(query)
        hits = snapshot.vector_search(query, where, TOP_K, ["chunk_id", "acl"])
        positions = [int(hit["chunk_id"][1:]) for hit in hits]
        assert all(allowed[p] for p in positions), "a row outside the caller's access was shown"
        assert [hit["chunk_id"] for hit in hits] == _exact(vectors, unit, allowed, TOP_K)
        assert [hit["chunk_id"] for hit in hits] == [
            hit["chunk_id"] for hit in exact.vector_search(query, where, TOP_K, ["chunk_id"])
        ]
        cosines = [1.0 - hit["_distance"] for hit in hits]
        assert cosines == pytest.approx([float(vectors[p] @ unit) for p in positions], abs=1e-5)


def test_tables_below_the_sieve_threshold_and_switched_off_are_scanned_whole(
    sieved: tuple[ChunkIndex, np.ndarray, np.ndarray],
) -> None:
    index, _, _ = sieved
    assert index.snapshot()._exact_sieve() is not None
    for threshold in (0, ROWS + 1):
        plain = ChunkIndex(index.uri, ann_min_rows=1_000_000, sieve_min_rows=threshold)
        assert plain.snapshot()._exact_sieve() is None
    # Sibling tables (the sentence windows) are searched the same way.
    assert index.sentences().sieve_min_rows == index.sieve_min_rows


def test_vectors_spread_over_every_direction_are_not_sieved() -> None:
    """The sieve is checked on the table's own rows before it is used: where the top k of a
    row would be missed (here, noise as large in every direction as the clusters), the table
    is scanned whole instead."""
    rng = np.random.default_rng(13)
    centres = rng.standard_normal((30, DIMENSION))
    even = centres[rng.integers(0, 30, ROWS)] + 0.6 * rng.standard_normal((ROWS, DIMENSION))
    even = (even / np.linalg.norm(even, axis=1, keepdims=True)).astype(np.float32)
    assert ProjectedSieve.checked(even, DIMENSION // 3) is None
    spread = 0.85 ** np.arange(DIMENSION)
    narrow = (centres * spread)[rng.integers(0, 30, ROWS)] + 0.6 * rng.standard_normal(
        (ROWS, DIMENSION)
    ) * spread
    narrow = (narrow / np.linalg.norm(narrow, axis=1, keepdims=True)).astype(np.float32)
    assert ProjectedSieve.checked(narrow, DIMENSION // 3) is not None
    # A vector holding NaN (a broken embedding) leaves the table scanned whole, not failing.
    narrow[5] = np.nan
    assert ProjectedSieve.checked(narrow, DIMENSION // 3) is None


def test_sieve_candidates_hold_every_best_row_and_no_hidden_one() -> None:
    """The sieve's candidates come from a threshold read off a sample of the scores: they
    must include every one of the best rows asked for, and never a row the caller may not
    see (scored -inf); where the sample misjudges, the exact selection is made."""
    rng = np.random.default_rng(21)
    scores = rng.standard_normal(50_000).astype(np.float32)
    scores[rng.random(50_000) < 0.3] = -np.inf  # hidden rows
    wanted = 600
    found = at_least_best(scores, wanted)
    best = np.argsort(-scores, kind="stable")[:wanted]
    assert set(best.tolist()) <= set(found.tolist())
    assert np.isfinite(scores[found]).all()
    assert len(found) <= 3 * wanted

    # Nearly everything hidden: the sample's threshold is -inf, so the rows are selected.
    mostly_hidden = np.full(50_000, -np.inf, dtype=np.float32)
    mostly_hidden[rng.choice(50_000, 700, replace=False)] = rng.random(700)
    found = at_least_best(mostly_hidden, wanted)
    assert len(found) == wanted and np.isfinite(mostly_hidden[found]).all()
    # Every score equal: a threshold would pass all 50,000 rows, so exactly 600 are taken.
    assert len(at_least_best(np.ones(50_000, dtype=np.float32), wanted)) == wanted
    # Fewer visible rows than the sample's margin needs, and a candidate budget that would
    # take every row: a threshold of -inf must not let a hidden row in.
    few = np.full(9_000, -np.inf, dtype=np.float32)
    few[rng.choice(9_000, 4_000, replace=False)] = rng.random(4_000)
    found = at_least_best(few, 3_000)
    assert len(found) == 3_000 and np.isfinite(few[found]).all()


def test_rows_tied_at_the_cut_are_kept_by_position_whatever_order_they_were_proposed_in() -> None:
    """Copies of a document have equal vectors, so their scores tie exactly: which copies
    make the top k must not depend on how the candidates were found."""
    scores = np.array([0.9, 0.5, 0.5, 0.7, 0.5, 0.5, 0.1], dtype=np.float32)
    positions = np.array([40, 31, 7, 12, 19, 3, 8])
    rng = np.random.default_rng(4)
    kept = set()
    for _ in range(10):
        order = rng.permutation(len(scores))
        picked = best_by_position(scores[order], positions[order], 4)
        kept.add(tuple(sorted(positions[order][picked].tolist())))
    # 0.9 and 0.7, then the two lowest positions among the four tied at 0.5.
    assert kept == {(3, 7, 12, 40)}
