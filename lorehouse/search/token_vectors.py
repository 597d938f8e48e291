"""Token vectors stored for late interaction: one sign bit a component.

Late interaction (MaxSim) compares every query token with every token of a passage, so it
needs each passage's token vectors. Encoding the candidates at query time runs the model over
every one of them, which costs far more than the rest of a search; storing them at index time
makes the rerank a read of its candidates' rows and a few matrix products.

What is stored per token is the sign of each component (48 bytes at 384 dimensions, against
1.5 KB as float32 and 388 as int8 with a scale), and the query's tokens stay float: the score
of a passage token is the query token's dot product with the sign vector scaled to unit
length. Why bits: the reranker fuses MaxSim's order by rank, and the signs keep a unit
vector's direction well enough to keep that order, while int8 made token vectors most of an
index's bytes (figures in docs/benchmarks.md, Storage per document and Retrieval quality).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

#: Suffix of the stored model name: a change of packing rebuilds the table, like a new model.
PACKING = "tokens-sign-bits"
# Tokens converted to floats at once in maxsim_of_packed: 512 x 384 floats are 768 KB, within
# a core's 1 MB cache. A multiple of 64, so blocks fall on the matrix kernel's tile edges.
_BLOCK_TOKENS = 512
#: Packed tokens kept from the chunk-embedding pass for the token table (about 23,000 chunks
#: of 230 tokens); beyond it the rest are encoded again rather than held in memory.
CAPTURE_LIMIT_BYTES = 256 * 1024 * 1024


def packed_model_name(encoder_name: str) -> str:
    """The model name the token table is stored under: the encoder's, with its packing."""
    return f"{encoder_name}/{PACKING}"


class TokenEncoder(Protocol):
    """What late interaction needs of an encoder: per text, its tokens' unit vectors."""

    name: str
    dimension: int

    def token_vectors(self, texts: Sequence[str], batch_size: int = 32) -> list[np.ndarray]: ...


def pack(tokens: np.ndarray) -> np.ndarray:
    """A (tokens x dimension) float matrix as bytes: each component's sign, eight a byte.

    No scale is kept: the encoder's token vectors are unit vectors, and a sign vector scaled
    to unit length is the one closest to them in direction whatever their norm was.
    """
    tokens = np.asarray(tokens, dtype=np.float32)
    if tokens.ndim != 2 or tokens.shape[1] % 8:
        raise ValueError(f"token vectors of shape {tokens.shape} do not pack into whole bytes")
    return np.packbits(tokens > 0, axis=1).reshape(-1)


def unpack(packed: np.ndarray, dimension: int) -> np.ndarray:
    """The unit-length sign vectors `pack` stored, as a float32 (tokens x dimension) matrix."""
    bits = split_packed(packed, dimension)
    signs = np.unpackbits(bits, axis=1, count=dimension).astype(np.float32) * 2.0 - 1.0
    return signs / np.float32(np.sqrt(dimension))


def split_packed(packed: np.ndarray, dimension: int) -> np.ndarray:
    """The sign bits as a (tokens x dimension / 8) uint8 matrix: a view of the bytes."""
    raw = np.asarray(packed, dtype=np.uint8)
    width = dimension // 8
    count, remainder = divmod(len(raw), width)
    if remainder or dimension % 8:
        raise ValueError(f"{len(raw)} bytes are not whole tokens of {dimension} dimensions")
    return raw.reshape(count, width)


