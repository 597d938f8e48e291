"""The answers Lorehouse writes itself, in the asker's language: "not found" and the note
before the closest passages.

An extractive answer quotes the documents in their own language; what Lorehouse says around
the quotes follows the question's, so a German question gets a German "not found" whatever
the documents' language. The replies exist in English and German; a question in another
language, or one too short to tell, gets English.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from lorehouse.language import shared_detector

ReplyLanguage = Literal["en", "de"]
#: The languages the replies are written in, English first (the fallback).
REPLY_LANGUAGES: tuple[ReplyLanguage, ...] = ("en", "de")

NOT_FOUND = {
    "en": "The documents available to you do not answer this question, so I will not guess.",
    "de": "Die Dokumente, die Sie lesen dürfen, beantworten diese Frage nicht, darum rate ich "
    "nicht.",
}
PASSAGES_ONLY = {
    "en": "The documents don't state this directly. The closest passages:",
    "de": "Die Dokumente sagen das nicht direkt. Die nächstliegenden Stellen:",
}


def reply_language(question: str) -> ReplyLanguage:
    """The language a reply to `question` is written in."""
    language = shared_detector(REPLY_LANGUAGES).detect(question)
    return "de" if language == "de" else "en"


def not_found(question: str) -> str:
    return NOT_FOUND[reply_language(question)]


def passages_only(question: str) -> str:
    return PASSAGES_ONLY[reply_language(question)]


def not_mentioned(terms: Sequence[str], question: str) -> str:
    """ "Not found" for a question naming what no document the caller may read mentions,
    each name in the language's quotation marks."""
    if reply_language(question) == "de":
        named = ", ".join(f"\u201e{term}\u201c" for term in terms)
        return (
            f"Keines der Dokumente, die Sie lesen dürfen, erwähnt {named}, darum beantworten sie "
            "diese Frage nicht."
        )
    named = ", ".join(f"\u201c{term}\u201d" for term in terms)
    return (
        f"None of the documents available to you mentions {named}, so they do not answer "
        "this question."
    )
