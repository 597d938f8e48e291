"""Passages: each document's chunks joined into runs up to a word budget, and their text."""

from __future__ import annotations

from lorehouse.search.passages import passage_runs, passage_text


def test_runs_join_consecutive_chunks_of_one_document_up_to_the_budget() -> None:
    # Rows given out of order: two documents, one table chunk, one chunk over the budget.
    doc_ids = ["b", "a", "a", "a", "a", "a", "b", "a"]
    positions = [0, 0, 1, 2, 3, 4, 1, 5]
    is_table = [False, False, False, True, False, False, False, False]
    words = [50, 40, 40, 30, 120, 60, 70, 10]
    runs = passage_runs(doc_ids, positions, is_table, words, max_words=100)
    as_positions = [[(doc_ids[row], positions[row]) for row in run] for run in runs]
    assert as_positions == [
        [("a", 0), ("a", 1)],  # 80 words; the next is a table
        [("a", 2)],  # a table is never joined to prose
        [("a", 3)],  # over the budget alone
        [("a", 4), ("a", 5)],  # 70 words
        [("b", 0)],  # 50 + 70 > 100
        [("b", 1)],
    ]
    assert sorted(row for run in runs for row in run) == list(range(len(doc_ids)))


def test_a_budget_smaller_than_every_chunk_leaves_each_chunk_alone() -> None:
    runs = passage_runs(["a", "a", "a"], [0, 1, 2], [False] * 3, [30, 30, 30], max_words=10)
    assert runs == [[0], [1], [2]]


def test_passage_text_keeps_one_breadcrumb_and_names_each_new_section() -> None:
    parental, medical = ["Leave", "Parental"], ["Leave", "Medical"]
    rows = [
        {"text_chat": "Leave > Parental\n\nYou get 16 weeks.", "heading_path": parental},
        {"text_chat": "Leave > Parental\n\nPaid in full.", "heading_path": parental},
        {"text_chat": "Leave > Medical\n\nUp to 12 weeks.", "heading_path": medical},
    ]
    assert passage_text(rows) == (
        "Leave > Parental\n\nYou get 16 weeks.\n\nPaid in full.\n\nMedical\n\nUp to 12 weeks."
    )
    assert passage_text([]) == ""
