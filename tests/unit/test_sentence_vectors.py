"""Sentence-window vectors: a question about one sentence of a long chunk finds that chunk."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from lorehouse.embedding.minilm import OnnxMiniLMEmbedder
from lorehouse.search.retriever import Retriever
from lorehouse.stages import embed as embed_stage
from lorehouse.stages.embed import (
    EmbedReport,
    keyed_rows,
    sentence_windows,
    sync_sentences,
    sync_table,
)
from lorehouse.stores.lance_index import ChunkIndex, chunk_schema
from tests.conftest import default_embedder

# A long chunk about office life where one sentence states the hotel limit, and a short chunk
# about hotel bookings that is closer to a hotel question than the long chunk's average.
OFFICE = [
    "The office opens at eight in the morning on weekdays.",
    "Desks are shared and booked through the facilities app.",
    "Lunch is catered on Tuesdays and Thursdays for everyone on site.",
    "Visitors sign in at reception and wear a badge at all times.",
    "When you travel for work the hotel limit is 250 dollars per night.",
    "Printers are on every floor next to the kitchens.",
    "Bicycles are parked in the basement garage.",
    "Quiet rooms can be used for focused work without a booking.",
]
HOTELS = (
    "Hotel nights are booked through the travel desk. "
    "Your manager approves each night of a hotel stay."
)


def _rows(model: str, acl_office: list[str]) -> pd.DataFrame:
    chunks = [
        ("office", "doc-office", ["Office life"], " ".join(OFFICE), acl_office),
        ("hotels", "doc-hotels", ["Hotels"], HOTELS, []),
        ("holidays", "doc-holidays", ["Holidays"], "Holidays follow the local calendar.", []),
    ]
    frame = pd.DataFrame(
        {
            "chunk_id": [c[0] for c in chunks],
            "doc_id": [c[1] for c in chunks],
            "title": [c[2][0] for c in chunks],
            # File names that name nothing, so only the passages decide (a file's name is
            # searched too: tests/unit/test_file_name_search.py).
            "rel_path": [f"notes-{n}.md" for n in range(len(chunks))],
            "source_uri": [f"file:///notes-{n}.md" for n in range(len(chunks))],
            "file_type": "md",
            "position": pd.Series([0, 0, 0], dtype="int32"),
            "heading_path": [c[2] for c in chunks],
            "page_start": [None] * 3,
            "page_end": [None] * 3,
            "is_table": False,
            "language": "en",
            "acl": [c[4] for c in chunks],
            "text_chat": [f"{c[2][0]}\n\n{c[3]}" for c in chunks],
            "text_embed": [f"{c[2][0]}\n{c[3]}" for c in chunks],
            "text_enriched": "",
        }
    )
    return keyed_rows(frame, "text_embed", model)


def _index(tmp_path: Path, embedder: OnnxMiniLMEmbedder, acl_office: list[str]) -> ChunkIndex:
    index = ChunkIndex(str(tmp_path / "lance"))
    report = _sync(index, embedder, acl_office)
    assert report.sentences == 4  # the office chunk's 8 sentences in windows of 2
    return index


def _sync(index: ChunkIndex, embedder: OnnxMiniLMEmbedder, acl_office: list[str]) -> EmbedReport:
    """Brings the chunk and sentence-window tables in line with `_rows`."""
    rows = _rows(embedder.name, acl_office)
    report = EmbedReport(model=embedder.name, dimension=embedder.dimension)
    sync_table(index, rows, "text_embed", chunk_schema, embedder, 8, report)
    sync_sentences(index, rows, embedder, 8, report)
    return report


def _count_cuts(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The chunk texts the embedding stage cuts into windows from now on."""
    cut: list[str] = []
    monkeypatch.setattr(
        embed_stage,
        "sentence_windows",
        lambda text, heading: cut.append(text) or sentence_windows(text, heading),
    )
    return cut


@pytest.fixture(scope="module")
def embedder() -> OnnxMiniLMEmbedder:
    return default_embedder()


def test_windows_hold_the_heading_and_two_sentences_each() -> None:
    text = "Travel > Hotels\n" + " ".join(OFFICE[:5])
    windows = sentence_windows(text, "Travel > Hotels")
    assert windows == [
        f"Travel > Hotels\n{OFFICE[0]} {OFFICE[1]}",
        f"Travel > Hotels\n{OFFICE[2]} {OFFICE[3]}",
        f"Travel > Hotels\n{OFFICE[4]}",
    ]
    # Sentences that fit in one window add nothing to the chunk's own vector.
    assert sentence_windows("Travel\nOne short rule. And a second one here.", "Travel") == []


