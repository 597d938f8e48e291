"""Sentence windows of documents without pages, written while other chunks' windows are
already stored: what a rerun after an interrupted build, or a document added to a built
corpus, writes next to the windows it keeps."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from lorehouse.stages.embed import (
    EmbedReport,
    _arrow_rows,
    index_rows,
    sentence_rows,
    sync_sentences,
)
from lorehouse.stores.lance_index import ChunkIndex, StoredRow, sentence_schema

MODEL = "hashed-test-model"
SENTENCES = [
    "The office opens at eight in the morning on weekdays.",
    "Desks are shared and booked through the facilities app.",
    "Lunch is catered on Tuesdays and Thursdays for everyone on site.",
    "Visitors sign in at reception and wear a badge at all times.",
    "When you travel for work the hotel limit is 250 dollars per night.",
]


class _HashedEmbedder:
    """Deterministic unit vectors from a hash of each text: the stage's bookkeeping is what
    is tested here, not the model."""

    name = MODEL
    dimension = 8

    def embed(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        rows = [
            np.frombuffer(hashlib.sha256(text.encode()).digest()[:8], np.uint8) for text in texts
        ]
        matrix = np.array(rows, np.float32).reshape(-1, self.dimension) + 1
        return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def _chunks(names: Sequence[str], pages: int | None = None) -> pd.DataFrame:
    """Index rows of one long Markdown chunk per document (no pages unless `pages`)."""
    text = " ".join(SENTENCES)
    frame = pd.DataFrame(
        [
            {
                "chunk_id": f"{name}-0",
                "doc_id": name,
                "title": name.title(),
                "rel_path": f"{name}.md",
                "source_uri": f"file:///{name}.md",
                "file_type": "md",
                "position": 0,
                "heading_path": [f"Office life in {name}"],
                "page_start": pages,
                "page_end": pages,
                "is_table": False,
                "language": "en",
                "acl": [],
                "text_chat": f"Office life in {name}\n\n{text}",
                "text_embed": f"Office life in {name}\n{text}",
                "summary": None,
                "faqs": [],
                "keywords": [],
            }
            for name in names
        ]
    )
    return index_rows(frame, MODEL)


def _sync(index: ChunkIndex, chunks: pd.DataFrame) -> EmbedReport:
    report = EmbedReport(model=MODEL, dimension=_HashedEmbedder.dimension)
    sync_sentences(index, chunks, _HashedEmbedder(), 8, report)
    return report


def test_windows_of_new_chunks_beside_stored_ones_keep_pages_empty(tmp_path: Path) -> None:
    """A rerun keeps the windows an interrupted run stored (listed by key and hashes only)
    and cuts the rest: the new windows are written with no page, as the first ones were."""
    index = ChunkIndex(str(tmp_path / "lance"))
    first = _sync(index, _chunks(["alpha"]))
    assert first.sentences_embedded == first.sentences > 0

    rerun = _sync(index, _chunks(["alpha", "beta"]))
    assert rerun.sentences == 2 * first.sentences
    assert rerun.sentences_embedded == first.sentences  # beta's windows only
    stored = index.sentences().table().to_arrow()
    assert set(stored["doc_id"].to_pylist()) == {"alpha", "beta"}
    assert stored["page_start"].null_count == stored["page_end"].null_count == stored.num_rows


def test_a_page_number_beside_stored_windows_stays_an_integer(tmp_path: Path) -> None:
    index = ChunkIndex(str(tmp_path / "lance"))
    _sync(index, _chunks(["alpha"]))
    _sync(index, pd.concat([_chunks(["alpha"]), _chunks(["beta"], pages=7)], ignore_index=True))
    stored = index.sentences().table().to_arrow().to_pylist()
    assert {(row["doc_id"], row["page_start"]) for row in stored} == {
        ("alpha", None),
        ("beta", 7),
    }


def test_rows_kept_by_key_and_new_rows_convert_to_arrow_with_null_pages() -> None:
    """The frame a rerun builds: kept windows carry only their keys and hashes, new windows
    every column; the new rows' missing pages must reach Arrow as nulls."""
    stored = {
        row["sentence_id"]: StoredRow(row["embed_key"], row["row_hash"], row["doc_id"])
        for row in sentence_rows(_chunks(["alpha"]), MODEL).to_dict("records")
    }
    rows = sentence_rows(_chunks(["alpha", "beta"]), MODEL, stored)
    new = rows[~rows["sentence_id"].isin(list(stored))]
    assert len(new) == len(stored)
    vectors = dict.fromkeys(new["embed_key"], np.ones(8, np.float32))
    arrow = _arrow_rows(new, vectors, sentence_schema(8, MODEL))
    assert arrow["page_start"].to_pylist() == [None] * len(new)
    assert arrow["is_table"].to_pylist() == [False] * len(new)
