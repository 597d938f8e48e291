"""What an embedder is, and which one a setting names: the bundled MiniLM or a litellm model.

Both sides of retrieval (the index build and the query) must use the same model, so the
choice is one setting resolved here, and the model's name travels with the vectors it made.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

LOCAL_EMBED_MODEL = "local"


class EmbeddingFailure(RuntimeError):
    """The embedding provider did not return vectors, after retries."""


class Embedder(Protocol):
    """Turns texts into L2-normalized float32 rows, one per text, in order."""

    name: str

    def embed(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray: ...


def l2_normalize(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length, so a dot product is the cosine similarity."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.clip(norms, 1e-12, None)).astype(np.float32)


def embedder_for(
    model: str, api_base: str | None = None, max_attempts: int = 3, timeout_seconds: float = 60.0
) -> Embedder:
    """The embedder a setting names: 'local' is the bundled MiniLM, anything else litellm's."""
    if model == LOCAL_EMBED_MODEL:
        from lorehouse.embedding.minilm import default_embedder

        return default_embedder()
    from lorehouse.embedding.litellm import LiteLLMEmbedder

    return LiteLLMEmbedder(
        model, api_base=api_base, max_attempts=max_attempts, timeout_seconds=timeout_seconds
    )
