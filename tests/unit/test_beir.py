"""BEIR loading and trec_eval scoring on hand-computed cases."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from evals.beir import BeirFormatError, load_beir, score_run


def _write_dataset(root: Path, qrels: str) -> Path:
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text(
        '{"_id": "d1", "title": "Leave", "text": "Twenty days of paid vacation."}\n'
        '{"_id": 7, "title": "", "text": "Numeric ids are read as strings."}\n'
    )
    (root / "queries.jsonl").write_text(
        '{"_id": "q1", "text": "How much vacation?"}\n{"_id": "q2", "text": "Unjudged query"}\n'
    )
    (root / "qrels" / "test.tsv").write_text(qrels)
    return root


def test_only_the_split_s_judged_queries_are_loaded(tmp_path: Path) -> None:
    dataset = load_beir(_write_dataset(tmp_path, "query-id\tcorpus-id\tscore\nq1\td1\t1\n"))
    assert dataset.queries == {"q1": "How much vacation?"}
    assert dataset.qrels == {"q1": {"d1": 1}}
    assert set(dataset.corpus) == {"d1", "7"}
    assert dataset.corpus["d1"].title == "Leave"


@pytest.mark.parametrize(
    ("qrels", "message"),
    [
        ("query-id\tcorpus-id\tscore\nq9\td1\t1\n", "query ids not in queries.jsonl"),
        ("query-id\tcorpus-id\tscore\nq1\td1\n", "2: expected 3 tab-separated columns"),
        ("query-id\tcorpus-id\tscore\nq1\td1\thigh\n", "2: score 'high' is not an integer"),
    ],
)
def test_a_broken_qrels_file_is_named_with_its_line(
    tmp_path: Path, qrels: str, message: str
) -> None:
    root = _write_dataset(tmp_path, qrels)
    with pytest.raises(BeirFormatError, match=message) as error:
        load_beir(root)
    assert "test.tsv" in str(error.value)


def test_a_folder_without_the_split_says_which_file_is_missing(tmp_path: Path) -> None:
    root = _write_dataset(tmp_path, "q1\td1\t1\n")
    with pytest.raises(BeirFormatError, match=r"dev\.tsv is missing"):
        load_beir(root, split="dev")


def test_scores_equal_hand_computed_trec_eval_values() -> None:
    qrels = {"q1": {"d1": 1, "d2": 1}, "q2": {"d3": 1}, "q3": {"d4": 2, "d5": 1}}
    run = {
        "q1": ["d2", "x", "d1"],  # both relevant found, at ranks 1 and 3
        "q2": [],  # nothing retrieved: the query still counts, as 0
        "q3": ["d5", "d4"],  # graded: the better document at rank 2
    }
    scores = score_run(qrels, run)
    ndcg_q1 = (1 + 1 / math.log2(4)) / (1 + 1 / math.log2(3))
    # trec_eval's nDCG uses the grade itself as the gain
    ndcg_q3 = (1 + 2 / math.log2(3)) / (2 + 1 / math.log2(3))
    assert scores["ndcg@10"] == pytest.approx((ndcg_q1 + 0 + ndcg_q3) / 3)
    assert scores["recall@10"] == pytest.approx((1 + 0 + 1) / 3)
    assert scores["mrr@10"] == pytest.approx((1 + 0 + 1) / 3)


def test_the_ranking_order_decides_not_the_document_ids() -> None:
    """trec_eval sorts equal scores by document id; a ranking must never be reordered."""
    scores = score_run({"q": {"a": 1}}, {"q": ["b", "a"]})
    assert scores["mrr@10"] == pytest.approx(0.5)
    assert scores["ndcg@10"] == pytest.approx(1 / math.log2(3))


def test_recall_at_10_ignores_what_is_ranked_below_10() -> None:
    ranking = [f"x{i}" for i in range(10)] + ["d1"]
    scores = score_run({"q": {"d1": 1}}, {"q": ranking})
    assert scores["recall@10"] == 0.0
    assert scores["recall@100"] == 1.0
