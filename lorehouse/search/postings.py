"""A text column's BM25 postings as arrays, and the statistics of the rows a caller may see.

Kept apart from the analyzers and the index that scores with them (`lorehouse.search.bm25`):
these are what a table version's snapshot stores as files every process maps, and what a
newer version's snapshot carries over from the last one's (`FieldPostings.carried`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from lorehouse.search.bm25 import TextAnalyzer

# Okapi BM25's usual constants, as LanceDB, Lucene and bm25s use them.
K1 = 1.2
B = 0.75


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
        return {name: getattr(self, name) for name in POSTINGS_PARTS}

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> FieldPostings:
        return cls(**{name: arrays[name] for name in POSTINGS_PARTS})

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


POSTINGS_PARTS = ("terms", "starts", "rows", "counts", "lengths")


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
