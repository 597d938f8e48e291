"""The two read-only routes the chat page leans on: suggested questions drawn from the
documents a caller may read, and every PDF page a cited chunk spans."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api.main import create_app
from lorehouse.api_keys import add_key
from lorehouse.settings import Settings
from lorehouse.stores.duckdb_store import DuckDBStore


@pytest.fixture(scope="module")
def stores(materialized_sample: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Path(shutil.copytree(materialized_sample, tmp_path_factory.mktemp("routes") / "data"))


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict:
    path = tmp_path_factory.mktemp("route-keys") / "keys.yaml"
    return {
        "file": path,
        "reader": {"X-API-Key": add_key(path, "reader", [])},
        "security": {"X-API-Key": add_key(path, "security-team", ["security"])},
    }


@pytest.fixture(scope="module")
def client(stores: Path, keys: dict) -> Iterator[TestClient]:
    with TestClient(create_app(Settings(data_dir=stores, api_keys_file=keys["file"]))) as client:
        yield client


def _rows(stores: Path, query: str) -> list[tuple]:
    # The store's own connection: the server has the same file open in this process.
    with DuckDBStore(stores / "lorehouse.duckdb").connect() as connection:
        return connection.execute(query).fetchall()


def test_suggestions_are_questions_of_the_documents_the_caller_may_read(
    client: TestClient, keys: dict
) -> None:
    response = client.get("/v1/suggestions", headers=keys["reader"])
    assert response.status_code == 200, response.text
    questions = response.json()["questions"]
    assert 1 <= len(questions) <= 6
    # The FAQ's headings are its questions, offered first with the document they come from.
    first = questions[0]
    assert first["question"] == "How many weeks of parental leave do I get?"
    assert (first["kind"], first["title"]) == ("heading", "Parental Leave FAQ")
    assert first["rel_path"] == "hr/parental-leave-faq.md"
    # Several documents are covered, each question ending in a question mark.
    assert len({q["doc_id"] for q in questions}) >= 3
    assert all(q["question"].endswith("?") for q in questions)

    everything = client.get("/v1/suggestions?limit=50", headers=keys["reader"]).json()
    paths = {q["rel_path"] for q in everything["questions"]}
    assert not [p for p in paths if p.startswith("security/") or p.startswith("hr/comp")]
    two = client.get("/v1/suggestions?limit=2", headers=keys["reader"]).json()["questions"]
    assert len(two) == 2

    # Control: a member of the security group is offered its documents too.
    member = client.get("/v1/suggestions?limit=50", headers=keys["security"]).json()
    assert any(q["rel_path"].startswith("security/") for q in member["questions"])


def test_suggestions_need_a_key_and_a_limit_in_bounds(client: TestClient, keys: dict) -> None:
    assert client.get("/v1/suggestions").status_code == 401
    assert client.get("/v1/suggestions?limit=0", headers=keys["reader"]).status_code == 422
    assert client.get("/v1/suggestions?limit=51", headers=keys["reader"]).status_code == 422


def test_a_chunk_page_is_any_page_the_chunk_spans_and_no_other(
    client: TestClient, keys: dict, stores: Path
) -> None:
    spanning = _rows(
        stores,
        "SELECT c.chunk_id, c.page_start, c.page_end FROM chunks c "
        "JOIN documents_raw r USING (doc_id) WHERE r.file_type = 'pdf' "
        "AND c.page_end > c.page_start AND len(c.acl) = 0 ORDER BY c.position LIMIT 1",
    )
    assert spanning, "the sample handbook has a passage across two pages"
    chunk_id, first, last = spanning[0]
    path = f"/v1/chunks/{chunk_id}/page"

    start = client.get(path, headers=keys["reader"])
    assert start.status_code == 200, start.text
    assert start.headers["content-type"] == "image/png"
    assert client.get(f"{path}?page={first}", headers=keys["reader"]).content == start.content
    end = client.get(f"{path}?page={last}", headers=keys["reader"])
    assert end.status_code == 200, end.text
    assert end.content.startswith(b"\x89PNG") and end.content != start.content

    for outside in [last + 1, *([first - 1] if first > 1 else [])]:
        refused = client.get(f"{path}?page={outside}", headers=keys["reader"])
        assert refused.status_code == 422, refused.text
        assert refused.json()["detail"][0]["loc"] == ["query", "page"]
    assert client.get(f"{path}?page=0", headers=keys["reader"]).status_code == 422

    # A chunk of another format has no page to draw, whichever is asked for.
    other = _rows(
        stores,
        "SELECT c.chunk_id FROM chunks c JOIN documents_raw r USING (doc_id) "
        "WHERE r.file_type = 'docx' AND len(c.acl) = 0 LIMIT 1",
    )[0][0]
    assert client.get(f"/v1/chunks/{other}/page?page=1", headers=keys["reader"]).status_code == 404


def test_the_page_parameter_is_documented_with_bounds_clients_can_read(
    client: TestClient,
) -> None:
    operation = client.get("/openapi.json").json()["paths"]["/v1/chunks/{chunk_id}/page"]["get"]
    (page,) = [p for p in operation["parameters"] if p["name"] == "page"]
    assert page["in"] == "query" and not page.get("required")
    number = next(s for s in page["schema"]["anyOf"] if s.get("type") == "integer")
    assert number["minimum"] == 1 and "ge" not in number and "le" not in number
