"""Stored token vectors: late interaction reads them instead of encoding its candidates."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from lorehouse.embedding.minilm import OnnxMiniLMEmbedder
from lorehouse.search.rerankers import Candidate, LateInteractionReranker
from lorehouse.search.token_vectors import (
    CapturingEmbedder,
    PackedTokenEncoder,
    maxsim_of_packed,
    pack,
    unpack,
)
from lorehouse.stages.embed import EmbedReport, keyed_rows, sync_table, sync_token_vectors
from lorehouse.stores.lance_index import ChunkIndex, chunk_schema
from tests.conftest import default_embedder
from tests.unit.test_sentence_vectors import _rows

QUESTION = "What is the hotel limit per night?"


class CountingEncoder:
    """The bundled encoder, counting the texts it is asked to encode."""

    def __init__(self, encoder: OnnxMiniLMEmbedder) -> None:
        self.encoder = encoder
        self.name = encoder.name
        self.dimension = encoder.dimension
        self.encoded: list[str] = []

    def token_vectors(self, texts: Sequence[str], batch_size: int = 32) -> list[np.ndarray]:
        self.encoded.extend(texts)
        return self.encoder.token_vectors(texts, batch_size)


@pytest.fixture(scope="module")
def embedder() -> OnnxMiniLMEmbedder:
    return default_embedder()


def _index(tmp_path: Path, embedder: OnnxMiniLMEmbedder) -> tuple[ChunkIndex, EmbedReport]:
    index = ChunkIndex(str(tmp_path / "lance"))
    rows = _rows(embedder.name, acl_office=[])
    report = EmbedReport(model=embedder.name, dimension=embedder.dimension)
    sync_table(index, rows, "text_embed", chunk_schema, embedder, 8, report)
    sync_token_vectors(index, rows, embedder, 8, report)
    return index, report


def _candidates(index: ChunkIndex) -> list[Candidate]:
    rows = index.rows("true", ["chunk_id", "text_embed", "text_chat"], 10)
    return [Candidate(row=row) for row in sorted(rows, key=lambda row: row["chunk_id"])]


def _best_match(ranked: list[Candidate]) -> str:
    """The passage late interaction scores highest (the fused order also weighs the first
    stage's, which these hand-made candidate lists do not have)."""
    return max(ranked, key=lambda candidate: candidate.scores["maxsim"]).chunk_id


def test_packing_keeps_each_tokens_signs_in_an_eighth_of_int8s_bytes() -> None:
    rng = np.random.default_rng(7)
    tokens = rng.normal(size=(40, 384)).astype(np.float32)
    tokens /= np.linalg.norm(tokens, axis=1, keepdims=True)
    packed = pack(tokens)
    assert packed.nbytes == 40 * 384 // 8  # a bit a component: 48 bytes a token
    restored = unpack(packed, 384)
    assert np.array_equal(np.sign(restored), np.where(tokens > 0, 1.0, -1.0))
    assert np.allclose(np.linalg.norm(restored, axis=1), 1.0)
    # A unit sign vector keeps the direction: about 0.8 of cosine for random directions.
    assert np.min(np.sum(restored * tokens, axis=1)) > 0.7
    assert unpack(pack(np.zeros((0, 384), np.float32)), 384).shape == (0, 384)
    with pytest.raises(ValueError, match="not whole tokens"):
        unpack(packed[:-1], 384)
    with pytest.raises(ValueError, match="whole bytes"):
        pack(np.ones((2, 383), np.float32))


def test_maxsim_of_packed_passages_scores_each_passage_as_its_own_tokens_would() -> None:
    rng = np.random.default_rng(3)

    def unit(rows: int) -> np.ndarray:
        tokens = rng.normal(size=(rows, 384)).astype(np.float32)
        return tokens / np.linalg.norm(tokens, axis=1, keepdims=True)

    query = unit(9)
    passages = [pack(unit(rows)) for rows in (30, 0, 1, 120, 0)]
    scores = maxsim_of_packed(query, passages, 384)
    for packed, score in zip(passages, scores, strict=True):
        tokens = unpack(packed, 384)
        expected = float((query @ tokens.T).max(axis=1).mean()) if len(tokens) else 0.0
        assert score == pytest.approx(expected, abs=1e-6)
    assert scores[1] == scores[4] == 0.0
    assert maxsim_of_packed(query, [passages[1]], 384) == [0.0]


@pytest.mark.parametrize("query_tokens", [1, 2, 3, 16, 40])
def test_maxsim_over_many_passages_is_one_product_of_all_their_tokens(
    query_tokens: int,
) -> None:
    """The passages are multiplied a block at a time; every score must still be the one a
    single product gives, within float32 rounding (to the bit on CPUs whose BLAS kernel does
    not depend on the number of rows), so the blocks move no ranking."""
    rng = np.random.default_rng(query_tokens)
    query = rng.normal(size=(query_tokens, 384)).astype(np.float32)
    sizes = [int(n) for n in rng.integers(0, 260, 23)]  # about 3,000 tokens: several blocks
    sizes.append((5 - sum(sizes)) % 512)  # and 5 tokens past the last whole block
    passages = [pack(rng.normal(size=(n, 384))) for n in sizes]
    scores = maxsim_of_packed(query, passages, 384)

    tokens = np.concatenate([unpack(packed, 384) for packed in passages])
    similarity = tokens @ query.T
    starts = np.cumsum([0, *sizes[:-1]])
    for size, start, score in zip(sizes, starts, scores, strict=True):
        expected = similarity[start : start + size].max(axis=0).mean() if size else 0.0
        assert score == pytest.approx(float(expected), rel=1e-6, abs=1e-6)


def test_a_query_of_nothing_the_tokenizer_keeps_scores_zero_not_nan(
    tmp_path: Path, embedder: OnnxMiniLMEmbedder
) -> None:
    """Control characters alone ("\\x9d\\x81") leave no query tokens: every passage scores 0,
    stored or encoded, and no NaN reaches a response (JSON has no NaN; it came out as null)."""
    index, _ = _index(tmp_path, embedder)
    control = "\x9d\x81\x90"
    assert len(embedder.token_vectors([control])[0]) == 0
    assert maxsim_of_packed(np.zeros((0, 384), np.float32), [pack(np.ones((2, 384)))], 384) == [0.0]
    for reranker in (
        LateInteractionReranker(embedder, index.token_vectors()),
        LateInteractionReranker(embedder),
    ):
        ranked = reranker.rerank(control, np.zeros(0), _candidates(index))
        assert [c.scores["maxsim"] for c in ranked] == [0.0] * len(ranked)


def test_stored_tokens_rank_as_encoding_would_without_encoding_a_passage(
    tmp_path: Path, embedder: OnnxMiniLMEmbedder
) -> None:
    index, report = _index(tmp_path, embedder)
    assert report.token_vectors == report.token_vectors_embedded == 3
    counting = CountingEncoder(embedder)
    stored = LateInteractionReranker(counting, index.token_vectors())
    ranked = stored.rerank(QUESTION, np.zeros(0), _candidates(index))
    assert counting.encoded == [QUESTION]  # the passages were read, not encoded
    fresh = LateInteractionReranker(embedder).rerank(QUESTION, np.zeros(0), _candidates(index))
    assert [c.chunk_id for c in ranked] == [c.chunk_id for c in fresh]
    assert _best_match(ranked) == "office"
    for mine, theirs in zip(ranked, fresh, strict=True):
        assert mine.scores["maxsim"] == pytest.approx(theirs.scores["maxsim"], abs=0.01)

    again = EmbedReport(model=embedder.name, dimension=embedder.dimension)
    sync_token_vectors(index, _rows(embedder.name, acl_office=[]), embedder, 8, again)
    assert again.token_vectors_embedded == 0


def test_packed_tokens_are_written_uncompressed_and_older_tables_still_take_rows(
    tmp_path: Path, embedder: OnnxMiniLMEmbedder
) -> None:
    """A new token table stores its packed vectors as they are; a table written before that
    (compressed) keeps working: a row it lost is written back and read as before."""
    index, _ = _index(tmp_path, embedder)
    tokens = index.token_vectors()
    assert tokens.table().schema.field("vector").metadata == {
        b"lance-encoding:compression": b"none"
    }
    written = tokens.packed(["hotels", "office"])

    older = tokens.table().to_arrow()
    schema = pa.schema(
        [field.remove_metadata() for field in older.schema], metadata=older.schema.metadata
    )
    tokens.replace_all(older.cast(schema))
    tokens.delete_keys(["hotels"])
    again = EmbedReport(model=embedder.name, dimension=embedder.dimension)
    sync_token_vectors(index, _rows(embedder.name, acl_office=[]), embedder, 8, again)
    assert again.token_vectors_embedded == 1
    assert tokens.table().schema.field("vector").metadata is None
    read = ChunkIndex(str(tmp_path / "lance")).token_vectors().packed(["hotels", "office"])
    assert {key: (embed_key, bytes(packed)) for key, (embed_key, packed) in read.items()} == {
        key: (embed_key, bytes(packed)) for key, (embed_key, packed) in written.items()
    }


def test_a_passage_whose_text_changed_since_its_tokens_were_stored_is_encoded_again(
    tmp_path: Path, embedder: OnnxMiniLMEmbedder
) -> None:
    index, _ = _index(tmp_path, embedder)
    candidates = _candidates(index)
    edited = next(c for c in candidates if c.chunk_id == "hotels")
    edited.row["text_embed"] = "Hotels\nThe hotel limit is 250 dollars per night."
    counting = CountingEncoder(embedder)
    ranked = LateInteractionReranker(counting, index.token_vectors()).rerank(
        QUESTION, np.zeros(0), candidates
    )
    assert counting.encoded == [QUESTION, edited.row["text_embed"]]
    assert _best_match(ranked) == "hotels"


def test_token_rows_kept_from_a_read_are_not_served_once_the_table_has_changed(
    tmp_path: Path, embedder: OnnxMiniLMEmbedder
) -> None:
    index, _ = _index(tmp_path, embedder)
    store = index.token_vectors()
    first = store.packed(["hotels", "holidays", "gone"])
    assert set(first) == {"hotels", "holidays"}
    assert store.packed(["hotels"])["hotels"][0] == first["hotels"][0]  # kept, same row
    # The embedding stage re-embeds an edited passage: the next read sees the new row.
    rows = _rows(embedder.name, acl_office=[])
    rows.loc[rows["chunk_id"] == "hotels", "text_embed"] = "Hotels\nThe limit is 250 dollars."
    rows = keyed_rows(rows.drop(columns=["embed_key", "row_hash"]), "text_embed", embedder.name)
    report = EmbedReport(model=embedder.name, dimension=embedder.dimension)
    sync_token_vectors(index, rows, embedder, 8, report)
    assert report.token_vectors_embedded == 1
    edited = next(c for c in _candidates(index) if c.chunk_id == "hotels")
    edited.row["text_embed"] = rows.loc[rows["chunk_id"] == "hotels", "text_embed"].item()
    counting = CountingEncoder(embedder)
    LateInteractionReranker(counting, store).rerank(QUESTION, np.zeros(0), [edited])
    assert counting.encoded == [QUESTION]  # the new stored row, not the kept one or encoding


def test_an_index_without_a_token_table_falls_back_to_encoding(
    tmp_path: Path, embedder: OnnxMiniLMEmbedder
) -> None:
    index = ChunkIndex(str(tmp_path / "lance"))
    report = EmbedReport(model=embedder.name, dimension=embedder.dimension)
    sync_table(index, _rows(embedder.name, []), "text_embed", chunk_schema, embedder, 8, report)
    assert not index.token_vectors().exists()
    counting = CountingEncoder(embedder)
    ranked = LateInteractionReranker(counting, index.token_vectors()).rerank(
        QUESTION, np.zeros(0), _candidates(index)
    )
    assert len(counting.encoded) == 4 and _best_match(ranked) == "office"


def test_the_chunk_pass_hands_its_token_vectors_to_the_token_table(
    embedder: OnnxMiniLMEmbedder,
) -> None:
    texts = ["Hotels\nThe hotel limit is 250 dollars per night.", "Holidays follow the calendar."]
    capturing = CapturingEmbedder(embedder)
    assert np.allclose(capturing.embed(texts, 8), embedder.embed(texts, 8), atol=1e-6)
    counting = CountingEncoder(embedder)
    packed = PackedTokenEncoder(counting, capturing.captured).embed([*texts, "A new text."], 8)
    assert counting.encoded == ["A new text."]  # the captured ones are not encoded again
    for text, stored in zip(texts, packed, strict=False):
        # Encoded alone rather than in a batch, a component near 0 may change sign.
        alone = pack(embedder.token_vectors([text])[0])
        assert np.mean(np.unpackbits(stored) == np.unpackbits(alone)) > 0.99
    # Past its memory limit the pass keeps nothing more; those texts are encoded later.
    limited = CapturingEmbedder(embedder, limit_bytes=0)
    limited.embed(texts, 8)
    assert limited.captured == {}
