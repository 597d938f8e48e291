"""The search reads only the rows it shows, searches vectors in memory below the ANN
threshold, loads them before the first caller when warmed, and returns exactly what LanceDB's
own flat search, every candidate's row read whole, one leg after the other, returned."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from lorehouse.embedding.base import EmbeddingFailure
from lorehouse.search.filters import access_clause, where_clause
from lorehouse.search.hits import HIT_COLUMNS
from lorehouse.search.ranking import reciprocal_rank_fusion
from lorehouse.search.rerankers import (
    MAXSIM,
    NONE,
    Candidate,
    LateInteractionReranker,
    by_score,
)
from lorehouse.search.retriever import Retriever, SearchMode
from lorehouse.search.snapshot import TableSnapshot
from lorehouse.search.tables import sql_in
from lorehouse.settings import REPO_ROOT
from lorehouse.stores import DuckDBStore
from lorehouse.stores.lance_index import ChunkIndex, LanceTable
from tests.conftest import default_embedder

COLUMNS = [*HIT_COLUMNS, "text_embed"]
TOP_K = 8


def _flat_search(
    index: LanceTable, vector: np.ndarray, where: str, limit: int, columns: list[str]
) -> list[dict]:
    """LanceDB's exact scan, filtered inside the query, as vector search ran before."""
    query = index.table().search(vector, vector_column_name="vector").distance_type("cosine")
    return query.where(where, prefilter=True).select([*columns, "_distance"]).limit(limit).to_list()


def _eager_search(
    retriever: Retriever, query: str, mode: SearchMode, rerank: str, groups: list[str]
) -> list[tuple[str, dict[str, float]]]:
    """The search as it ran before: LanceDB's flat vector scan, every candidate read whole,
    vector leg then BM25 leg."""
    index, where, depth = retriever.index, where_clause(None, groups), retriever.candidates
    query_vector = retriever.embedder.embed([query])[0]
    candidates: dict[str, Candidate] = {}
    rankings = []
    if mode is not SearchMode.BM25:
        rows = _flat_search(index, query_vector, where, depth, COLUMNS)
        cosine = {row["chunk_id"]: 1.0 - float(row["_distance"]) for row in rows}
        windows = _flat_search(
            index.sentences(),
            query_vector,
            where,
            depth * retriever.ranking.sentences_per_candidate,
            ["chunk_id"],
        )
        for hit in windows:
            cosine[hit["chunk_id"]] = max(cosine.get(hit["chunk_id"], -1.0), 1 - hit["_distance"])
        best = sorted(cosine, key=lambda chunk_id: (-cosine[chunk_id], chunk_id))[:depth]
        found = {row["chunk_id"]: row for row in rows}
        unread = [c for c in best if c not in found]
        if unread:
            found.update(
                (row["chunk_id"], row)
                for row in index.rows(f"{sql_in('chunk_id', unread)} AND ({where})", COLUMNS, 99)
            )
        for chunk_id in best:
            candidates.setdefault(chunk_id, Candidate(found[chunk_id])).scores["vector"] = float(
                cosine[chunk_id]
            )
        rankings.append(best)
    if mode is not SearchMode.VECTOR:
        rows = index.snapshot().text_search(
            query,
            where,
            depth,
            COLUMNS,
            fields=retriever.text_fields,
            scope=access_clause(groups),
            question_word_weight=retriever.ranking.question_word_weight,
        )
        for row in rows:
            candidates.setdefault(row["chunk_id"], Candidate(row)).scores["bm25"] = row["_score"]
        rankings.append([row["chunk_id"] for row in rows])
    if mode is SearchMode.HYBRID:
        fused = reciprocal_rank_fusion(
            rankings, k=retriever.ranking.rrf_k, weights=[1.0, retriever.ranking.bm25_weight]
        )
        for candidate in candidates.values():
            candidate.scores["rrf"] = fused[candidate.chunk_id]
    stage = {SearchMode.VECTOR: "vector", SearchMode.BM25: "bm25"}.get(mode, "rrf")
    ordered = by_score(list(candidates.values()), stage)
    if rerank == MAXSIM:
        reranker = LateInteractionReranker(default_embedder(), index.token_vectors())
        ordered = reranker.rerank(query, query_vector, ordered)
    return [(c.chunk_id, c.scores) for c in ordered[:TOP_K]]


