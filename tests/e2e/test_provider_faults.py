"""Providers failing under a run and under the API: recorded, finished, degraded, not half-written.

Every provider here is the local OpenAI-compatible server on 127.0.0.1 (tests/provider_server),
reached by litellm over real HTTP, told to time out, rate-limit (429), fail (500) or answer with
a body that is not JSON; "refused" points the client at a port nothing listens on.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api.main import create_app
from lorehouse.chunking import Chunker
from lorehouse.embedding.minilm import default_token_counter
from lorehouse.enrichment import Enricher
from lorehouse.llm import LLMClient
from lorehouse.parsing.runner import ParseLimits
from lorehouse.settings import BUNDLED_SAMPLE_CORPUS, Settings
from lorehouse.sources.local import LocalFolderSource
from lorehouse.stages.chunk import run_chunking
from lorehouse.stages.enrich import run_enrichment
from lorehouse.stages.inventory import run_inventory
from lorehouse.stages.parse import run_parse
from lorehouse.stores.duckdb_store import DuckDBStore
from lorehouse.stores.lance_index import ChunkIndex
from tests.conftest import materialize_everything, shown
from tests.dagster.conftest import metadata_of
from tests.provider_server import ProviderServer, provider_server

FAULTS = ["timeout", "429", "500", "malformed", "refused"]
CLOSED_PORT = (
    "http://127.0.0.1:9/v1"  # the discard port: nothing listens, the connection is refused
)
SAMPLE_FILES = [
    BUNDLED_SAMPLE_CORPUS / "hr" / "parental-leave-faq.md",
    BUNDLED_SAMPLE_CORPUS / "engineering" / "oncall-runbook.md",
    BUNDLED_SAMPLE_CORPUS / "it" / "acceptable-use-policy.html",
    BUNDLED_SAMPLE_CORPUS / "handbook" / "travel-and-expenses.docx",
]


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ProviderServer]:
    monkeypatch.setenv("OPENAI_API_KEY", "local-test")
    with provider_server(dimension=16) as running:
        yield running
        running.release.set()  # let any call held for the timeout fault return


def _failing(server: ProviderServer, kind: str, fault: str, after: int = 0) -> str:
    """Makes `kind` calls fail with `fault` after `after` good ones; returns the base URL."""
    if fault == "refused":
        return CLOSED_PORT
    server.faults[kind] = fault
    server.fault_after[kind] = after
    return server.base_url


def _client(api_base: str) -> LLMClient:
    return LLMClient(
        "openai/gpt-4o-mini",
        api_base=api_base,
        max_attempts=2,
        timeout_seconds=0.5,
        backoff_seconds=0.01,
    )


@pytest.mark.parametrize("fault", FAULTS)
def test_enrichment_records_every_provider_fault_and_finishes(
    tmp_path: Path, server: ProviderServer, fault: str
) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    shutil.copy(SAMPLE_FILES[0], corpus)
    store = DuckDBStore(tmp_path / "lorehouse.duckdb")
    source = LocalFolderSource(corpus)
    run_inventory(source, store, max_file_bytes=10_000_000)
    run_parse(source, store, ParseLimits(workers=1, timeout_seconds=60, max_file_bytes=10**7))
    run_chunking(store, Chunker(256, default_token_counter().count))
    jobs = store.row_count("chunks") + 1  # one call per chunk, one per document

    failing = _client(_failing(server, "chat", fault))
    report = run_enrichment(store, Enricher(failing, concurrency=4))
    assert len(report.failures) == jobs
    assert all(reason for _, reason in report.failures)
    # Nothing half-written: no answer was cached, every chunk is still listed, unenriched.
    assert store.row_count("enrichment_cache") == 0
    enriched = store.table("enriched_chunks")
    assert len(enriched) == jobs - 1 and set(enriched["status"]) == {"failed"}

    server.faults.clear()
    healed = run_enrichment(store, Enricher(_client(server.base_url), concurrency=4))
    assert (healed.computed, healed.failures) == (jobs, [])
    assert set(store.table("enriched_chunks")["status"]) == {"enriched"}


def _index_state(data_dir: Path) -> dict[str, set[str]]:
    """Chunk ids per document in LanceDB."""
    table = ChunkIndex(str(data_dir / "lancedb")).table().to_arrow()
    by_document: dict[str, set[str]] = {}
    for doc_id, chunk_id in zip(
        table["doc_id"].to_pylist(), table["chunk_id"].to_pylist(), strict=True
    ):
        by_document.setdefault(doc_id, set()).add(chunk_id)
    return by_document


@pytest.mark.timeout(600)
def test_a_run_with_failing_providers_finishes_and_a_rerun_completes_it(
    tmp_path: Path, server: ProviderServer
) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for path in SAMPLE_FILES[::2]:  # 12 and 15 chunks
        shutil.copy(path, corpus)
    data_dir = tmp_path / "data"
    providers = {
        "llm_model": "openai/gpt-4o-mini",
        "llm_api_base": server.base_url,
        "embed_model": "openai/text-embedding-3-small",
        "embed_api_base": server.base_url,
        "llm_max_attempts": 1,  # no backoff between tries: the retry loop has its own tests
        "llm_timeout_seconds": 2.0,
        "embed_batch_size": 1,  # one text per call; commits of one whole document each
    }
    _failing(server, "chat", "500", after=10)
    _failing(server, "embedding", "429", after=16)  # the first document goes through
    first = materialize_everything(
        corpus, data_dir, raise_on_error=False, with_evals=False, **providers
    )

    store = DuckDBStore(data_dir / "lorehouse.duckdb")
    chunks = store.table("chunks")
    embedded = metadata_of(first, "chunk_embeddings")
    assert embedded["documents_not_embedded"] > 0
    assert "RateLimitError" in str(embedded["provider_failure"])
    assert metadata_of(first, "enriched_chunks")["failures"] > 0
    check = next(
        c for c in first.get_asset_check_evaluations()
        if c.check_name == "chunk_embeddings_match_chunks"
    )  # fmt: skip
    assert not check.passed
    # Nothing half-written: each document in the index is there with all of its chunks.
    expected = chunks.groupby("doc_id")["chunk_id"].apply(set).to_dict()
    stored = _index_state(data_dir)
    assert stored and all(stored[doc] == expected[doc] for doc in stored)
    assert len(stored) < len(expected)
    enriched = store.table("enriched_chunks")
    assert (enriched["status"] == "failed").any() and (enriched["status"] == "enriched").any()

    server.faults.clear()
    second = materialize_everything(corpus, data_dir, with_evals=False, **providers)
    assert second.success
    assert _index_state(data_dir) == expected
    assert set(store.table("enriched_chunks")["status"]) == {"enriched"}

    # The API over that index, with the embedding provider failing again.
    settings = Settings(data_dir=data_dir, **providers)
    with TestClient(create_app(settings)) as api:
        query = "how many weeks of parental leave"
        assert api.post("/v1/search", json={"query": query}).json()["mode"] == "hybrid"
        _failing(server, "embedding", "500")
        # A question asked before keeps its query vector: the outage does not touch it.
        again = api.post("/v1/search", json={"query": query, "mode": "vector"})
        assert again.status_code == 200 and again.json()["hits"]
        new_query = "how long is parental leave for primary caregivers"
        degraded = api.post("/v1/search", json={"query": new_query})
        assert degraded.status_code == 200
        body = degraded.json()
        assert body["mode"] == "bm25" and body["hits"]
        assert "keyword (BM25) results only" in body["warnings"][0]
        vector_only = api.post("/v1/search", json={"query": new_query, "mode": "vector"})
        assert vector_only.status_code == 503
        assert "embedding provider failed" in vector_only.json()["detail"]
        assert vector_only.headers["Retry-After"]


@pytest.fixture(scope="module")
def ask_api(materialized_sample: Path) -> Iterator[tuple[TestClient, ProviderServer]]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OPENAI_API_KEY", "local-test")
        with provider_server() as running:
            settings = Settings(
                data_dir=materialized_sample,
                llm_model="openai/gpt-4o-mini",
                llm_api_base=running.base_url,
                llm_max_attempts=1,
                llm_timeout_seconds=1.0,
            )
            with TestClient(create_app(settings)) as api:
                yield api, running
            running.release.set()


@pytest.mark.parametrize("fault", FAULTS)
def test_ask_degrades_to_an_extractive_cited_answer_when_the_llm_fails(
    ask_api: tuple[TestClient, ProviderServer], fault: str
) -> None:
    api, server = ask_api
    base = _failing(server, "chat", fault)
    if fault == "refused":
        api.app.state.service.pipeline.client.api_base = base
    try:
        response = api.post(
            "/v1/ask",
            json={"question": "How many weeks of parental leave do primary caregivers get?"},
        )
    finally:
        server.faults.clear()
        api.app.state.service.pipeline.client.api_base = server.base_url
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["degraded"] and body["degraded_reason"]
    assert body["mode"] == "extractive"
    assert body["citations"] and "20 weeks" in shown(body)


def test_asks_beyond_the_concurrency_limit_wait_then_get_a_503(
    materialized_sample: Path, server: ProviderServer
) -> None:
    settings = Settings(
        data_dir=materialized_sample,
        llm_model="openai/gpt-4o-mini",
        llm_api_base=server.base_url,
        api_max_concurrent_asks=1,
        api_ask_wait_seconds=0.5,
    )
    server.hold_chat_after = 0  # the first ask's LLM call waits until released
    with TestClient(create_app(settings)) as api, ThreadPoolExecutor(1) as pool:
        question = {"question": "How many weeks of parental leave do primary caregivers get?"}
        first = pool.submit(api.post, "/v1/ask", json=question)
        assert server.holding.wait(timeout=30)
        crowded = api.post("/v1/ask", json=question)
        assert crowded.status_code == 503 and crowded.headers["Retry-After"]
        assert "answers are being computed" in crowded.json()["detail"]
        server.release.set()
        assert first.result(timeout=60).status_code == 200
        # The turn came back: the next ask is served.
        assert api.post("/v1/ask", json=question).status_code == 200