def maxsim_of_packed(
    query_tokens: np.ndarray, passages: Sequence[np.ndarray], dimension: int
) -> list[float]:
    """MaxSim of the query with each packed passage: the mean over query tokens of the best
    dot product with a passage token's unit sign vector (0 for a passage without tokens).

    All passages' tokens stacked into one matrix: the reranker's 20 passages of ~150 tokens
    cost a few block products instead of twenty. With bits b in {0, 1}, a sign vector is
    2b - 1, so the product is taken of the bits and corrected once per query token
    (2 b.q - sum(q)), which spares a pass over the block. The product is taken as passage
    tokens x query tokens: OpenBLAS computes a tall matrix times a narrow one faster than the
    same numbers the other way round. It runs in blocks of 512 tokens (see `_token_blocks`),
    so a block's float copy stays in the core's own cache instead of streaming through the
    cache both cores share.
    """
    split = [split_packed(packed, dimension) for packed in passages]
    counts = np.array([len(bits) for bits in split], dtype=np.int64)
    scores = [0.0] * len(passages)
    # A query of nothing the tokenizer keeps (control characters) has no tokens to match.
    if not counts.sum() or not len(query_tokens):
        return scores
    bits = np.concatenate(split)
    query = np.asarray(query_tokens, dtype=np.float32).T
    similarity = np.empty((len(bits), query.shape[1]), dtype=np.float32)
    for start, end in _token_blocks(len(bits), query.shape[1]):
        block = np.unpackbits(bits[start:end], axis=1, count=dimension).astype(np.float32)
        np.matmul(block, query, out=similarity[start:end])
    similarity *= np.float32(2.0)
    similarity -= query.sum(axis=0)
    similarity *= np.float32(1.0 / np.sqrt(dimension))
    filled = np.flatnonzero(counts)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])[filled]
    best = np.maximum.reduceat(similarity, starts, axis=0).mean(axis=1)
    for passage, value in zip(filled.tolist(), best.tolist(), strict=True):
        scores[passage] = float(value)
    return scores


def _token_blocks(tokens: int, query_tokens: int) -> list[tuple[int, int]]:
    """(start, end) of blocks of _BLOCK_TOKENS rows, the last one taking the remainder.

    OpenBLAS computes a product with few rows by another kernel, which rounds differently; a
    short last block would move late-interaction scores in the last bit. Blocks of at least
    _BLOCK_TOKENS rows, starting at its multiples, keep every row on the kernel one product of
    all the rows uses. Which kernels OpenBLAS picks depends on the CPU: on some, every score
    then has the bits of one product; on others a score can still differ from it in the last
    bit (float32 rounding), never more. A query of 2 tokens goes through a kernel whose
    rounding depends on the rows, so it keeps one product (an eighth of the work of 16
    tokens).
    """
    if query_tokens == 2:
        return [(0, tokens)]
    starts = list(range(0, tokens, _BLOCK_TOKENS))
    if len(starts) > 1 and tokens - starts[-1] < _BLOCK_TOKENS:
        starts.pop()
    return list(zip(starts, [*starts[1:], tokens], strict=True))


class PackedTokenEncoder:
    """An encoder's token vectors in the `Embedder` shape the embedding stage syncs tables with.

    Each "vector" is one text's packed tokens, so the token table gets what the chunk tables
    get: only new text is encoded, a run killed halfway keeps what it wrote, and a new model
    (or packing) rebuilds the table in one commit. Texts found in `captured` (packed by the
    chunk-embedding pass, see `CapturingEmbedder`) are not encoded again.
    """

    def __init__(
        self, encoder: TokenEncoder, captured: dict[str, np.ndarray] | None = None
    ) -> None:
        self.encoder = encoder
        self.name = packed_model_name(encoder.name)
        self.dimension = encoder.dimension
        self.captured = captured or {}

    def embed(self, texts: Sequence[str], batch_size: int = 32) -> list[np.ndarray]:
        missing = [text for text in dict.fromkeys(texts) if text not in self.captured]
        encoded = self.encoder.token_vectors(missing, batch_size) if missing else []
        fresh = dict(zip(missing, (pack(tokens) for tokens in encoded), strict=True))
        return [fresh[text] if text in fresh else self.captured[text] for text in texts]


class JointEncoder(TokenEncoder, Protocol):
    """An encoder that gives a text's sentence vector and token vectors from one pass."""

    def embed_with_token_vectors(
        self, texts: Sequence[str], batch_size: int = 32
    ) -> tuple[np.ndarray, list[np.ndarray]]: ...


class CapturingEmbedder:
    """The bundled embedder for chunk vectors, keeping each text's packed token vectors from
    the same pass (up to CAPTURE_LIMIT_BYTES) for the token table."""

    def __init__(self, embedder: JointEncoder, limit_bytes: int = CAPTURE_LIMIT_BYTES) -> None:
        self.embedder = embedder
        self.name = embedder.name
        self.dimension = embedder.dimension
        self.limit_bytes = limit_bytes
        self.captured: dict[str, np.ndarray] = {}
        self._captured_bytes = 0

    def embed(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        vectors, tokens = self.embedder.embed_with_token_vectors(texts, batch_size)
        for text, matrix in zip(texts, tokens, strict=True):
            if self._captured_bytes >= self.limit_bytes:
                break
            self.captured[text] = packed = pack(matrix)
            self._captured_bytes += packed.nbytes
        return vectors