def test_a_question_about_one_sentence_ranks_its_long_chunk_first(
    tmp_path: Path, embedder: OnnxMiniLMEmbedder
) -> None:
    index = _index(tmp_path, embedder, acl_office=[])
    question = "What is the hotel limit per night?"
    retriever = Retriever(index, embedder)
    hits = retriever.search(question, top_k=3, mode="vector").hits
    assert hits[0].chunk_id == "office"
    # Scored by its closest window, not by the average of everything the chunk says.
    chunk_only = index.snapshot().vector_search(
        embedder.embed([question])[0], None, 3, ["chunk_id"]
    )
    assert chunk_only[0]["chunk_id"] == "hotels"
    own = next(1 - r["_distance"] for r in chunk_only if r["chunk_id"] == "office")
    assert hits[0].scores["vector"] > own


def test_a_restricted_chunk_found_by_its_sentence_stays_hidden_from_outsiders(
    tmp_path: Path, embedder: OnnxMiniLMEmbedder
) -> None:
    index = _index(tmp_path, embedder, acl_office=["finance"])
    retriever = Retriever(index, embedder)
    question = "What is the hotel limit per night?"
    for mode in ("vector", "hybrid"):
        outsider = retriever.search(question, top_k=8, mode=mode).hits
        assert "office" not in {hit.chunk_id for hit in outsider}
        insider = retriever.search(question, top_k=8, mode=mode, caller_groups=["finance"])
        assert insider.hits[0].chunk_id == "office"


def test_a_rerun_cuts_no_windows_of_unchanged_chunks(
    tmp_path: Path, embedder: OnnxMiniLMEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cutting windows is what a run with nothing to do spent most on; a chunk whose stored
    windows were cut from what it holds now keeps them without being cut again."""
    index = _index(tmp_path, embedder, acl_office=[])
    before = index.sentences().stored_keys()
    cut = _count_cuts(monkeypatch)
    report = _sync(index, embedder, acl_office=[])
    # Only the two chunks too short for windows are looked at again.
    assert len(cut) == 2 and not any(OFFICE[0] in text for text in cut)
    assert report.sentences == 4 and report.sentences_embedded == 0
    assert index.sentences().stored_keys() == before


def test_a_chunk_given_to_a_group_moves_its_windows_with_it_without_embedding(
    tmp_path: Path, embedder: OnnxMiniLMEmbedder
) -> None:
    """The windows copy their chunk's access list: restricting a public chunk whose text did
    not change rewrites its windows under the new list, from the vectors already stored."""
    index = _index(tmp_path, embedder, acl_office=[])
    report = _sync(index, embedder, acl_office=["finance"])
    assert report.sentences_embedded == 0
    windows = index.sentences().table().to_arrow().to_pylist()
    assert {tuple(w["acl"]) for w in windows if w["chunk_id"] == "office"} == {("finance",)}
    outsider = Retriever(index, embedder).search("What is the hotel limit per night?", top_k=8)
    assert "office" not in {hit.chunk_id for hit in outsider.hits}


def test_a_new_way_of_cutting_windows_cuts_every_chunk_again(
    tmp_path: Path, embedder: OnnxMiniLMEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = _index(tmp_path, embedder, acl_office=[])
    first = {row.row_hash for row in index.sentences().stored_keys().values()}
    monkeypatch.setattr(embed_stage, "WINDOWS_VERSION", "next")
    cut = _count_cuts(monkeypatch)
    report = _sync(index, embedder, acl_office=[])
    assert len(cut) == 3
    # Same windows, same text: rewritten under the new hash, nothing embedded.
    assert report.sentences == 4 and report.sentences_embedded == 0
    hashes = {row.row_hash for row in index.sentences().stored_keys().values()}
    assert len(hashes) == 1 and hashes != first


def test_with_windows_off_none_are_cut_and_the_stored_ones_go(
    tmp_path: Path, embedder: OnnxMiniLMEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`index_sentence_windows=false` saves the windows' model pass; the windows an earlier
    build stored leave the index at the next run, and a chunk is then ranked by its own
    vector alone."""
    index = _index(tmp_path, embedder, acl_office=[])
    cut = _count_cuts(monkeypatch)
    report = EmbedReport(model=embedder.name, dimension=embedder.dimension)
    sync_sentences(index, _rows(embedder.name, []), embedder, 8, report, windows=False)
    assert cut == [] and report.sentences_embedded == 0
    assert index.sentences().stored_keys() == {}
    hits = Retriever(index, embedder).search("What is the hotel limit per night?", top_k=3)
    assert hits.hits[0].chunk_id == "hotels"

    fresh = ChunkIndex(str(tmp_path / "fresh"))
    rows = _rows(embedder.name, [])
    sync_table(fresh, rows, "text_embed", chunk_schema, embedder, 8, report)
    sync_sentences(fresh, rows, embedder, 8, report, windows=False)
    assert not fresh.sentences().exists()
