"""What an embedder is, and which one a setting names: the bundled MiniLM or a litellm model.

Both sides of retrieval (the index build and the query) must use the same model, so the
choice is one setting resolved here, and the model's name travels with the vectors it made.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np
from cachetools import LRUCache


def embed_key(model: str, text: str) -> str:
    """Identifies a vector: the same text under the same model always has the same vector."""
    return hashlib.sha256(f"{model}\x00{text}".encode()).hexdigest()[:32]


LOCAL_EMBED_MODEL = "local"
#: The bundled multilingual model (multilingual-e5-small), for corpora not only in English.
MULTILINGUAL_EMBED_MODEL = "local-multilingual"
#: The models that ship with Lorehouse, both 384-dimensional.
BUNDLED_EMBED_MODELS = (LOCAL_EMBED_MODEL, MULTILINGUAL_EMBED_MODEL)
#: The bundled model that suits the deployment's languages (`model_for_languages`).
AUTO_EMBED_MODEL = "auto"


def model_for_languages(model: str, languages: Sequence[str]) -> str:
    """The model `model` names: AUTO_EMBED_MODEL is MiniLM for English alone, which finds
    English evidence better, and multilingual-e5-small as soon as the documents or questions
    are in another language, which MiniLM cannot read (docs/benchmarks.md, "Retrieval by
    language"). The index records the model this returns, never "auto"."""
    if model != AUTO_EMBED_MODEL:
        return model
    english_only = all(language == "en" for language in languages)
    return LOCAL_EMBED_MODEL if english_only else MULTILINGUAL_EMBED_MODEL


class EmbeddingFailure(RuntimeError):
    """The embedding provider did not return vectors, after retries."""


class Embedder(Protocol):
    """Turns texts into L2-normalized float32 rows, one per text, in order."""

    name: str

    def embed(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray: ...


class VectorCache:
    """The vectors of the last `size` texts embedded through it, by model and text.

    For texts that recur across requests, like the sentences of the passages answers are
    read from: a popular chunk's sentences are embedded once, not on every question that
    retrieves it. Texts repeated within one call are embedded once too. Shared by request
    threads, so its bookkeeping is locked; embedding runs outside the lock.
    """

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"size must be at least 1, got {size}")
        self.size = size
        self._vectors: LRUCache[tuple[str, str], np.ndarray] = LRUCache(size)
        self._lock = threading.Lock()

    def embed(self, embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
        """Row i is the vector of texts[i], from the cache or embedded now."""
        found: dict[str, np.ndarray] = {}
        with self._lock:
            for text in texts:
                key = (embedder.name, text)
                if key in self._vectors:
                    found[text] = self._vectors[key]
        missing = [text for text in dict.fromkeys(texts) if text not in found]
        if missing:
            fresh = embedder.embed(missing)
            with self._lock:
                for text, vector in zip(missing, fresh, strict=True):
                    # A copy: a row of the batch would keep the whole batch's array alive.
                    found[text] = self._vectors[(embedder.name, text)] = vector.copy()
        return np.stack([found[text] for text in texts]) if texts else np.zeros((0, 0), np.float32)


def l2_normalize(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length, so a dot product is the cosine similarity."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.clip(norms, 1e-12, None)).astype(np.float32)


def query_vectors(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """Vectors of what is searched for: an embedder trained with a query side of its own
    (E5's `query: ` prefix) embeds them as queries; any other as it embeds everything."""
    embed_queries = getattr(embedder, "embed_queries", None)
    return embed_queries(texts) if embed_queries is not None else embedder.embed(texts)


def embedder_for(
    model: str,
    local: Callable[[], Embedder],
    api_base: str | None = None,
    max_attempts: int = 3,
    timeout_seconds: float = 60.0,
    multilingual: Callable[[], Embedder] | None = None,
) -> Embedder:
    """The embedder a setting names: 'local' is the bundled MiniLM (`local()`, which the
    composition root configures), 'local-multilingual' the bundled multilingual-e5-small
    (`multilingual()`), anything else litellm's."""
    if model == LOCAL_EMBED_MODEL:
        return local()
    if model == MULTILINGUAL_EMBED_MODEL and multilingual is not None:
        return multilingual()
    from lorehouse.embedding.litellm import LiteLLMEmbedder

    return LiteLLMEmbedder(
        model, api_base=api_base, max_attempts=max_attempts, timeout_seconds=timeout_seconds
    )
