"""The commands a user types: lorehouse materialize and docs, dagster asset materialize."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import httpx
import yaml

from lorehouse.settings import BUNDLED_SAMPLE_CORPUS, REPO_ROOT
from lorehouse.stores.lance_index import ChunkIndex
from lorehouse.stores.partitions import bucket_of

BIN = Path(sys.executable).parent


def _run(args: list[str], data_dir: Path, **extra_env: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "LOREHOUSE_DATA_DIR": str(data_dir),
        "LOREHOUSE_WORKERS": "2",
        "DAGSTER_HOME": str(data_dir / "dagster_home"),
        "COLUMNS": "200",
        **extra_env,
    }
    (data_dir / "dagster_home").mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        args, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def test_lorehouse_materialize_named_partitions_then_the_rest_then_docs(tmp_path: Path) -> None:
    # The sample corpus and two documents whose paths hold Rich markup ("notes [/x].md" is a
    # file in the folder "notes [") and, for the one that fails, a terminal escape sequence:
    # the run's summary and the document list print them as written.
    corpus = Path(shutil.copytree(BUNDLED_SAMPLE_CORPUS, tmp_path / "corpus"))
    for folder in ("notes [", "scan ["):
        (corpus / folder).mkdir()
    (corpus / "notes [/x].md").write_text(
        "# Notes [/bold] on leave\n\nCarers may take five days a year.\n"
    )
    (corpus / "scan [/y]\x1b]0;pwned\x07.pdf").write_bytes(b"%PDF-1.7\nnot a PDF after all")
    data_dir = tmp_path / "data"
    lorehouse = str(BIN / "lorehouse")
    env = {"LOREHOUSE_SOURCE_URI": str(corpus), "LOREHOUSE_INDEX_PARTITIONS": "4"}

    # The inventory, then two of the four partitions by name: they build their own files
    # and publish them, so search reads their documents and no other's yet.
    inventory = _run([lorehouse, "materialize", "--select", "raw_documents"], data_dir, **env)
    assert inventory.returncode == 0, inventory.stderr[-2000:]
    named = _run([lorehouse, "materialize", "--partitions", "p01...p02"], data_dir, **env)
    assert named.returncode == 0, named.stderr[-2000:]
    assert "p01...p02 are built and published: search reads them now" in named.stderr
    assert sorted(p.name for p in (data_dir / "partitions").glob("p*")) == [
        "p01.duckdb",
        "p01.lancedb",
        "p02.duckdb",
        "p02.lancedb",
    ]
    searched = {
        bucket_of(doc_id, 4)
        for doc_id in ChunkIndex(str(data_dir / "lancedb")).column_values("doc_id").to_pylist()
    }
    assert searched == {1, 2}
    unknown = _run([lorehouse, "materialize", "--partitions", "p07"], data_dir, **env)
    assert unknown.returncode == 2
    assert "names no partition range of the 4 index partitions" in unknown.stderr

    # A plain materialize builds the rest and merges. The eval assets are left out: the
    # sample build every test shares runs them already.
    run = _run([lorehouse, "materialize", "--select", "not group:evals"], data_dir, **env)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "parsed: 12/12 (100%)" in run.stderr
    assert "failed: scan [/y]\\x1b]0;pwned\\x07.pdf: " in run.stdout
    # Dagster's own log of the failure too (in the run that parsed it): the path's controls
    # written out, never sent.
    logs = named.stderr + run.stderr
    assert "scan [/y]\\x1b]0;pwned\\x07.pdf: " in logs and "\x07" not in logs
    # The run is index_job's, tagged as the CLI's, so the UI lists it like a scheduled one.
    instance = dg.DagsterInstance.from_config(str(data_dir / "dagster_home"))
    try:
        cli_run = instance.get_runs()[0]  # the newest
    finally:
        instance.dispose()
    assert cli_run.job_name == "index_job"
    assert cli_run.tags["lorehouse/trigger"] == "cli"
    assert cli_run.tags["lorehouse/writes"] == "index"
    # Which process ran it, so a later run can free a pool slot it was killed holding.
    assert cli_run.tags["lorehouse/host"] == socket.gethostname()
    # With the origin of index_job in the workspace's code location: the UI's Overview
    # timeline draws only runs that have one.
    origin = cli_run.remote_job_origin
    assert origin is not None and origin.job_name == "index_job"
    assert (
        origin.location_name
        == yaml.safe_load((REPO_ROOT / "workspace.yaml").read_text())["load_from"][0][
            "python_module"
        ]["location_name"]
    )
    assert origin.repository_origin.repository_name == "__repository__"
    assert "check merged_partitions.parsed_documents_contract: passed" in run.stderr
    assert "│ pdf " in run.stdout and "│ all " in run.stdout
    docs = _run([lorehouse, "docs"], data_dir, **env)
    assert docs.returncode == 0, docs.stderr
    assert "security/incident-response-plan.docx" in docs.stdout
    assert "security" in docs.stdout and "parsed" in docs.stdout
    assert "notes [/x].md" in docs.stdout and "Notes [/bold] on leave" in docs.stdout
    assert "scan [/y]\\x1b]0;pwned\\x07.pdf" in docs.stdout
    assert not {"\x1b", "\x07"} & set(docs.stdout + run.stdout)


def test_lorehouse_materialize_rejects_an_unknown_selection(tmp_path: Path) -> None:
    run = _run([str(BIN / "lorehouse"), "materialize", "--select", "no_such_asset"], tmp_path)
    assert run.returncode == 2
    assert "matches no asset" in run.stderr or "Invalid selection" in run.stderr


def test_docs_before_any_run_says_what_to_do(tmp_path: Path) -> None:
    run = _run([str(BIN / "lorehouse"), "docs"], tmp_path)
    assert run.returncode == 1
    assert "lorehouse materialize" in run.stderr


def test_lorehouse_search_prints_json_hits(materialized_sample: Path) -> None:
    run = _run(
        [str(BIN / "lorehouse"), "search", "How many weeks of parental leave?", "--json"],
        materialized_sample,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads(run.stdout)
    assert result["mode"] == "hybrid" and len(result["hits"]) == 8
    assert any("20 weeks" in hit["text_chat"] for hit in result["hits"][:3])
    table = _run(
        [str(BIN / "lorehouse"), "search", "incident severity", "--mode", "bm25", "-g", "security"],
        materialized_sample,
    )
    assert table.returncode == 0, table.stderr[-2000:]
    assert "Security Incident Response Plan" in table.stdout


def test_lorehouse_search_before_materialize_says_what_to_do(tmp_path: Path) -> None:
    run = _run([str(BIN / "lorehouse"), "search", "leave"], tmp_path)
    assert run.returncode == 1
    assert "lorehouse materialize" in run.stderr


def test_lorehouse_serve_answers_with_a_created_key(
    materialized_sample: Path, tmp_path: Path
) -> None:
    keys_file = tmp_path / "keys.yaml"
    created = _run(
        [
            str(BIN / "lorehouse"),
            "keys",
            "create",
            "ops",
            "-g",
            "security",
            "--file",
            str(keys_file),
        ],
        materialized_sample,
    )
    assert created.returncode == 0, created.stderr
    key = created.stdout.strip()
    assert key.startswith("lh_") and key not in keys_file.read_text()

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {
        **os.environ,
        "LOREHOUSE_DATA_DIR": str(materialized_sample),
        "LOREHOUSE_API_KEYS_FILE": str(keys_file),
    }
    server = subprocess.Popen(
        [str(BIN / "lorehouse"), "serve", "--port", str(port)],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 90
        while True:
            try:
                if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert server.poll() is None, (
                server.stderr.read().decode()[-2000:] if server.stderr else ""
            )
            assert time.monotonic() < deadline, "server did not come up"
            time.sleep(0.5)
        denied = httpx.post(f"{base}/v1/search", json={"query": "incident"}, timeout=30)
        assert denied.status_code == 401
        allowed = httpx.post(
            f"{base}/v1/search",
            json={"query": "incident severity levels"},
            headers={"X-API-Key": key},
            timeout=30,
        )
        assert allowed.status_code == 200
        assert any(h["rel_path"].startswith("security/") for h in allowed.json()["hits"])
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
    # Lorehouse's own information lines reach the server's log, level and logger named.
    logged = server.stderr.read().decode() if server.stderr else ""
    warmed = r"INFO: +lorehouse\.search\.retriever: search warmed in \d+ ms"
    assert re.search(warmed, logged), logged


def test_lorehouse_eval_retrieval_prints_one_json_object(materialized_sample: Path) -> None:
    golden = REPO_ROOT / "evals" / "golden" / "sample_corpus.jsonl"
    run = _run(
        [str(BIN / "lorehouse"), "eval", "retrieval", "--golden", str(golden), "--json"],
        materialized_sample,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads(run.stdout)
    assert result["n_questions"] == 12
    # what /v1/search serves by default: hybrid reranked by late interaction
    assert result["default_retriever"] == "hybrid+maxsim"
    names = [r["retriever"] for r in result["results"]]
    assert names == ["vector", "bm25", "hybrid", "hybrid+maxsim", "agentic", "naive"]
    for entry in result["results"]:
        assert list(entry["recall_at"]) == [str(k) for k in range(1, 21)]
        recalls = list(entry["recall_at"].values())
        assert recalls == sorted(recalls) and 0 <= entry["mrr"] <= 1
