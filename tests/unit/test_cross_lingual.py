"""A question in a language almost none of the caller's passages are in: hybrid search leaves
BM25 out (it could match only the terms both languages share) and says so, unless an LLM
translates the question for it; a question in the corpus's own language, and any question in
a one-language deployment, keeps both legs."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from lorehouse.agents.translation import QuestionTranslator, literals
from lorehouse.embedding.minilm import OnnxMiniLMEmbedder
from lorehouse.llm import LLMClient
from lorehouse.models import PUBLIC_GROUP
from lorehouse.search.bm25 import analyzer_of
from lorehouse.search.ranking import RankingProfile
from lorehouse.search.retriever import Retriever, TranslationFailure
from lorehouse.settings import Settings
from lorehouse.stages.embed import EmbedReport, keyed_rows, sync_table
from lorehouse.stores.lance_index import ChunkIndex, chunk_schema
from lorehouse.wiring import Lorehouse
from tests.conftest import default_embedder

#: Eleven German passages and one English one: English is under a tenth of the corpus.
GERMAN = [
    "Mit apt-get install installieren Sie ein Paket aus den Paketquellen.",
    "Die Paketquellen stehen in der Datei /etc/apt/sources.list.",
    "Der Kernel wird beim Systemstart vom Bootloader GRUB geladen.",
    "Sicherheitsaktualisierungen installiert unattended-upgrades automatisch.",
    "Mit dpkg -l listen Sie alle installierten Pakete auf.",
    "Die Zeitzone stellen Sie mit timedatectl ein.",
    "Benutzer legen Sie mit adduser an.",
    "Das Netzwerk konfiguriert NetworkManager oder ifupdown.",
    "Protokolle liest journalctl aus dem systemd-Journal.",
    "Dienste starten Sie mit systemctl start neu.",
    "Festplatten binden Sie über /etc/fstab ein.",
]
ENGLISH = ["The office opens at eight in the morning on weekdays."]


def _index(tmp_path: Path, embedder: OnnxMiniLMEmbedder, languages: tuple[str, ...]) -> ChunkIndex:
    texts = [(text, "de") for text in GERMAN] + [(text, "en") for text in ENGLISH]
    count = len(texts)
    frame = pd.DataFrame(
        {
            "chunk_id": [f"c{n}" for n in range(count)],
            "doc_id": [f"d{n}" for n in range(count)],
            "title": [None] * count,
            "rel_path": [f"notes-{n}.md" for n in range(count)],
            "source_uri": [f"file:///notes-{n}.md" for n in range(count)],
            "file_type": "md",
            "position": pd.Series([0] * count, dtype="int32"),
            "heading_path": [[] for _ in range(count)],
            "page_start": [None] * count,
            "page_end": [None] * count,
            "is_table": False,
            "language": [language for _, language in texts],
            "acl": [[PUBLIC_GROUP] for _ in range(count)],
            "text_chat": [text for text, _ in texts],
            "text_embed": [text for text, _ in texts],
            "text_enriched": "",
        }
    )
    index = ChunkIndex(str(tmp_path / "lance"), analyzer=analyzer_of(languages))
    report = EmbedReport(model=embedder.name, dimension=embedder.dimension)
    sync_table(
        index,
        keyed_rows(frame, "text_embed", embedder.name),
        "text_embed",
        chunk_schema,
        embedder,
        16,
        report,
    )
    return index


@pytest.fixture(scope="module")
def embedder() -> OnnxMiniLMEmbedder:
    return default_embedder()


def test_an_english_question_over_german_passages_is_searched_by_meaning_alone(
    tmp_path: Path, embedder: OnnxMiniLMEmbedder
) -> None:
    retriever = Retriever(_index(tmp_path, embedder, ("de", "en")), embedder)
    snapshot = retriever.index.snapshot()
    assert snapshot.language_share("en", None) == pytest.approx(1 / 12)
    assert snapshot.language_share("en", None) < RankingProfile.cross_lingual_share
    english = retriever.search("Which file lists the package sources?", rerank="none")
    assert english.mode == "vector"
    assert any("left out" in warning and "(en)" in warning for warning in english.warnings)
    assert all("bm25" not in hit.scores for hit in english.hits)
    german = retriever.search("In welcher Datei stehen die Paketquellen?", rerank="none")
    assert german.mode == "hybrid" and not german.warnings
    assert any("bm25" in hit.scores for hit in german.hits)


def test_a_one_language_deployment_always_keeps_both_legs(
    tmp_path: Path, embedder: OnnxMiniLMEmbedder
) -> None:
    retriever = Retriever(_index(tmp_path, embedder, ("en",)), embedder)
    result = retriever.search("Which file lists the package sources?", rerank="none")
    assert result.mode == "hybrid" and not result.warnings


def _translator(reply: object) -> QuestionTranslator:
    return QuestionTranslator(
        LLMClient("openai/gpt-4o-mini", backoff_seconds=0, call_options={"mock_response": reply})
    )


def test_with_an_llm_bm25_ranks_the_question_translated_into_the_passages_language(
    tmp_path: Path, embedder: OnnxMiniLMEmbedder
) -> None:
    translation = "Wie stelle ich die Zeitzone ein?"
    translator = _translator(f'{{"translation": "{translation}"}}')
    retriever = Retriever(_index(tmp_path, embedder, ("de", "en")), embedder, translator=translator)
    # No word of the question is in any German passage: only the translation can match.
    result = retriever.search("How do I set the time zone?", rerank="none")
    assert result.mode == "hybrid" and not result.warnings
    assert result.translations == {"de": translation}
    assert result.hits[0].chunk_id == "c5"
    assert result.hits[0].text_chat.startswith("Die Zeitzone")
    assert "bm25" in result.hits[0].scores
    # Asked again, the kept translation is used: one LLM call in all.
    retriever.search("How do I set the time zone?", rerank="none")
    assert translator.client.usage.calls == 1
    # A German question needs no translation.
    german = retriever.search("In welcher Datei stehen die Paketquellen?", rerank="none")
    assert german.translations == {} and translator.client.usage.calls == 1


def test_a_translation_that_fails_or_drops_a_literal_leaves_bm25_out_and_says_why(
    tmp_path: Path, embedder: OnnxMiniLMEmbedder
) -> None:
    index = _index(tmp_path, embedder, ("de", "en"))
    dropped = _translator('{"translation": "Wo stehen die Einhängepunkte?"}')
    retriever = Retriever(index, embedder, translator=dropped)
    result = retriever.search("What does /etc/fstab hold?", rerank="none")
    assert result.mode == "vector" and result.translations == {}
    assert any("dropped /etc/fstab" in warning for warning in result.warnings)
    assert any("left out" in warning for warning in result.warnings)

    failing = _translator("not json at all")
    retriever = Retriever(index, embedder, translator=failing)
    result = retriever.search("Which file lists the package sources?", rerank="none")
    assert result.mode == "vector"
    assert any("not translated" in warning for warning in result.warnings)
    assert failing.client.usage.failures == 1


def test_literals_are_what_a_translation_must_keep() -> None:
    assert literals("Which version follows 2.9-3 on keyring.debian.org, e.g. in /tmp?") == [
        "2.9-3",
        "keyring.debian.org",
        "/tmp",
    ]
    assert literals("Does zip take -r or --symlinks for control@bugs.debian.org?") == [
        "-r",
        "--symlinks",
        "control@bugs.debian.org",
    ]
    with pytest.raises(TranslationFailure, match="no language"):
        _translator('{"translation": "x"}')("What is this?", "xx")


def test_a_deployment_translates_with_its_llm_only_when_one_is_set(tmp_path: Path) -> None:
    def translator(**values: object) -> object:
        settings = Settings(data_dir=tmp_path, **values)  # type: ignore[arg-type]
        return Lorehouse(settings).retriever().translator

    assert translator() is None
    assert isinstance(translator(llm_model="openai/gpt-4o-mini"), QuestionTranslator)
    assert translator(llm_model="openai/gpt-4o-mini", search_translate_questions=False) is None


def test_a_scope_that_matches_no_passage_counts_as_no_other_language(
    tmp_path: Path, embedder: OnnxMiniLMEmbedder
) -> None:
    """A caller who may read nothing is not told that the passages are in another language:
    only a scope holding passages can be cross-lingual."""
    snapshot = Retriever(_index(tmp_path, embedder, ("de", "en")), embedder).index.snapshot()
    assert snapshot.language_shares("false") == {}
    assert snapshot.language_share("en", "false") == 1.0
    assert snapshot.main_language("false") is None
    assert snapshot.main_language(None) == "de"
