"""litellm embeddings over real HTTP: order, batching, normalization and failures."""

from __future__ import annotations

import socket

import numpy as np
import pytest

from lorehouse.embedding.base import EmbeddingFailure, embedder_for
from lorehouse.embedding.litellm import LiteLLMEmbedder
from tests.conftest import default_embedder
from tests.provider_server import hashed_vector, provider_server


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local-test")


def test_vectors_come_back_in_order_normalized_across_batches() -> None:
    texts = [f"sentence number {i}" for i in range(7)]
    with provider_server(dimension=8) as server:
        embedder = LiteLLMEmbedder("openai/test-embedding", api_base=server.base_url)
        vectors = embedder.embed(texts, batch_size=3)
    assert vectors.shape == (7, 8) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    for text, vector in zip(texts, vectors, strict=True):
        expected = np.asarray(hashed_vector(text, 8))
        assert np.allclose(vector, expected / np.linalg.norm(expected), atol=1e-5)
    assert server.texts_embedded == texts  # three calls of 3, 3 and 1 texts, nothing repeated


def test_an_unreachable_provider_fails_clearly_after_retries() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    embedder = LiteLLMEmbedder(
        "openai/test-embedding",
        api_base=f"http://127.0.0.1:{port}/v1",
        max_attempts=2,
        timeout_seconds=5,
    )
    embedder.backoff_seconds = 0.01
    with pytest.raises(EmbeddingFailure, match="openai/test-embedding"):
        embedder.embed(["hello"])


def test_local_names_the_bundled_model() -> None:
    assert embedder_for("local", default_embedder) is default_embedder()
    hosted = embedder_for("openai/text-embedding-3-small", default_embedder)
    assert hosted.name == "openai/text-embedding-3-small"
