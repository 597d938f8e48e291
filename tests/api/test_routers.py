"""Each router works on its own: a bare FastAPI app holding only that router and the service
serves its route, so a route can be read, reused and tested without the rest of the API."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi import APIRouter, FastAPI
from fastapi.testclient import TestClient

from api.deps import Service, open_service
from api.routers import ask, chunks, documents, health, search
from lorehouse.settings import Settings
from tests.conftest import shown

LEAVE = "How many weeks of parental leave do primary caregivers get?"


@pytest.fixture(scope="module")
def service(materialized_sample: Path) -> Service:
    return open_service(Settings(data_dir=materialized_sample))


def _alone(router: APIRouter, service: Service) -> TestClient:
    app = FastAPI()
    app.include_router(router)
    app.state.service = service
    return TestClient(app)


def test_the_search_router_alone_finds_the_parental_leave_policy(service: Service) -> None:
    response = _alone(search.router, service).post("/v1/search", json={"query": LEAVE})
    assert response.status_code == 200, response.text
    hits = response.json()["hits"]
    assert hits and any("20 weeks" in hit["text_chat"] for hit in hits[:3])


def test_the_ask_router_alone_answers_with_citations(service: Service) -> None:
    response = _alone(ask.router, service).post("/v1/ask", json={"question": LEAVE})
    assert response.status_code == 200, response.text
    body = response.json()
    assert "20 weeks" in shown(body) and body["citations"]


def test_the_chunks_router_alone_previews_a_chunk_between_its_neighbours(
    service: Service,
) -> None:
    chunk_id = service.retriever.search(LEAVE, top_k=1).hits[0].chunk_id
    client = _alone(chunks.router, service)
    preview = client.get(f"/v1/chunks/{chunk_id}", params={"window": 2})
    assert preview.status_code == 200, preview.text
    assert preview.json()["chunk"]["chunk_id"] == chunk_id
    assert client.get("/v1/chunks/no-such-chunk").status_code == 404


def test_the_documents_router_alone_lists_the_public_documents(service: Service) -> None:
    response = _alone(documents.router, service).get("/v1/documents", params={"limit": 5})
    assert response.status_code == 200, response.text
    page = response.json()
    assert page["total"] > 5 and len(page["documents"]) == 5


def test_the_health_router_alone_reports_both_stores_ready(service: Service) -> None:
    client = _alone(health.router, service)
    assert client.get("/healthz").json()["status"] == "ok"
    details = client.get("/v1/health").json()
    assert details["lancedb"]["ready"] and details["duckdb"]["ready"]
    assert details["answers_running"] == 0
    assert details["answers_limit"] == service.settings.api_max_concurrent_asks
