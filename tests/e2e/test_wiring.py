"""One deployment, one configuration: every place a question is answered builds the same
pipeline from the same settings.

`/v1/ask`, `lorehouse ask`, the `answer_eval` asset and `lorehouse eval answers` are run
against one materialized store with every answer setting moved off its default through the
environment, and a model behind a real HTTP endpoint on 127.0.0.1 records what each sent:
the output limit of every call and the passages the answerer was given.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from api.main import create_app
from assets import evals
from assets.resources import build_resources
from cli.main import app as cli
from lorehouse.settings import Settings, get_settings
from tests.provider_server import ProviderServer, judge_verdict, provider_server

QUESTION = "How many weeks of parental leave do primary caregivers get?"
ANSWER_MODEL, JUDGE_MODEL = "openai/local-answerer", "openai/local-judge"
ANSWER_LIMIT, JUDGE_LIMIT = 345, 234
CONTEXT_CHUNKS = 3
PASSAGE = re.compile(r"^\[(\d+)\] ", re.MULTILINE)


def _model(prompt: str) -> str:
    """A model that keeps the question, searches everything and cites its first passage."""
    if "Reference answer written by an expert:" in prompt:
        return json.dumps(judge_verdict(prompt))
    if prompt.startswith("You rewrite questions for a search engine"):
        question = prompt.split('New question:\n"""\n', 1)[1].split('\n"""', 1)[0]
        return json.dumps({"standalone": question, "sub_queries": [question]})
    if prompt.startswith("You choose which internal documents"):
        return json.dumps({"documents": [], "all": True})
    return "The passages answer this [1]."


@pytest.fixture
def server() -> Iterator[ProviderServer]:
    with provider_server() as running:
        running.chat_answer = _model
        yield running


@pytest.fixture
def deployment(
    materialized_sample: Path,
    tmp_path: Path,
    server: ProviderServer,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Path]:
    """A private copy of the sample store, configured through LOREHOUSE_* variables only."""
    data_dir = Path(shutil.copytree(materialized_sample, tmp_path / "data"))
    golden = tmp_path / "golden.jsonl"
    lines = Settings().eval_golden_set.read_text().splitlines()
    golden.write_text("\n".join(lines[:2]) + "\n")
    monkeypatch.setenv("OPENAI_API_KEY", "local-test")
    for name, value in {
        "DATA_DIR": data_dir,
        "EVAL_GOLDEN_SET": golden,
        "LLM_MODEL": ANSWER_MODEL,
        "LLM_API_BASE": server.base_url,
        "LLM_MAX_ATTEMPTS": 1,
        "JUDGE_MODEL": JUDGE_MODEL,
        "JUDGE_API_BASE": server.base_url,
        "ANSWER_MAX_OUTPUT_TOKENS": ANSWER_LIMIT,
        "JUDGE_MAX_OUTPUT_TOKENS": JUDGE_LIMIT,
        "ASK_CONTEXT_CHUNKS": CONTEXT_CHUNKS,
        "ANSWER_MAX_WORDS": 40,
        "RERANK": "none",
    }.items():
        monkeypatch.setenv(f"LOREHOUSE_{name}", str(value))
    get_settings.cache_clear()
    yield golden
    get_settings.cache_clear()


def _sent(server: ProviderServer) -> tuple[set[tuple[str, int | None]], set[int]]:
    """(model, output limit) of every call since the last look, and how many passages each
    answerer prompt held; then forgets them."""
    limits = {(model.split("/")[-1], limit) for model, limit, _ in server.chat_requests}
    passages = {
        max(int(number) for number in PASSAGE.findall(prompt))
        for _, _, prompt in server.chat_requests
        if prompt.startswith("You answer questions from employees")
    }
    server.chat_requests.clear()
    return limits, passages


def test_every_entry_point_answers_with_the_configured_options_and_limits(
    deployment: Path, server: ProviderServer
) -> None:
    golden = deployment
    runner = CliRunner()
    seen: dict[str, tuple[set[tuple[str, int | None]], set[int]]] = {}

    with TestClient(create_app()) as client:
        response = client.post("/v1/ask", json={"question": QUESTION})
    assert response.status_code == 200, response.text
    assert response.json()["mode"] == "llm"
    assert len(response.json()["trace"]["context_chunk_ids"]) == CONTEXT_CHUNKS
    seen["/v1/ask"] = _sent(server)

    result = runner.invoke(cli, ["ask", QUESTION, "--json"])
    assert result.exit_code == 0, result.output
    seen["lorehouse ask"] = _sent(server)

    materialized = dg.materialize(
        [evals.answer_eval],
        resources=build_resources(get_settings()),
        instance=dg.DagsterInstance.ephemeral(),
    )
    assert materialized.success
    seen["answer_eval asset"] = _sent(server)

    result = runner.invoke(cli, ["eval", "answers", "--golden", str(golden), "--json"])
    assert result.exit_code == 0, result.output
    seen["lorehouse eval answers"] = _sent(server)

    answering = {("local-answerer", ANSWER_LIMIT)}
    judging = {("local-answerer", ANSWER_LIMIT), ("local-judge", JUDGE_LIMIT)}
    assert seen == {
        "/v1/ask": (answering, {CONTEXT_CHUNKS}),
        "lorehouse ask": (answering, {CONTEXT_CHUNKS}),
        "answer_eval asset": (judging, {CONTEXT_CHUNKS}),
        "lorehouse eval answers": (judging, {CONTEXT_CHUNKS}),
    }
