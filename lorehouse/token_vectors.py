"""Token vectors stored for late interaction: int8 components with one float32 scale a token.

Late interaction (MaxSim) compares every query token with every token of a passage, so it
needs each passage's token vectors. Encoding 30 passages at query time cost about 1.5 s on 2
cores; storing them at index time makes the rerank a read of 30 rows and a few matrix
products. Stored as float32 they would take 1.5 KB a token; quantized to int8 with a per-token
scale they take 388 bytes and change no MaxSim ranking measured (BENCHMARKS.md, "Retrieval
quality").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

#: Suffix of the stored model name: a change of packing rebuilds the table, like a new model.
PACKING = "tokens-int8"
_SCALE_BYTES = 4


class TokenEncoder(Protocol):
    """What late interaction needs of an encoder: per text, its tokens' unit vectors."""

    name: str
    dimension: int

    def token_vectors(self, texts: Sequence[str], batch_size: int = 32) -> list[np.ndarray]: ...


def pack(tokens: np.ndarray) -> np.ndarray:
    """A (tokens x dimension) float matrix as bytes: the scales, then the int8 components.

    Each token is scaled so its largest component is 127: rounding then costs at most half a
    step in every component, relative to that token's own range.
    """
    tokens = np.asarray(tokens, dtype=np.float32)
    scales = np.abs(tokens).max(axis=1) / 127.0 if len(tokens) else np.zeros(0, np.float32)
    safe = np.where(scales > 0, scales, 1.0).astype(np.float32)
    components = np.round(tokens / safe[:, np.newaxis]).astype(np.int8)
    return np.frombuffer(safe.tobytes() + components.tobytes(), dtype=np.uint8)


def unpack(packed: np.ndarray, dimension: int) -> np.ndarray:
    """The float32 matrix `pack` stored (each token within half a step of the original)."""
    raw = np.asarray(packed, dtype=np.uint8)
    count, remainder = divmod(len(raw), dimension + _SCALE_BYTES)
    if remainder:
        raise ValueError(f"{len(raw)} bytes are not whole tokens of {dimension} dimensions")
    scales = raw[: count * _SCALE_BYTES].view(np.float32)
    components = raw[count * _SCALE_BYTES :].view(np.int8).reshape(count, dimension)
    return components.astype(np.float32) * scales[:, np.newaxis]


class PackedTokenEncoder:
    """An encoder's token vectors in the `Embedder` shape the embedding stage syncs tables with.

    Each "vector" is one text's packed tokens, so the token table gets what the chunk tables
    get: only new text is encoded, a run killed halfway keeps what it wrote, and a new model
    (or packing) rebuilds the table in one commit.
    """

    def __init__(self, encoder: TokenEncoder) -> None:
        self.encoder = encoder
        self.name = f"{encoder.name}/{PACKING}"
        self.dimension = encoder.dimension

    def embed(self, texts: Sequence[str], batch_size: int = 32) -> list[np.ndarray]:
        return [pack(tokens) for tokens in self.encoder.token_vectors(texts, batch_size)]
