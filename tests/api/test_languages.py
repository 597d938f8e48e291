"""Languages over a real deployment of an English and a German document: the document list
says each one's language, hits carry their chunk's, and a search keeps to the languages asked
for, the question's own language whatever it is."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from api.main import create_app
from tests.dagster_daemon import UploadDeployment


@pytest.fixture(scope="module")
def client(upload_deployment: UploadDeployment) -> Iterator[TestClient]:
    with TestClient(create_app(upload_deployment.settings)) as served:
        yield served


def _search(
    client: TestClient, upload_deployment: UploadDeployment, query: str, **filters: object
) -> list[tuple[str, str]]:
    body: dict = {"query": query, "filters": filters} if filters else {"query": query}
    response = client.post("/v1/search", json=body, headers=upload_deployment.headers("member"))
    assert response.status_code == 200, response.text
    return [(hit["rel_path"], hit["language"]) for hit in response.json()["hits"]]


def test_documents_and_hits_say_their_language(
    client: TestClient, upload_deployment: UploadDeployment
) -> None:
    response = client.get("/v1/documents", headers=upload_deployment.headers("member"))
    assert response.status_code == 200, response.text
    languages = {d["rel_path"]: d["language"] for d in response.json()["documents"]}
    assert languages == {"docs/leave.md": "en", "docs/reisen.md": "de"}
    hits = _search(client, upload_deployment, "hotel costs per night")
    assert ("docs/reisen.md", "de") in hits and ("docs/leave.md", "en") in hits


def test_a_search_keeps_to_the_languages_asked_for(
    client: TestClient, upload_deployment: UploadDeployment
) -> None:
    # An English question over the German documents only, and a German one over the English.
    assert set(_search(client, upload_deployment, "hotel costs", languages=["de"])) == {
        ("docs/reisen.md", "de")
    }
    assert set(_search(client, upload_deployment, "Urlaubstage", languages=["en"])) == {
        ("docs/leave.md", "en")
    }
    assert _search(client, upload_deployment, "hotel costs", languages=["fr"]) == []


@pytest.mark.parametrize("languages", [[], ["german"], ["DE"], "de"])
def test_a_language_filter_that_is_no_list_of_codes_is_refused(
    client: TestClient, upload_deployment: UploadDeployment, languages: object
) -> None:
    response = client.post(
        "/v1/search",
        json={"query": "hotel", "filters": {"languages": languages}},
        headers=upload_deployment.headers("member"),
    )
    assert response.status_code == 422, response.text
    assert "languages" in response.text
