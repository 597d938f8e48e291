"""Vector search past the ANN threshold: the mapped IVF index (or LanceDB's IVF_HNSW_SQ index)
proposes candidates, the vectors held in memory rescore them. It must find what an exact
search finds, for an outsider, for a member of the restricted group and under a narrow
filter, and never show a row the caller may not see."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from lorehouse.search.ann import NeighbourSearch
from lorehouse.search.filters import access_clause
from lorehouse.search.snapshot import best_by_position
from lorehouse.search.tables import sql_string
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


@pytest.fixture(
    scope="module",
    params=[("at once", "mapped"), ("batch by batch", "mapped"), ("batch by batch", "lancedb")],
    ids=lambda param: "-".join(param),
)
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
    writing, engine = request.param
    index = ChunkIndex(
        str(path), ann_min_rows=256, neighbours=NeighbourSearch(256, probes=32, engine=engine)
    )
    rows = _table_rows(vectors, restricted)
    if writing == "at once":
        index.upsert(rows, [])
    elif engine == "lancedb":
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
    else:
        for start in range(0, ROWS, BATCH_ROWS):
            index.upsert(rows.slice(start, BATCH_ROWS), [])
            # Searches read the mapped index: the build spends nothing on LanceDB's.
            assert not index.index_new_vectors()
    index.refresh_indexes()
    assert index.has_vector_index() == (engine == "lancedb")
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
