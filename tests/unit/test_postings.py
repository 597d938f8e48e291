"""A table version's BM25 postings: what a snapshot stores and a newer version carries over."""

from __future__ import annotations

import numpy as np
import pytest

from lorehouse.search.bm25 import analyzer_of
from lorehouse.search.postings import FieldPostings


def _corpus(rng: np.random.Generator, rows: int, vocabulary: list[str]) -> list[str | None]:
    texts: list[str | None] = []
    for _ in range(rows):
        if rng.random() < 0.03:
            texts.append(None if rng.random() < 0.5 else "")
            continue
        words = rng.choice(vocabulary, size=int(rng.integers(1, 25)))
        texts.append(" ".join(words.tolist()))
    return texts


def _same_postings(left: FieldPostings, right: FieldPostings) -> None:
    for name, array in left.arrays().items():
        other = right.arrays()[name]
        assert array.dtype == other.dtype, name
        assert np.array_equal(array, other), name


@pytest.mark.parametrize("reordered", [False, True], ids=["appended", "reordered"])
def test_postings_carried_to_a_newer_version_equal_a_fresh_build(reordered: bool) -> None:
    """A new table version's postings, carried over from the last version's by analysing
    only the rows it added, are those a build over all of its texts gives: same vocabulary,
    same rows and counts per term, same lengths, so every score and order is unchanged."""
    rng = np.random.default_rng(7)
    vocabulary = [f"w{i}" for i in range(300)] + ["Zählerstand", "zählerstände"]
    old = _corpus(rng, 400, vocabulary)
    # The one long word only in a row that goes: it leaves the vocabulary and its width.
    old[5] = "supercalifragilistic w1"
    gone = set(rng.choice(len(old), size=60, replace=False).tolist()) | {5}
    survivors = [i for i in range(len(old)) if i not in gone]
    added = _corpus(rng, 45, [*vocabulary[:50], "brandneu", "neuwort"])
    # The newer version: survivors in their order with added rows between them (appends and
    # deletes), or everything shuffled (a compaction that moved rows).
    slots: list[tuple[str, int]] = []
    pending = [("new", i) for i in range(len(added))]
    for i in survivors:
        while pending and rng.random() < 0.1:
            slots.append(pending.pop(0))
        slots.append(("old", i))
    slots.extend(pending)
    if reordered:
        rng.shuffle(slots)
    newer = [old[i] if kind == "old" else added[i] for kind, i in slots]
    new_of_old = np.full(len(old), -1, dtype=np.int64)
    added_rows = np.zeros(len(added), dtype=np.int64)
    for position, (kind, i) in enumerate(slots):
        if kind == "old":
            new_of_old[i] = position
        else:
            added_rows[i] = position
    analyzer = analyzer_of(["en", "de"])
    languages_old = ["de" if t and "ä" in t else "en" for t in old]
    languages_added = ["de" if t and "ä" in t else "en" for t in added]
    languages_newer = [
        languages_old[i] if kind == "old" else languages_added[i] for kind, i in slots
    ]
    carried = FieldPostings.carried(
        FieldPostings.build(old, analyzer, languages_old),
        new_of_old,
        FieldPostings.build(added, analyzer, languages_added),
        added_rows,
        len(newer),
    )
    fresh = FieldPostings.build(newer, analyzer, languages_newer)
    assert not any(str(term).startswith("supercali") for term in fresh.terms)
    assert fresh.term_id("brandneu") is not None
    _same_postings(carried, fresh)