@pytest.fixture(scope="module")
def retriever(materialized_sample: Path) -> Retriever:
    index = ChunkIndex(str(materialized_sample / "lancedb"))
    # One query, one search: the eager search below has no per-ask searches to compare with.
    return Retriever(index, default_embedder(), split_asks=False, token_encoder=default_embedder())


@pytest.mark.parametrize("rerank", [NONE, MAXSIM])
@pytest.mark.parametrize("mode", list(SearchMode))
def test_every_query_and_caller_gets_the_hits_and_scores_of_the_eager_search(
    retriever: Retriever, materialized_sample: Path, mode: SearchMode, rerank: str
) -> None:
    golden = REPO_ROOT / "evals" / "golden" / "sample_corpus.jsonl"
    questions = [json.loads(line)["question"] for line in golden.read_text().splitlines()]
    everyone = DuckDBStore(materialized_sample / "lorehouse.duckdb").access_groups()
    assert everyone, "the sample corpus must hold restricted documents for this test to mean much"
    compared = 0
    for groups in ([], everyone):
        for question in questions:
            result = retriever.search(question, TOP_K, mode, caller_groups=groups, rerank=rerank)
            expected = _eager_search(retriever, question, mode, rerank, groups)
            assert [h.chunk_id for h in result.hits] == [c for c, _ in expected], question
            for hit, (_, scores) in zip(result.hits, expected, strict=True):
                # Scores are shown to 6 decimals; numpy and LanceDB sum float32 products in
                # different orders, which can move the 6th decimal of a cosine by one.
                expected_scores = {k: round(v, 6) for k, v in scores.items()}
                assert hit.scores == pytest.approx(expected_scores, abs=2e-6)
            compared += len(result.hits)
    assert compared >= 2 * len(questions) * 5


def test_rows_are_read_for_the_hits_shown_and_what_the_reranker_reads(
    retriever: Retriever, monkeypatch: pytest.MonkeyPatch
) -> None:
    read: list[int] = []
    original = TableSnapshot.rows_by_key

    def counting_rows(
        snapshot: TableSnapshot, keys: list[str], where: str, columns: list[str]
    ) -> dict[str, dict]:
        read.append(len(keys))
        return original(snapshot, keys, where, columns)

    monkeypatch.setattr(TableSnapshot, "rows_by_key", counting_rows)
    question = "How many weeks of parental leave do primary caregivers get?"
    keyword = retriever.search(question, top_k=3, mode="bm25", rerank=NONE)
    # BM25 ranks ids alone: the three rows shown are read, not its 50 candidates.
    assert len(keyword.hits) == 3 and read == [3]
    read.clear()
    plain = retriever.search(question, top_k=3, mode="hybrid", rerank=NONE)
    # The vector search returns its rows; only hits shown that it did not return are read.
    assert len(plain.hits) == 3 and all(limit <= 3 for limit in read)
    assert {"embed", "vector", "bm25", "read"} <= set(plain.timings_ms)
    read.clear()
    reranked = retriever.search(question, top_k=3, mode="hybrid", rerank=MAXSIM)
    assert len(reranked.hits) == 3 and all(limit <= 20 for limit in read)
    assert np.isfinite(reranked.hits[0].scores["maxsim"])


