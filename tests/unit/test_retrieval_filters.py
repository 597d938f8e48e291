"""Filters and access control become LanceDB predicates that no value can break out of."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

from lorehouse.search.filters import SearchFilters, access_clause, where_clause
from lorehouse.search.ranking import RankingProfile, reciprocal_rank_fusion
from lorehouse.stores.lance_index import ChunkIndex, chunk_schema


def _index(tmp_path: Path) -> ChunkIndex:
    """Four chunks: public, security-only, hr-only (in German), and a public table on pages
    3-4."""
    rows = [
        ("public", [], False, 1, 1, "doc-a"),
        ("secret", ["security"], False, 2, 2, "doc-b"),
        ("people", ["hr"], False, 1, 1, "doc-c"),
        ("figures", [], True, 3, 4, "doc-a'; DROP"),
    ]
    schema = chunk_schema(4, "test-model")
    vectors = np.eye(4, dtype=np.float32)
    columns = {
        "chunk_id": [r[0] for r in rows],
        "doc_id": [r[5] for r in rows],
        "title": ["t"] * 4,
        "rel_path": ["p"] * 4,
        "source_uri": ["file:///p"] * 4,
        "file_type": ["pdf", "docx", "xlsx", "pdf"],
        "position": [0, 0, 0, 1],
        "heading_path": [["h"]] * 4,
        "page_start": [r[3] for r in rows],
        "page_end": [r[4] for r in rows],
        "is_table": [r[2] for r in rows],
        "language": ["en", "en", "de", "en"],
        "acl": [r[1] for r in rows],
        "text_chat": [f"text about {r[0]}" for r in rows],
        "text_embed": [f"text about {r[0]}" for r in rows],
        "text_enriched": ["" for _ in rows],
        "embed_key": [r[0] for r in rows],
        "row_hash": [r[0] for r in rows],
    }
    arrays = {k: pa.array(v, type=schema.field(k).type) for k, v in columns.items()}
    arrays["vector"] = pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), 4)
    index = ChunkIndex(str(tmp_path / "lance"))
    index.upsert(pa.table(arrays, schema=schema), [])
    index.refresh_indexes()
    return index


def _ids(index: ChunkIndex, where: str) -> set[str]:
    return {row["chunk_id"] for row in index.rows(where, ["chunk_id"], 100)}


def test_access_clause_shows_public_and_shared_groups_only(tmp_path: Path) -> None:
    index = _index(tmp_path)
    assert _ids(index, access_clause([])) == {"public", "figures"}
    assert _ids(index, access_clause(["security"])) == {"public", "figures", "secret"}
    assert _ids(index, access_clause(["hr", "security"])) == {
        "public",
        "figures",
        "secret",
        "people",
    }


def test_hostile_group_names_and_ids_cannot_widen_access(tmp_path: Path) -> None:
    index = _index(tmp_path)
    assert _ids(index, access_clause(["x') OR true OR ('"])) == {"public", "figures"}
    injected = where_clause(SearchFilters(doc_ids=["doc-a' OR '1'='1"]), [])
    assert _ids(index, injected) == set()
    quoted = where_clause(SearchFilters(doc_ids=["doc-a'; DROP"]), [])
    assert _ids(index, quoted) == {"figures"}


def test_page_range_overlap_type_table_and_language_filters(tmp_path: Path) -> None:
    index = _index(tmp_path)
    groups = ["security", "hr"]
    assert _ids(index, where_clause(SearchFilters(page_from=4), groups)) == {"figures"}
    assert _ids(index, where_clause(SearchFilters(page_to=1), groups)) == {"public", "people"}
    assert _ids(index, where_clause(SearchFilters(page_from=2, page_to=3), groups)) == {
        "secret",
        "figures",
    }
    assert _ids(index, where_clause(SearchFilters(file_types=["xlsx"]), groups)) == {"people"}
    assert _ids(index, where_clause(SearchFilters(is_table=True), groups)) == {"figures"}
    assert _ids(index, where_clause(SearchFilters(languages=["de"]), groups)) == {"people"}
    assert _ids(index, where_clause(SearchFilters(languages=["de') OR ('1'='1"]), groups)) == set()


def test_reciprocal_rank_fusion_rewards_agreement() -> None:
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["b", "c", "a"]])
    assert max(fused, key=fused.__getitem__) == "b"
    assert fused["b"] == 1 / 62 + 1 / 61
    assert reciprocal_rank_fusion([["only"]]) == {"only": 1 / 61}


def test_weighted_fusion_lets_the_stronger_ranking_decide_a_disagreement() -> None:
    """Hybrid search weighs BM25 below the vector ranking: where the two disagree on the
    first place, the vector ranking's first stays first."""
    vector, bm25 = ["meaning", "words"], ["words", "meaning"]
    plain = reciprocal_rank_fusion([vector, bm25])
    assert plain["meaning"] == plain["words"]
    weighted = reciprocal_rank_fusion([vector, bm25], weights=[1.0, 0.6])
    assert weighted["meaning"] == 1 / 61 + 0.6 / 62
    assert max(weighted, key=weighted.__getitem__) == "meaning"


def test_the_fusion_constant_decides_between_a_first_hit_and_a_middling_agreement() -> None:
    """A paraphrase's answer is often the vector search's first hit and absent from BM25's
    50; at the classic k = 60 a chunk both legs rank 15th outscores it; at k = 10 the first hit
    stays ahead (the evaluation CLI measures other constants this way)."""
    from lorehouse.models import SearchMode
    from lorehouse.search.retriever import Retriever
    from lorehouse.settings import Settings
    from lorehouse.wiring import Lorehouse

    middling = [f"filler-{n}" for n in range(14)]
    vector = [("paraphrase-answer", 0.71), *((c, 0.5) for c in middling), ("both-15th", 0.4)]
    bm25 = [*((c, 9.0) for c in reversed(middling)), ("both-15th", 3.0)]

    def first_stage(retriever: Retriever) -> list[str]:
        order = retriever._first_stage_order(SearchMode.HYBRID, [vector, bm25])
        return [c.chunk_id for c in order]

    wiring = Lorehouse(Settings())
    classic = first_stage(wiring.retriever())
    assert classic.index("both-15th") < classic.index("paraphrase-answer")
    sharper = first_stage(
        Retriever(wiring.chunk_index(), wiring.embedder(), ranking=RankingProfile(rrf_k=10))
    )
    assert sharper.index("paraphrase-answer") < sharper.index("both-15th")
