"""Embeddings from a hosted provider (OpenAI, Bedrock, Cohere, Ollama...) through litellm."""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from lorehouse.embedding.base import EmbeddingFailure, l2_normalize
from lorehouse.retry import backoff_seconds


class LiteLLMEmbedder:
    """Embeddings from a hosted provider through litellm (OpenAI, Bedrock, Cohere, Ollama...).

    Providers differ in whether they normalize, so every vector is normalized here; that keeps
    cosine, dot product and LanceDB's distances consistent whatever the provider.
    """

    def __init__(
        self,
        model: str,
        api_base: str | None = None,
        max_attempts: int = 3,
        timeout_seconds: float = 60.0,
        backoff_seconds: float = 1.0,
    ) -> None:
        self.name = model
        self.api_base = api_base
        self.max_attempts = max_attempts
        self.timeout_seconds = timeout_seconds
        self.backoff_seconds = backoff_seconds

    def embed(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        """Vectors for `texts` in order, `batch_size` texts per provider call."""
        if isinstance(texts, str):
            raise TypeError("expected a sequence of strings, got a single str")
        rows: list[np.ndarray] = []
        for start in range(0, len(texts), batch_size):
            rows.append(self._embed_batch(list(texts[start : start + batch_size])))
        if not rows:
            return np.empty((0, 0), dtype=np.float32)
        return l2_normalize(np.vstack(rows))

    def _embed_batch(self, batch: list[str]) -> np.ndarray:
        from lorehouse.llm import litellm_module, provider_error, transient_errors

        litellm = litellm_module()

        last_error: Exception | None = None
        for attempt in range(1, self.max_attempts + 1):
            try:
                response = litellm.embedding(
                    model=self.name,
                    input=batch,
                    api_base=self.api_base,
                    timeout=self.timeout_seconds,
                    max_retries=0,  # this loop is the one retry layer (see LLMClient._request)
                )
                ordered = sorted(response.data, key=lambda item: _field(item, "index"))
                vectors = np.asarray([_field(item, "embedding") for item in ordered], np.float32)
                if vectors.ndim != 2 or len(vectors) != len(batch):
                    raise EmbeddingFailure(
                        f"{self.name} returned {len(vectors)} vectors for {len(batch)} texts"
                    )
                return vectors
            except transient_errors() as error:
                last_error = error
                if attempt < self.max_attempts:
                    time.sleep(backoff_seconds(attempt, self.backoff_seconds))
            # Auth, bad request, unknown model: retrying will not help. litellm's provider
            # errors all derive from openai's.
            except provider_error() as error:
                raise EmbeddingFailure(f"{self.name}: {type(error).__name__}: {error}") from error
        raise EmbeddingFailure(f"{self.name}: {type(last_error).__name__}: {last_error}")


def _field(item: object, name: str) -> object:
    return item[name] if isinstance(item, dict) else getattr(item, name)
