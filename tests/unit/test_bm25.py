"""BM25 scored over the rows a caller may see: hidden rows move nothing a caller can observe."""

from __future__ import annotations

import numpy as np
import pytest

from lorehouse.search.bm25 import (
    SNOWBALL_LANGUAGES,
    Analyzer,
    BM25Index,
    FieldPostings,
    TextAnalyzer,
    analyzer_of,
)
from lorehouse.settings import STEMMED_LANGUAGES

PUBLIC = {
    "p1": "Primary caregivers get 20 weeks of parental leave.",
    "p2": "Hotel stays are reimbursed up to 250 EUR per night.",
    "p3": "The on-call engineer acknowledges pages within 15 minutes.",
}
HIDDEN = {
    "h1": "Parental leave budget for the reorganisation, parental leave costs.",
    "h2": "Leave balances of the security team.",
}


def _index(texts: dict[str, str], analyzer: TextAnalyzer | None = None) -> BM25Index:
    keys = sorted(texts)
    return BM25Index.build(keys, {"text": [texts[k] for k in keys]}, analyzer or Analyzer())


def _search(index: BM25Index, query: str, visible: set[str], allowed: set[str] | None = None):
    return index.search(
        query,
        {"text": 1.0},
        index.mask(visible),
        index.mask(allowed if allowed is not None else visible),
        limit=10,
    )


def test_hidden_rows_sharing_words_change_no_visible_score_or_order() -> None:
    alone = _index(PUBLIC)
    with_hidden = _index({**PUBLIC, **HIDDEN})
    for query in ("parental leave", "leave", "caregivers weeks hotel night", "pages"):
        assert _search(with_hidden, query, set(PUBLIC)) == _search(alone, query, set(PUBLIC))
    # Control: a caller who sees the hidden rows gets other weights for the same chunk.
    everyone = dict(_search(with_hidden, "parental leave", set(PUBLIC) | set(HIDDEN)))
    public_only = dict(_search(alone, "parental leave", set(PUBLIC)))
    assert everyone["p1"] != public_only["p1"]
    assert "h1" in everyone


def test_callers_taking_turns_each_get_their_own_scope_statistics() -> None:
    """One index serves callers of many groups in turn: each gets the scores of an index
    built for their rows alone, also after more scopes than are kept have passed."""
    scopes = [set(PUBLIC), set(PUBLIC) | set(HIDDEN), set(PUBLIC) | {"h1"}]
    scopes += [{key} for key in [*PUBLIC, *HIDDEN]] + [{"p1", "h2"}]  # more than are kept
    assert len(scopes) > BM25Index.SCOPES_KEPT
    shared = _index({**PUBLIC, **HIDDEN})
    for visible in [*scopes, *reversed(scopes), scopes[0]]:
        alone = _index({key: text for key, text in {**PUBLIC, **HIDDEN}.items() if key in visible})
        for query in ("parental leave", "leave night pages"):
            assert _search(shared, query, visible) == _search(alone, query, visible)


def test_words_are_stemmed_folded_and_stop_words_ignored() -> None:
    index = _index({**PUBLIC, "p4": "Le café est fermé."})
    assert [key for key, _ in _search(index, "caregiver", set(PUBLIC))] == ["p1"]
    assert [key for key, _ in _search(index, "cafe", {"p4"})] == ["p4"]
    assert _search(index, "the of and", set(PUBLIC)) == []


def test_a_filter_narrows_results_without_reweighting_terms() -> None:
    index = _index(PUBLIC)
    scoped = dict(_search(index, "leave night", set(PUBLIC)))
    narrowed = _search(index, "leave night", set(PUBLIC), allowed={"p2"})
    assert narrowed == [("p2", scoped["p2"])]


def test_equal_scores_come_back_in_key_order_at_every_cut() -> None:
    texts = {f"k{i:02d}": "expense report" for i in range(12)}
    index = _index(texts)
    everything = np.ones(len(texts), dtype=bool)
    for limit in (1, 5, 12):
        found = index.search("expense", {"text": 1.0}, everything, everything, limit)
        assert [key for key, _ in found] == sorted(texts)[:limit]


def test_a_field_counts_by_its_weight() -> None:
    keys = ["a", "b"]
    columns = {"text": ["hotel limits per night", "desk setup budget"], "title": ["Travel", ""]}
    index = BM25Index.build(keys, columns, Analyzer())
    everything = np.ones(2, dtype=bool)

    def score(weights: dict[str, float]) -> dict[str, float]:
        return dict(index.search("travel hotel", weights, everything, everything, 10))

    full, half = score({"text": 1.0, "title": 1.0}), score({"text": 1.0, "title": 0.5})
    text_only = score({"text": 1.0, "title": 0.0})
    assert full["a"] > half["a"] > text_only["a"] > 0
    assert full["a"] - text_only["a"] == pytest.approx(2 * (half["a"] - text_only["a"]))


