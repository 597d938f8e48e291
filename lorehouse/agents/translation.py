"""Question translation for the keyword leg of a cross-lingual search.

An English question over German passages shares only names and commands with them, so a
hybrid search without a translator leaves BM25 out (lorehouse/search/retriever.py). With an
LLM configured, BM25 ranks the question translated into the language most of the caller's
passages are in, and the vector leg keeps the question as asked: a multilingual model matches
its meaning, and a translation's mistakes cost only the keyword leg.
"""

from __future__ import annotations

import re
from functools import lru_cache

from pydantic import BaseModel, Field

from lorehouse.llm import LLMClient, LLMFailure
from lorehouse.search.bm25 import SNOWBALL_LANGUAGES
from lorehouse.search.retriever import TranslationFailure

PROMPT_VERSION = "question_translation.v1"

#: What a translation must carry over verbatim: words with a digit, a path, an address, a
#: dotted name or an option ("2.9-3", "/etc/fstab", "control@bugs.debian.org", "-r"). They
#: are what BM25 matches across languages; a translation without them drifted.
_LITERAL = re.compile(r"(?<!\w)(?:[\w.+-]*[\d/@.][\w./@+:-]*\w|-{1,2}\w[\w-]*)")


class Translation(BaseModel):
    """The model's reply; the bound keeps a rambling model out of the keyword leg."""

    translation: str = Field(min_length=1, max_length=1000)


class QuestionTranslator:
    """The retriever's `QueryTranslator` on the deployment's LLM.

    One call per question and language, kept (`cache_size` of them): a question asked again,
    or searched once per ask and whole, is not translated twice.
    """

    def __init__(self, client: LLMClient, cache_size: int = 1024) -> None:
        self.client = client
        self._translate = lru_cache(maxsize=cache_size)(self._call)

    def __call__(self, question: str, language: str) -> str:
        """`question` in `language` (ISO 639-1); TranslationFailure when the LLM gives no
        usable translation."""
        return self._translate(question, language)

    def _call(self, question: str, language: str) -> str:
        name = SNOWBALL_LANGUAGES.get(language)
        if name is None:
            raise TranslationFailure(f"no language named {language!r}")
        try:
            answer = self.client.complete(
                self.client.prompt(PROMPT_VERSION),
                Translation,
                language=name.capitalize(),
                question=question,
            )
        except LLMFailure as error:
            raise TranslationFailure(str(error)) from error
        translation = answer.value.translation.strip()
        dropped = [word for word in literals(question) if word not in translation]
        if dropped:
            raise TranslationFailure(f"the translation dropped {', '.join(dropped)}")
        return translation


def literals(question: str) -> list[str]:
    """The words of `question` a translation must keep as written (see _LITERAL)."""
    words = (match.group(0).rstrip(".") for match in _LITERAL.finditer(question))
    return list(dict.fromkeys(word for word in words if _literal(word)))


def _literal(word: str) -> bool:
    """Whether `word` is a name rather than an abbreviation: "e.g" is translated ("z. B.")."""
    if word.startswith("-") or any(c.isdigit() or c in "/@" for c in word):
        return True
    return all(len(part) >= 2 for part in word.split("."))
