"""/v1/uploads over a real deployment: a file uploaded for a group is indexed by the runs the
deployment's own sensors request, becomes searchable for that group only, and reports where
it stands; what cannot be an upload is refused with a message and stores nothing."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import docx
import pytest
from fastapi.testclient import TestClient

from api.main import create_app
from lorehouse.settings import Settings
from tests.dagster_daemon import UploadDeployment


def lab_safety_docx() -> bytes:
    """A real Word file: a heading and the rule a lab member would search for."""
    document = docx.Document()
    document.add_heading("Lab safety", 1)
    document.add_paragraph("Goggles are required in the wet lab at all times.")
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


@pytest.fixture(scope="module")
def client(upload_deployment: UploadDeployment) -> Iterator[TestClient]:
    with TestClient(create_app(upload_deployment.settings)) as served:
        yield served


def _upload(
    client: TestClient, upload_deployment: UploadDeployment, name: str, data: bytes, *groups: str
) -> dict:
    response = client.post(
        "/v1/uploads",
        params={"filename": name, "groups": list(groups)},
        content=data,
        headers=upload_deployment.headers("member"),
    )
    assert response.status_code == 201, response.text
    return response.json()


def _found(
    client: TestClient, upload_deployment: UploadDeployment, who: str, query: str
) -> list[str]:
    response = client.post(
        "/v1/search", json={"query": query}, headers=upload_deployment.headers(who)
    )
    assert response.status_code == 200, response.text
    return [hit["rel_path"] for hit in response.json()["hits"]]


def _states(client: TestClient, upload_deployment: UploadDeployment) -> dict[str, tuple[str, str]]:
    response = client.get("/v1/uploads", headers=upload_deployment.headers("member"))
    assert response.status_code == 200, response.text
    return {u["filename"]: (u["state"], u["detail"]) for u in response.json()["uploads"]}


def test_an_upload_is_indexed_by_the_sensors_runs_for_its_group_alone(
    client: TestClient, upload_deployment: UploadDeployment
) -> None:
    overview = client.get("/v1/uploads", headers=upload_deployment.headers("member")).json()
    assert overview["groups"] == ["lab", "research"]
    assert ".docx" in overview["readable_extensions"]

    upload = _upload(client, upload_deployment, "Lab safety.docx", lab_safety_docx(), "research")
    broken = _upload(client, upload_deployment, "broken.docx", b"this is not a Word file", "lab")
    assert (upload["state"], upload["groups"]) == ("queued", ["research"])
    assert upload["path"].startswith("uploads/") and upload["path"].endswith("/Lab safety.docx")

    runs = upload_deployment.ticks.settle("upload_sensor")
    assert runs[0] == ("inventory_job", None)
    assert runs[-1] == ("merge_job", None)
    assert upload_deployment.ticks.launched[-len(runs)][2]["lorehouse/trigger"] == "upload"

    states = _states(client, upload_deployment)
    assert states["Lab safety.docx"] == ("indexed", "searchable by research")
    assert states["broken.docx"][0] == "failed"
    assert states["broken.docx"][1] == (
        "the content is not in a format Lorehouse reads, though it is named .docx"
    )
    one = client.get(
        f"/v1/uploads/{broken['upload_id']}", headers=upload_deployment.headers("member")
    )
    assert one.json()["reason"] == "unsupported_type"

    assert upload["path"] in _found(client, upload_deployment, "member", "goggles in the wet lab")
    assert upload["path"] not in _found(
        client, upload_deployment, "outsider", "goggles in the wet lab"
    )
    listed = client.get("/v1/documents", headers=upload_deployment.headers("outsider")).json()
    assert all(doc["rel_path"] != upload["path"] for doc in listed["documents"])
    filtered = client.post(
        "/v1/search",
        json={"query": "goggles", "filters": {"doc_ids": [upload["doc_id"]]}},
        headers=upload_deployment.headers("outsider"),
    )
    assert filtered.status_code == 200 and filtered.json()["hits"] == []

    # Another caller cannot follow, list or delete it, by id either.
    for method in ("GET", "DELETE"):
        other = client.request(
            method,
            f"/v1/uploads/{upload['upload_id']}",
            headers=upload_deployment.headers("outsider"),
        )
        assert other.status_code == 404, method
    assert (
        client.get("/v1/uploads", headers=upload_deployment.headers("outsider")).json()["uploads"]
        == []
    )

    # Deleted by its uploader, it leaves the index at the next runs.
    gone = client.delete(
        f"/v1/uploads/{upload['upload_id']}", headers=upload_deployment.headers("member")
    )
    assert gone.status_code == 204
    upload_deployment.ticks.settle("upload_sensor")
    assert upload["path"] not in _found(
        client, upload_deployment, "member", "goggles in the wet lab"
    )
    assert "Lab safety.docx" not in _states(client, upload_deployment)


def test_what_cannot_be_an_upload_is_refused_with_a_message(
    client: TestClient, upload_deployment: UploadDeployment
) -> None:
    def post(who: str, name: str, groups: list[str], data: bytes = b"# Notes\n") -> tuple:
        response = client.post(
            "/v1/uploads",
            params={"filename": name, "groups": groups},
            content=data,
            headers=upload_deployment.headers(who),
        )
        return response.status_code, response.json()["detail"]

    before = _states(client, upload_deployment)
    status, detail = post("member", "tool.exe", ["lab"])
    assert status == 415 and "not a type Lorehouse reads" in detail and ".docx" in detail
    assert post("member", "notes.md", ["sales"]) == (
        422,
        "you are not in sales; choose among yours: lab, research",
    )
    assert post("member", "notes.md", [])[0] == 422
    status, detail = post("groupless", "notes.md", ["lab"])
    assert status == 403 and "never public" in detail
    assert post("member", "_access.json", ["lab"])[0] == 422
    cap = upload_deployment.settings.upload_max_bytes
    status, detail = post("member", "big.md", ["lab"], b"x" * (cap + 1))
    assert status == 413 and str(cap) in detail

    # Sent without a length, the body is refused once it passes the cap.
    def chunks() -> Iterator[bytes]:
        for _ in range(cap // (1 << 20) + 2):
            yield b"y" * (1 << 20)

    streamed = client.post(
        "/v1/uploads",
        params={"filename": "streamed.md", "groups": ["lab"]},
        content=chunks(),
        headers=upload_deployment.headers("member"),
    )
    assert streamed.status_code == 413
    assert (
        client.post("/v1/uploads", params={"filename": "x.md", "groups": ["lab"]}).status_code
        == 401
    )
    assert _states(client, upload_deployment) == before


def test_a_deployment_without_an_upload_folder_says_so(tmp_path: Path) -> None:
    with TestClient(create_app(Settings(data_dir=tmp_path / "data"))) as plain:
        response = plain.get("/v1/uploads")
        assert response.status_code == 404
        assert "LOREHOUSE_UPLOAD_FOLDER" in response.json()["detail"]
        posted = plain.post(
            "/v1/uploads", params={"filename": "a.md", "groups": ["x"]}, content=b"a"
        )
        assert posted.status_code == 404