class _CountingEmbedder:
    """The bundled embedder, recording every text it is asked for; fails while `failing`."""

    def __init__(self) -> None:
        self.bundled = default_embedder()
        self.name = self.bundled.name
        self.texts: list[str] = []
        self.failing = False

    def embed(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        self.texts.extend(texts)
        if self.failing:
            raise EmbeddingFailure("the embedding provider is down")
        return self.bundled.embed(texts, batch_size)


def test_a_warmed_retriever_holds_the_vectors_its_first_search_reads(
    materialized_sample: Path, tmp_path: Path
) -> None:
    cold = Retriever(ChunkIndex(str(materialized_sample / "lancedb")), default_embedder())
    assert cold.index.snapshot()._unit_vectors is None
    assert cold.warm()
    loaded = cold.index.snapshot()
    assert loaded._unit_vectors is not None
    first = cold.search("How many weeks of parental leave?")
    # The first caller's search read the table version the warm-up loaded.
    assert cold.index.snapshot() is loaded
    assert first.hits
    # Nothing to warm yet: the server starts, and its searches say what to run.
    assert not Retriever(ChunkIndex(str(tmp_path / "lancedb")), default_embedder()).warm()


def test_a_question_asked_again_is_not_embedded_again(retriever: Retriever) -> None:
    embedder = _CountingEmbedder()
    cached = Retriever(retriever.index, embedder, query_cache_size=8)
    question, other = "How many weeks of parental leave?", "Who approves travel?"
    embedder.failing = True
    degraded = cached.search(question)
    assert degraded.mode == SearchMode.BM25 and degraded.warnings
    embedder.failing = False
    # The failure was not kept: the same question is embedded again, once.
    first = cached.search(question)
    again = cached.search(question)
    cached.search(other)
    assert embedder.texts == [question, question, other]
    assert first.mode == again.mode == SearchMode.HYBRID
    assert [(h.chunk_id, h.scores) for h in again.hits] == [
        (h.chunk_id, h.scores) for h in first.hits
    ]
    assert again.timings_ms["embed"] < first.timings_ms["embed"]


def test_late_interaction_scores_do_not_depend_on_what_the_token_cache_held(
    materialized_sample: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The token store returns cached rows first and rows read from LanceDB after them, and a
    matrix product's last bits can depend on where a passage sits in it: scored in the store's
    order, 2 docs dev questions of 78 ordered two near-tied passages differently when asked a
    second time. Passages go into the product in the candidates' order, whatever was cached."""
    import lorehouse.search.rerankers as rerankers

    products: list[list[bytes]] = []
    original = rerankers.maxsim_of_packed

    def recording(query_tokens: np.ndarray, passages: list, dimension: int) -> list[float]:
        products.append([bytes(packed) for packed in passages])
        return original(query_tokens, passages, dimension)

    monkeypatch.setattr(rerankers, "maxsim_of_packed", recording)
    index = ChunkIndex(str(materialized_sample / "lancedb"))
    rows = index.rows("true", COLUMNS, 20)
    assert len(rows) == 20
    question = "How many weeks of parental leave do primary caregivers get?"
    query_vector = default_embedder().embed([question])[0]

    def maxsim_scores(store: object) -> dict[str, float]:
        reranker = LateInteractionReranker(default_embedder(), store)  # type: ignore[arg-type]
        ranked = reranker.rerank(question, query_vector, [Candidate(dict(r)) for r in rows])
        return {c.chunk_id: c.scores["maxsim"] for c in ranked}

    cold = maxsim_scores(ChunkIndex(str(materialized_sample / "lancedb")).token_vectors())
    primed = ChunkIndex(str(materialized_sample / "lancedb")).token_vectors()
    primed.packed([row["chunk_id"] for row in rows[1::2]])  # every other row cached first
    assert maxsim_scores(primed) == cold
    assert maxsim_scores(primed) == cold  # every row cached now
    assert len(products) == 3 and products[0] == products[1] == products[2]


def test_a_search_without_filters_holds_one_mask_a_caller(materialized_sample: Path) -> None:
    retriever = Retriever(ChunkIndex(str(materialized_sample / "lancedb")), default_embedder())
    for groups in ([], ["hr"], []):
        assert retriever.search("How many weeks of parental leave?", caller_groups=groups).hits
    # The search's where clause and its BM25 scope are the same rows: one mask each caller.
    assert len(retriever.index.snapshot()._masks) == 2
