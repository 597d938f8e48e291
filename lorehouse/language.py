"""Which language a text is in: documents, chunks and questions, with py3langid.

py3langid (a maintained fork of langid.py) ships its model in the wheel, needs nothing else
and tells a paragraph's language in well under a millisecond. Its guess is restricted to the
deployment's languages (`LOREHOUSE_LANGUAGES`): among all 97 it knows, a short English
question scores barely above chance and a command line reads as Czech, while between the
few a corpus holds the same texts are told apart with confidence.

A text too short or too unsure to tell (a heading, a command, a table of numbers) takes the
language of what holds it: a chunk its document's, a document the deployment's first.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from functools import lru_cache

#: Letters a text needs before its language is guessed: fewer say nothing reliable.
MIN_LETTERS = 12
#: The probability, among the deployment's languages, below which the fallback is kept.
MIN_CONFIDENCE = 0.8
#: Characters read of a long text: a document's first pages tell its language.
SAMPLE_CHARS = 4000


class LanguageDetector:
    """Guesses among `languages` (ISO 639-1 codes); `languages[0]` is the fallback."""

    def __init__(self, languages: Sequence[str]) -> None:
        if not languages:
            raise ValueError("name at least one language")
        self.languages = tuple(languages)
        # The identifier keeps working buffers: calls from request threads take turns.
        self._lock = threading.Lock()
        if len(self.languages) == 1:
            # Nothing to tell: the model, slow to load and loaded again in every step's
            # process (each partition's chunking among them), is not loaded at all.
            return
        from py3langid.langid import MODEL_FILE, LanguageIdentifier

        self._identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
        unknown = sorted(set(self.languages) - set(self._identifier.nb_classes))
        if unknown:
            raise ValueError(f"py3langid does not know the languages {', '.join(unknown)}")
        self._identifier.set_languages(list(self.languages))

    def detect(self, text: str | None, fallback: str | None = None) -> str:
        """The language of `text`, or `fallback` (the first language when None) when the text
        is too short or too unsure to tell."""
        default = fallback or self.languages[0]
        if len(self.languages) == 1 or not text:
            return default
        sample = text[:SAMPLE_CHARS]
        if sum(char.isalpha() for char in sample) < MIN_LETTERS:
            return default
        with self._lock:
            language, probability = self._identifier.classify(sample)
        return language if probability >= MIN_CONFIDENCE else default


@lru_cache(maxsize=8)
def shared_detector(languages: tuple[str, ...]) -> LanguageDetector:
    """One detector per set of languages and process (its model takes a second to load)."""
    return LanguageDetector(languages)
