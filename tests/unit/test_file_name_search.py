"""A file's name is searched: filings name their company and quarter there, not in passages."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from lorehouse.search.ranking import RankingProfile
from lorehouse.search.retriever import Retriever, SearchMode
from lorehouse.search.tables import file_name_words
from lorehouse.stores.lance_index import ChunkIndex, chunk_schema
from tests.conftest import default_embedder

# Two quarters' filings whose passages read alike: only the file name tells them apart.
FILINGS = {
    "a-q1": ("filings/2023 Q1 AAPL.pdf", "Total net sales were $117,154 million."),
    "b-q2": ("filings/2023 Q2 AAPL.pdf", "Total net sales were $94,836 million."),
    "c-msft": ("filings/2023_Q2_MSFT.pdf", "Revenue was $52,857 million."),
}
QUESTION = "What were total net sales in AAPL's Q2 2023 filing?"


@pytest.mark.parametrize(
    ("rel_path", "words"),
    [
        ("filings/PEPSICO_2022_10K.pdf", "PEPSICO 2022 10K"),
        ("2023 Q1 AAPL.pdf", "2023 Q1 AAPL"),
        ("hr/parental-leave.policy.md", "parental leave policy"),
        # An id or a scan number names nothing a question asks for.
        ("scans/00023.pdf", ""),
        ("4983", ""),
        (None, ""),
    ],
)
def test_a_file_name_gives_its_words_and_an_id_none(rel_path: str | None, words: str) -> None:
    assert file_name_words(rel_path) == words


def _index(tmp_path: Path, model: str) -> ChunkIndex:
    schema = chunk_schema(3, model)
    keys = sorted(FILINGS)
    columns = {
        "chunk_id": keys,
        "doc_id": keys,
        "title": ["0000320193-23-000006"] * len(keys),  # metadata titles that are numbers
        "rel_path": [FILINGS[k][0] for k in keys],
        "file_type": ["pdf"] * len(keys),
        "position": [0] * len(keys),
        "acl": [[]] * len(keys),
        "text_chat": [FILINGS[k][1] for k in keys],
        "text_embed": [FILINGS[k][1] for k in keys],
        "embed_key": keys,
        "row_hash": keys,
    }
    vectors = np.eye(3, dtype=np.float32).reshape(-1)
    arrays = [
        pa.FixedSizeListArray.from_arrays(pa.array(vectors), 3)
        if field.name == "vector"
        else pa.array(columns.get(field.name, [None] * len(keys)), type=field.type)
        for field in schema
    ]
    index = ChunkIndex(str(tmp_path / "lance"))
    index.upsert(pa.Table.from_arrays(arrays, schema=schema), [])
    return index


@pytest.mark.parametrize(("file_name_weight", "first"), [(1.0, "b-q2"), (0.0, "a-q1")])
def test_the_quarter_and_ticker_asked_for_find_that_filing(
    tmp_path: Path, file_name_weight: float, first: str
) -> None:
    """Without the file name the two Apple passages tie and the first key wins."""
    embedder = default_embedder()
    retriever = Retriever(
        _index(tmp_path, embedder.name),
        embedder,
        ranking=RankingProfile(file_name_weight=file_name_weight),
    )
    hits = retriever.search(QUESTION, top_k=3, mode=SearchMode.BM25).hits
    ranked = [hit.chunk_id for hit in hits]
    assert ranked[0] == first
    assert "c-msft" not in ranked[:2]
