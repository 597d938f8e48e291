"""BM25 over a table's text columns, scored with the statistics of the rows a caller may see.

A full-text index keeps one set of statistics for the whole table: how many rows contain each
term, how many rows there are, their average length. Scores computed from them move when
restricted rows containing a word are added, so a caller who may see none of those rows could
still count them by watching the score of a public chunk (LanceDB's FTS index behaves so).
Here the statistics are computed per query over the caller's visible rows: an outsider's scores
and order are exactly those of an index that holds only what the outsider may see.

bm25s, the fast sparse-matrix BM25 library, cannot do this: it stores each (term, row) score
with the corpus-wide IDF already multiplied in. So the postings are kept instead, as
compressed sparse columns (`lorehouse.search.postings`: one term's rows and counts are one
contiguous slice), and scoring
touches only the query terms' slices. The analyzer is LanceDB's default one (simple
tokenizer, lowercase, ASCII folding, English stop words, Snowball stemming, tokens of at most
40 characters), so keyword search finds what it found before.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache

import numpy as np
import Stemmer
from cachetools import LRUCache

from lorehouse.search.postings import FieldPostings, FieldScope

_TOKEN = re.compile(r"\w+")
# The English stop words of tantivy, which LanceDB's FTS index removes by default.
STOP_WORDS = frozenset(
    {
        *("a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into"),
        *("is", "it", "no", "not", "of", "on", "or", "such", "that", "the", "their", "then"),
        *("there", "these", "they", "this", "to", "was", "will", "with"),
    }
)
MAX_TOKEN_CHARS = 40
#: Words a question carries that the passage answering it usually does not: interrogatives,
#: auxiliaries and the asker's pronouns ("How do I get my ...?"). At full weight they match
#: FAQ-style passages and second-person prose that share them ("How do you ...") and outvote
#: the question's content words; queries weigh them at the retriever's question-word weight.
#: Left out on purpose: "us" (lowercased "US"), "may" (the month) and "am" (the time).
QUESTION_WORDS = frozenset(
    {
        *("what", "which", "who", "whom", "whose", "when", "where", "why", "how"),
        *("do", "does", "did", "can", "could", "should", "would", "might", "must"),
        *("i", "me", "my", "mine", "we", "our", "you", "your"),
        *("get", "got", "have", "has", "had", "any", "much", "many"),
    }
)


#: The same words for German questions: "Wie kann ich meine ...?", "Welche ... gibt es?".
GERMAN_QUESTION_WORDS = frozenset(
    {
        *("was", "welche", "welcher", "welches", "welchen", "wer", "wem", "wen", "wann", "wo"),
        *("warum", "wie", "wieso", "weshalb", "wohin", "woher", "womit", "wozu"),
        *("kann", "können", "muss", "müssen", "soll", "sollte", "darf", "gibt", "geht"),
        *("ich", "mein", "meine", "meinen", "meinem", "mir", "mich", "wir", "unser", "unsere"),
        *("man", "sie", "ihr", "ihre", "viel", "viele"),
    }
)
#: ISO 639-1 code -> Snowball stemmer, for the languages BM25 stems in their own way.
SNOWBALL_LANGUAGES = {
    "en": "english",
    "de": "german",
    "fr": "french",
    "es": "spanish",
    "it": "italian",
    "nl": "dutch",
    "pt": "portuguese",
    "sv": "swedish",
    "da": "danish",
    "no": "norwegian",
    "fi": "finnish",
    "ru": "russian",
}


class Analyzer:
    """Text to index terms: words, lowercased, ASCII-folded, stop words out, stemmed.

    English keeps LanceDB's analyzer (tantivy's short stop list); another language stems with
    its own Snowball stemmer and drops its own stop words (the `stop-words` package's list).
    """

    def __init__(self, language: str = "en") -> None:
        if language not in SNOWBALL_LANGUAGES:
            raise ValueError(f"no stemmer for the language {language!r}")
        self.language = language
        #: What postings built with it are kept under, beside the table version.
        self.name = language
        self._stemmer = Stemmer.Stemmer(SNOWBALL_LANGUAGES[language])
        # Snowball is the slow step; a corpus has far fewer distinct words than tokens.
        self._stem = lru_cache(maxsize=200_000)(self._stemmer.stemWord)
        self._stop_words = STOP_WORDS if language == "en" else _stop_words(language)
        asked = QUESTION_WORDS if language == "en" else GERMAN_QUESTION_WORDS | QUESTION_WORDS
        #: The question words as index terms.
        self.question_terms = frozenset(self.terms(" ".join(sorted(asked))))

    def terms(self, text: str | None, language: str | None = None) -> list[str]:
        """`text`'s terms; `language` (what a row records) is this analyzer's own."""
        if not text:
            return []
        folded = _fold(text.lower())
        return [
            self._stem(word)
            for word in _TOKEN.findall(folded)
            if len(word) <= MAX_TOKEN_CHARS and word not in self._stop_words
        ]


def _stop_words(language: str) -> frozenset[str]:
    """A language's stop words, ASCII-folded as the words they are compared with are."""
    from stop_words import StopWordError, get_stop_words

    try:
        words = get_stop_words(SNOWBALL_LANGUAGES[language])
    except StopWordError:
        return frozenset()
    return frozenset(_fold(word.lower()) for word in words)


class MultilingualAnalyzer:
    """Each text analysed in its own language, told among `languages` (lorehouse/language.py):
    a German chunk stemmed as German, an English question as English. A text too short to
    tell is read as the first language.

    The statistics stay exact per caller: the postings are still one set per row, only the
    terms each row yields depend on its language.
    """

    def __init__(self, languages: Sequence[str]) -> None:
        from lorehouse.language import shared_detector

        self.languages = tuple(languages)
        self.name = "-".join(self.languages)
        self._detector = shared_detector(self.languages)
        self._analyzers = {language: analyzer_for(language) for language in self.languages}
        self.question_terms = frozenset().union(
            *(analyzer.question_terms for analyzer in self._analyzers.values())
        )

    def language_of(self, text: str | None) -> str:
        """The language `text` is told to be in, among this analyzer's."""
        return self._detector.detect(text)

    def terms(self, text: str | None, language: str | None = None) -> list[str]:
        """`text`'s terms in `language` (a chunk's, told when it was cut, so a short one
        reads as its document does), else in the language told of `text` itself."""
        analyzer = self._analyzers.get(language or "")
        if analyzer is None:
            analyzer = self._analyzers[self._detector.detect(text)]
        return analyzer.terms(text)


@lru_cache(maxsize=16)
def analyzer_for(language: str) -> Analyzer:
    """One analyzer per language and process (its stems are cached)."""
    return Analyzer(language)


#: Either analyzer: both yield a text's terms and know the question words among them.
TextAnalyzer = Analyzer | MultilingualAnalyzer


def analyzer_of(languages: Sequence[str]) -> TextAnalyzer:
    """The analyzer for a deployment's languages: one language needs no detection."""
    if len(languages) == 1:
        return analyzer_for(languages[0])
    return MultilingualAnalyzer(languages)


def _fold(text: str) -> str:
    """`café` -> `cafe`: accents removed, so both spellings find each other."""
    if text.isascii():
        return text
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(char for char in decomposed if not unicodedata.combining(char))


class BM25Index:
    """The postings of some text columns of one table version, keyed by the table's row keys."""

    #: Access scopes whose statistics are kept (each holds its mask, a byte per row).
    SCOPES_KEPT = 8

    def __init__(
        self, keys: Sequence[str], fields: dict[str, FieldPostings], analyzer: TextAnalyzer
    ) -> None:
        #: The row keys by row; any sequence (a snapshot passes a view of its mapped rows),
        #: read only for the rows a search returns.
        self.keys = keys
        self._position: dict[str, int] | None = None
        self.fields = fields
        self.analyzer = analyzer
        #: Access scope (its mask's bytes) -> its FieldScope per field, most recent last.
        self._scopes: LRUCache[bytes, dict[str, FieldScope]] = LRUCache(self.SCOPES_KEPT)
        self._scopes_lock = threading.Lock()

    @classmethod
    def build(
        cls, keys: Sequence[str], columns: dict[str, Sequence[str | None]], analyzer: TextAnalyzer
    ) -> BM25Index:
        fields = {name: FieldPostings.build(texts, analyzer) for name, texts in columns.items()}
        return cls(keys, fields, analyzer)

    def scopes(self, visible: np.ndarray) -> dict[str, FieldScope]:
        """Each field's statistics over the rows in `visible`, kept for the next query.

        Callers with the same groups see the same rows, so a server holds a few scopes at
        most; the least recently used beyond SCOPES_KEPT is dropped.
        """
        key = np.packbits(visible).tobytes()
        with self._scopes_lock:
            found = self._scopes.get(key)
        if found is not None:
            return found
        kept = visible.copy()  # one copy for every field, which no caller can change
        kept.flags.writeable = False
        built = {name: postings.scope(kept) for name, postings in self.fields.items()}
        with self._scopes_lock:
            self._scopes[key] = built
        return built

    def mask(self, keys: Iterable[str]) -> np.ndarray:
        """The rows of `keys` as a boolean mask (keys this index does not hold are ignored)."""
        position = self._position
        if position is None:
            position = self._position = {key: row for row, key in enumerate(self.keys)}
        mask = np.zeros(len(self.keys), dtype=bool)
        rows = [position[key] for key in keys if key in position]
        mask[rows] = True
        return mask

    def mentions(self, phrase: str, visible: np.ndarray) -> bool:
        """Whether a row in `visible` holds `phrase`: its terms in one row, in any field, or
        its words written as one ("Wi-Fi" as "wifi"). A phrase of stop words alone counts as
        mentioned. Read from the postings; only the caller's rows count, so the answer says
        nothing of what others may read."""
        terms = sorted(set(self.analyzer.terms(phrase)))
        if not terms:
            return True
        spellings = [terms]
        if len(terms) > 1:
            spellings.append(self.analyzer.terms("".join(_TOKEN.findall(phrase))))
        for spelling in spellings:
            rows = visible.copy()
            for term in spelling:
                rows &= self._rows_holding(term)
                if not rows.any():
                    break
            else:
                return True
        return False

    def _rows_holding(self, term: str) -> np.ndarray:
        """A mask of the rows holding `term` in any field."""
        held = np.zeros(len(self.keys), dtype=bool)
        for postings in self.fields.values():
            rows = postings.term_rows(term)
            if rows is not None:
                held[rows] = True
        return held

    def search(
        self,
        query: str,
        fields: Mapping[str, float],
        visible: np.ndarray,
        allowed: np.ndarray,
        limit: int,
        question_word_weight: float = 1.0,
    ) -> list[tuple[str, float]]:
        """(key, score) of the best `limit` rows in `allowed`, scored over `visible`.

        `visible` is whom the statistics describe (the caller's access scope); `allowed` is
        the subset results may come from (the scope narrowed by the caller's filters). The
        score of a row is the weighted sum of its fields' BM25 scores (`fields`: column ->
        weight): a short field such as a title scores high on any match, and at full weight
        it outvotes the passage itself. The query's QUESTION_WORDS count `question_word_weight`
        times (0 drops them).
        """
        # Sorted, so every row's sum is taken in the same order in every process.
        terms = sorted(set(self.analyzer.terms(query)))
        scores = np.zeros(len(self.keys), dtype=np.float64)
        if not terms or limit <= 0:
            return []
        asked = self.analyzer.question_terms
        content = [term for term in terms if term not in asked]
        question = [term for term in terms if term in asked] if question_word_weight else []
        scopes = self.scopes(visible)
        for field, weight in fields.items():
            if weight == 0:  # a field switched off costs nothing
                continue
            self.fields[field].add_scores(content, scopes[field], scores, weight)
            if question:
                self.fields[field].add_scores(
                    question, scopes[field], scores, weight * question_word_weight
                )
        scores[~allowed] = 0.0
        matched = np.flatnonzero(scores > 0)
        if len(matched) > limit:
            # Everything tied with the last row kept goes on to the sort, so which of equal
            # rows make the cut depends on their keys, not on where they sit in the table.
            cutoff = -np.partition(-scores[matched], limit - 1)[limit - 1]
            matched = matched[scores[matched] >= cutoff]
        rows = matched.tolist()
        # A snapshot's key column reads the keys of many rows at once (`take`).
        take = getattr(self.keys, "take", None)
        named = dict(zip(rows, take(rows) if take else [self.keys[r] for r in rows], strict=True))
        best = sorted(named, key=lambda row: (-scores[row], named[row]))[:limit]
        return [(named[row], float(scores[row])) for row in best]
