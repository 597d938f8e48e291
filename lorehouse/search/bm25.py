"""BM25 over a table's text columns, scored with the statistics of the rows a caller may see.

A full-text index keeps one set of statistics for the whole table: how many rows contain each
term, how many rows there are, their average length. Scores computed from them move when
restricted rows containing a word are added, so a caller who may see none of those rows could
still count them by watching the score of a public chunk (LanceDB's FTS index behaves so).
Here the statistics are computed per query over the caller's visible rows: an outsider's scores
and order are exactly those of an index that holds only what the outsider may see.

bm25s, the fast sparse-matrix BM25 library, cannot do this: it stores each (term, row) score
with the corpus-wide IDF already multiplied in. So the postings are kept here instead, as
compressed sparse columns (one term's rows and counts are one contiguous slice), and scoring
touches only the query terms' slices. The analyzer is LanceDB's default one (simple
tokenizer, lowercase, ASCII folding, English stop words, Snowball stemming, tokens of at most
40 characters), so keyword search finds what it found before.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import Stemmer
from cachetools import LRUCache

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
# Okapi BM25's usual constants, as LanceDB, Lucene and bm25s use them.
K1 = 1.2
B = 0.75


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


@dataclass(frozen=True)
class FieldPostings:
    """One text column's postings: for the term at `terms[t]`, rows[starts[t]:starts[t+1]]
    and their counts.

    Nothing but arrays (the vocabulary sorted, looked up by binary search), so a table
    version's postings can be one set of files every process of a host maps
    (`lorehouse.search.snapshot_files`) instead of a dictionary and arrays per process.
    """

    #: The vocabulary, sorted (numpy unicode strings).
    terms: np.ndarray
    starts: np.ndarray
    rows: np.ndarray
    counts: np.ndarray
    #: Terms per row, for BM25's length normalisation (integers, so their sum is exact).
    lengths: np.ndarray

    @classmethod
    def build(
        cls,
        texts: Iterable[str | None],
        analyzer: TextAnalyzer,
        languages: Sequence[str | None] | None = None,
    ) -> FieldPostings:
        """Postings of `texts`, each read in its row's recorded language (`languages`, by
        row) where there is one."""
        term_ids: dict[str, int] = {}
        term_column: list[int] = []
        row_column: list[int] = []
        count_column: list[int] = []
        lengths: list[int] = []
        for row, text in enumerate(texts):
            terms = analyzer.terms(text, languages[row] if languages is not None else None)
            lengths.append(len(terms))
            for term, count in Counter(terms).items():
                term_column.append(term_ids.setdefault(term, len(term_ids)))
                row_column.append(row)
                count_column.append(count)
        vocabulary = sorted(term_ids)
        # Term ids renumbered in vocabulary order: a term's place in `terms` is its id.
        renumbered = np.empty(len(term_ids), dtype=np.int64)
        renumbered[[term_ids[term] for term in vocabulary]] = np.arange(len(vocabulary))
        term_array = renumbered[np.asarray(term_column, dtype=np.int64)]
        # A stable sort keeps each term's rows in ascending order.
        order = np.argsort(term_array, kind="stable")
        starts = np.zeros(len(term_ids) + 1, dtype=np.int64)
        np.cumsum(np.bincount(term_array, minlength=len(term_ids)), out=starts[1:])
        return cls(
            terms=np.asarray(vocabulary, dtype=np.str_),
            starts=starts,
            rows=np.asarray(row_column, dtype=np.int32)[order],
            counts=np.asarray(count_column, dtype=np.int32)[order],
            lengths=np.asarray(lengths, dtype=np.int32),
        )

    @classmethod
    def carried(
        cls,
        previous: FieldPostings,
        new_of_old: np.ndarray,
        added: FieldPostings,
        added_rows: np.ndarray,
        row_count: int,
    ) -> FieldPostings:
        """The postings of a newer version of the rows, built from `previous` (an older
        version's) and `added` (the postings of the rows the older one did not hold), equal
        to `build` over the newer version's texts.

        Why: building postings reads and analyses every text, minutes at a million rows,
        while a nightly publish changes a few documents. Here only the added rows are
        analysed; the rest is array work over the older postings.

        `new_of_old[r]` is the newer position of the older row `r` (-1: gone), for rows
        whose texts are unchanged; `added_rows[i]` the newer position of `added`'s row `i`.
        """
        terms_of_entries = np.repeat(
            np.arange(len(previous.terms), dtype=np.int64), np.diff(previous.starts)
        )
        moved = new_of_old[previous.rows]
        kept = moved >= 0
        vocabulary = np.union1d(previous.terms, added.terms)
        kept_terms = np.searchsorted(vocabulary, previous.terms)[terms_of_entries[kept]]
        del terms_of_entries
        kept_rows = moved[kept]
        kept_counts = previous.counts[kept]
        del moved
        added_terms = np.searchsorted(vocabulary, added.terms)[
            np.repeat(np.arange(len(added.terms), dtype=np.int64), np.diff(added.starts))
        ]
        placed = np.asarray(added_rows, dtype=np.int64)[added.rows]
        # Each entry's place is (term, row): kept entries are in that order already where
        # rows kept their relative order (appends and deletes do), so the few added ones
        # are merged in; otherwise everything is sorted.
        kept_keys = kept_terms * max(1, row_count) + kept_rows
        added_keys = added_terms * max(1, row_count) + placed
        added_order = np.argsort(added_keys, kind="stable")
        if len(kept_keys) < 2 or bool(np.all(kept_keys[1:] > kept_keys[:-1])):
            at = np.searchsorted(kept_keys, added_keys[added_order])
            del kept_keys
            term_array = np.insert(kept_terms, at, added_terms[added_order])
            rows = np.insert(kept_rows, at, placed[added_order])
            counts = np.insert(kept_counts, at, added.counts[added_order])
        else:
            order = np.argsort(np.concatenate([kept_keys, added_keys]), kind="stable")
            del kept_keys
            term_array = np.concatenate([kept_terms, added_terms])[order]
            rows = np.concatenate([kept_rows, placed])[order]
            counts = np.concatenate([kept_counts, added.counts])[order]
        # Terms no row holds any more leave the vocabulary, as a build never holds them.
        per_term = np.bincount(term_array, minlength=len(vocabulary))
        used = per_term > 0
        vocabulary = vocabulary[used]
        width = int(np.char.str_len(vocabulary).max()) if len(vocabulary) else 1
        starts = np.zeros(len(vocabulary) + 1, dtype=np.int64)
        np.cumsum(per_term[used], out=starts[1:])
        lengths = np.zeros(row_count, dtype=np.int32)
        staying = np.flatnonzero(new_of_old >= 0)
        lengths[new_of_old[staying]] = previous.lengths[staying]
        lengths[np.asarray(added_rows, dtype=np.int64)] = added.lengths
        return cls(
            terms=vocabulary.astype(f"<U{width}"),
            starts=starts,
            rows=rows.astype(np.int32),
            counts=counts.astype(np.int32),
            lengths=lengths,
        )

    def arrays(self) -> dict[str, np.ndarray]:
        """The arrays, by field name, as `from_arrays` takes them back."""
        return {name: getattr(self, name) for name in _POSTINGS_ARRAYS}

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> FieldPostings:
        return cls(**{name: arrays[name] for name in _POSTINGS_ARRAYS})

    def term_id(self, term: str) -> int | None:
        """The place of `term` in the vocabulary, or None when no row holds it."""
        place = int(np.searchsorted(self.terms, term))
        if place < len(self.terms) and self.terms[place] == term:
            return place
        return None

    def term_rows(self, term: str) -> np.ndarray | None:
        """The rows holding `term`, ascending, or None."""
        term_id = self.term_id(term)
        if term_id is None:
            return None
        return self.rows[self.starts[term_id] : self.starts[term_id + 1]]

    def scope(self, visible: np.ndarray) -> FieldScope:
        """What BM25 needs of the rows in `visible` (a mask no one changes) for this field,
        computed once per scope."""
        visible_rows = int(np.count_nonzero(visible))
        # An exact integer sum: a float sum would depend on where the hidden rows sit in the
        # table and move an outsider's scores in the last bits.
        total_length = int(self.lengths[visible].sum(dtype=np.int64))
        return FieldScope(
            visible=visible,
            visible_rows=visible_rows,
            everyone=visible_rows == len(visible),
            # No rows, or rows without terms: any average normalises nothing.
            average_length=total_length / visible_rows if total_length else 1.0,
        )

    def add_scores(
        self, terms: Iterable[str], scope: FieldScope, scores: np.ndarray, weight: float = 1.0
    ) -> None:
        """Adds this field's BM25 score of every row of `scope`, times `weight`, to `scores`.

        Document frequencies, the row count and the average length are those of the rows in
        the scope: rows outside it change nothing, not even the scores of the rows inside.
        """
        if scope.visible_rows == 0:
            return
        for term in terms:
            term_id = self.term_id(term)
            if term_id is None:
                continue
            start, end = self.starts[term_id], self.starts[term_id + 1]
            rows, counts = self.rows[start:end], self.counts[start:end]
            if scope.everyone:
                frequency = int(end - start)
            else:
                seen = scope.visible[rows]
                frequency = int(np.count_nonzero(seen))
                if frequency == 0:
                    continue
                rows, counts = rows[seen], counts[seen]
            counts = counts.astype(np.float64)
            # Length normalisation of these rows alone: a query touches its terms' rows only.
            norm = K1 * (1.0 - B + B * self.lengths[rows] / scope.average_length)
            idf = np.log1p((scope.visible_rows - frequency + 0.5) / (frequency + 0.5))
            scores[rows] += weight * idf * counts * (K1 + 1.0) / (counts + norm)


_POSTINGS_ARRAYS = ("terms", "starts", "rows", "counts", "lengths")


@dataclass(frozen=True)
class FieldScope:
    """One field's BM25 statistics over the rows a caller may see.

    `everyone` says the scope is the whole table, so a term's rows need no filtering. Kept
    per scope (BM25Index.SCOPES_KEPT of them), as callers of the same groups share one: a
    query then touches only its terms' postings.
    """

    visible: np.ndarray
    visible_rows: int
    everyone: bool
    average_length: float


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
