"""Language detection: documents, chunks and questions among the deployment's languages."""

from __future__ import annotations

import pytest

from lorehouse.language import LanguageDetector, shared_detector

GERMAN = "Die Konfigurationsdatei der Paketquellen liegt unter /etc/apt/sources.list."
ENGLISH = "How do I make sure that a package is not upgraded by mistake?"


def test_german_and_english_texts_are_told_apart() -> None:
    detector = shared_detector(("en", "de"))
    assert detector.detect(GERMAN) == "de"
    assert detector.detect(ENGLISH) == "en"
    assert detector.detect("Wie verhindere ich, dass ein Paket aktualisiert wird?") == "de"


def test_a_text_too_short_or_unsure_keeps_the_language_of_what_holds_it() -> None:
    detector = shared_detector(("en", "de"))
    assert detector.detect("apt-get -y", fallback="de") == "de"
    assert detector.detect("", fallback="de") == "de"
    assert detector.detect(None) == "en"  # the deployment's first language
    assert detector.detect("| 1 | 2 | 3 |", fallback="de") == "de"


def test_one_language_needs_no_guess_and_an_unknown_code_is_refused() -> None:
    assert LanguageDetector(["de"]).detect(ENGLISH) == "de"
    with pytest.raises(ValueError, match="does not know the languages xx"):
        LanguageDetector(["en", "xx"])