def test_question_words_weigh_less_than_the_subject_they_ask_about() -> None:
    # An FAQ-style passage shares the question's phrasing; the answer shares its subject.
    texts = {
        "faq": "How do I get a new badge? How do I get my desk? Ask your manager how.",
        "answer": "Replacement laptops are ordered by IT within two days.",
        "other": "Laptops are not for personal use.",
    }
    index = _index(texts)
    everything = np.ones(len(texts), dtype=bool)

    def ranked(weight: float) -> list[str]:
        found = index.search(
            "How do I get my replacement laptop?",
            {"text": 1.0},
            everything,
            everything,
            10,
            question_word_weight=weight,
        )
        return [key for key, _ in found]

    assert ranked(1.0)[0] == "faq"
    assert ranked(0.25)[0] == "answer"
    # At 0 the question words match nothing; the passage of questions alone drops out.
    assert "faq" not in ranked(0.0)
    # A query of question words only still finds what shares them at a weight above 0.
    assert index.search("how do I", {"text": 1.0}, everything, everything, 10, 0.25)
    # Content words are never question words: "US", "May" and "AM" stay searchable.
    assert not {"us", "may", "am"} & Analyzer().question_terms


def test_a_phrase_is_mentioned_only_by_rows_the_caller_may_see() -> None:
    index = _index(
        {**PUBLIC, "p4": "Guests use the WiFi network.", **HIDDEN, "h3": "The Cloudflare token."}
    )
    public = index.mask(PUBLIC.keys() | {"p4"})
    assert index.mentions("parental leave", public)
    # Written as one word in the text: "Wi-Fi" finds "WiFi".
    assert index.mentions("Wi-Fi", public)
    # Both words in one row: "on-call" is p3's, "hotel" p2's.
    assert not index.mentions("hotel-call", public)
    # Only a hidden row holds it: unmentioned for this caller, mentioned for one who sees it.
    assert not index.mentions("Cloudflare", public)
    assert index.mentions("Cloudflare", index.mask(["h3"]))
    # Stop words alone name nothing, so nothing is declined for them.
    assert index.mentions("IT", public)


GERMAN = {
    "d1": "Sicherheitsaktualisierungen werden mit unattended-upgrades automatisch eingespielt.",
    "d2": "Die Paketquellen stehen in der Datei /etc/apt/sources.list.",
    "d3": "Ein Kernel wird beim Booten von GRUB geladen.",
}
ENGLISH = {
    "e1": "Security updates are installed automatically by unattended-upgrades.",
    "e2": "The package sources are listed in /etc/apt/sources.list.",
}


def test_each_text_and_question_is_stemmed_in_its_own_language() -> None:
    german = analyzer_of(("de",))
    assert german.terms("Die Pakete") == german.terms("das Paket") == ["pak"]
    index = _index({**GERMAN, **ENGLISH}, analyzer_of(("de", "en")))
    everyone = set(GERMAN) | set(ENGLISH)
    # A German question in another inflection finds the German passage; an English one the
    # English passage; the English stemmer alone would not reduce "Paketquelle" and "stehen".
    assert _search(index, "In welcher Datei steht die Paketquelle?", everyone)[0][0] == "d2"
    assert _search(index, "Which file lists the package sources?", everyone)[0][0] == "e2"
    assert _search(_index(GERMAN), "Paketquelle", set(GERMAN)) == []  # English stems only


def test_a_row_is_read_in_the_language_its_chunk_recorded() -> None:
    """A command line too short to tell reads as the document it came from, not as the
    deployment's first language."""
    analyzer = analyzer_of(("en", "de"))
    line = "apt-get installiert Pakete"
    assert analyzer.terms(line, "de") == analyzer_of(("de",)).terms(line)
    assert analyzer.terms(line, "de") != analyzer.terms(line)  # told alone: English
    postings = FieldPostings.build([line, line], analyzer, ["de", None])
    assert postings.term_rows("pak") is not None and postings.term_rows("pak").tolist() == [0]


def test_german_question_words_never_outweigh_what_is_asked_about() -> None:
    analyzer = analyzer_of(("de", "en"))
    asked = set(analyzer.terms("Wie kann ich welche Pakete installieren?"))
    assert asked - analyzer.question_terms == set(analyzer.terms("Pakete installieren"))


def test_the_settings_languages_are_those_bm25_stems() -> None:
    assert set(STEMMED_LANGUAGES) == set(SNOWBALL_LANGUAGES)
    with pytest.raises(ValueError, match="no stemmer"):
        Analyzer("xx")
