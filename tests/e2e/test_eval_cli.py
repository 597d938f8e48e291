"""`lorehouse eval answers` and `lorehouse eval beir`, run as a user runs them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from lorehouse.settings import REPO_ROOT
from lorehouse.stores.duckdb_store import DuckDBStore
from tests.conftest import SHARED_CORPUS
from tests.e2e.test_cli import BIN, _run
from tests.provider_server import provider_server

GOLDEN = REPO_ROOT / "evals" / "golden" / "sample_corpus.jsonl"
SCIFACT = SHARED_CORPUS / "beir-scifact"


def test_eval_answers_without_a_judge_scores_key_facts_and_names_the_judge_setting(
    materialized_sample: Path, tmp_path: Path
) -> None:
    data_dir = Path(shutil.copytree(materialized_sample, tmp_path / "data"))
    run = _run([str(BIN / "lorehouse"), "eval", "answers", "--golden", str(GOLDEN)], data_dir)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "key facts stated" in run.stdout
    # The question the sample does not answer (its stock ticker) gets no asserted lead: the
    # closest passages, or "not found".
    assert "unanswerable questions asserted (share): 0.00" in run.stdout
    assert "LOREHOUSE_JUDGE_MODEL" in run.stderr
    assert "lead states a key fact" in run.stdout and "median lead words" in run.stdout
    stored = DuckDBStore(data_dir / "lorehouse.duckdb").table("eval_answers")
    assert set(stored["judge_model"]) == {"none"} and stored["score"].isna().all()
    answerable = stored[stored["case_type"] != "unanswerable"]
    assert len(answerable) >= 8 and answerable["key_facts"].sum() > 0
    # Most of the sample's reference facts are stated by the extractive answers.
    assert answerable["key_facts_found"].sum() >= 0.5 * answerable["key_facts"].sum()
    # Over half of them get an asserted lead, and an asserted lead alone states a reference
    # fact for most, in few words; the others get the passages.
    asserted = answerable[answerable["asserted"]]
    assert len(asserted) >= 0.5 * len(answerable)
    with_facts = asserted[asserted["key_facts"] > 0]
    assert (with_facts["lead_key_facts_found"] > 0).mean() >= 0.7
    assert asserted["lead_words"].median() <= 40


def test_eval_answers_prints_the_judged_summary(materialized_sample: Path, tmp_path: Path) -> None:
    data_dir = Path(shutil.copytree(materialized_sample, tmp_path / "data"))
    with provider_server() as server:
        run = _run(
            [str(BIN / "lorehouse"), "eval", "answers", "--golden", str(GOLDEN), "--limit", "4"],
            data_dir,
            LOREHOUSE_JUDGE_MODEL="openai/local-judge",
            LOREHOUSE_JUDGE_API_BASE=server.base_url,
            OPENAI_API_KEY="local-test",
        )
        assert run.returncode == 0, run.stderr[-2000:]
        assert len(server.judge_prompts) == 4
    assert "4/4 cases judged" in run.stdout
    assert "Worst cases" in run.stdout

    command = [str(BIN / "lorehouse"), "eval", "answers", "--golden", str(GOLDEN)]
    as_json = _run(
        [*command, "--json", "--limit", "3"],
        data_dir,
        LOREHOUSE_JUDGE_MODEL="openai/local-judge",
        LOREHOUSE_JUDGE_API_BASE="http://127.0.0.1:9/v1",  # nothing listens: every judgement fails
        LOREHOUSE_LLM_MAX_ATTEMPTS="1",
        OPENAI_API_KEY="local-test",
    )
    assert as_json.returncode == 0, as_json.stderr[-2000:]
    summary = json.loads(as_json.stdout)
    assert summary["n_cases"] == 3 and summary["n_judged"] == 0
    assert summary["judge_failures"] == 3 and summary["mean_score"] is None


def _scifact_slice(root: Path, judged_pairs: int = 20, distractors: int = 30) -> Path:
    """The first qrels pairs of SciFact's test split, their documents and some others."""
    (root / "qrels").mkdir(parents=True)
    lines = (SCIFACT / "qrels" / "test.tsv").read_text().splitlines()[: judged_pairs + 1]
    (root / "qrels" / "test.tsv").write_text("\n".join(lines) + "\n")
    query_ids = {line.split("\t")[0] for line in lines[1:]}
    doc_ids = {line.split("\t")[1] for line in lines[1:]}
    with (SCIFACT / "queries.jsonl").open() as queries:
        kept = [line for line in queries if json.loads(line)["_id"] in query_ids]
    (root / "queries.jsonl").write_text("".join(kept))
    documents = []
    with (SCIFACT / "corpus.jsonl").open() as corpus:
        for line in corpus:
            relevant = json.loads(line)["_id"] in doc_ids
            if relevant or distractors > 0:
                documents.append(line)
                distractors -= not relevant
    (root / "corpus.jsonl").write_text("".join(documents))
    return root


@pytest.mark.corpus
def test_eval_beir_scores_every_retriever_and_reuses_its_index(tmp_path: Path) -> None:
    dataset = _scifact_slice(tmp_path / "scifact-slice")
    command = [str(BIN / "lorehouse"), "eval", "beir", str(dataset), "--split", "test", "--json"]
    first = _run(command, tmp_path / "data")
    assert first.returncode == 0, first.stderr[-2000:]
    report = json.loads(first.stdout)
    assert report["n_queries"] == 18 and report["documents_embedded"] == report["n_documents"]
    assert report["sentence_windows_embedded"] > report["n_documents"]
    assert report["token_vectors_embedded"] == report["n_documents"]
    scores = {r["retriever"]: r for r in report["results"]}
    # hybrid alone, and with the default reranker (late interaction over the stored tokens)
    assert list(scores) == ["vector", "bm25", "hybrid", "hybrid+maxsim"]
    # about fifty documents: every retriever finds the judged abstracts near the top
    for name in scores:
        assert scores[name]["ndcg@10"] > 0.8, scores[name]
        assert scores[name]["recall@100"] >= scores[name]["recall@10"]
    assert (tmp_path / "data" / "beir" / "scifact-slice" / "lancedb").is_dir()

    again = json.loads(_run(command, tmp_path / "data").stdout)
    assert again["documents_embedded"] == again["sentence_windows_embedded"] == 0
    assert again["token_vectors_embedded"] == 0
    assert again["results"] == [
        {**r, "query_ms_median": again["results"][i]["query_ms_median"]}
        for i, r in enumerate(report["results"])
    ]


def test_eval_beir_on_a_folder_that_is_not_beir_names_the_missing_file(tmp_path: Path) -> None:
    run = _run([str(BIN / "lorehouse"), "eval", "beir", str(tmp_path)], tmp_path / "data")
    assert run.returncode == 2
    assert "corpus.jsonl is missing" in run.stderr
