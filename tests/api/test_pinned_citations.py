"""Citations pinned to an older index version, as the corpus changes under them.

A citation names the version it was read from, and `/v1/chunks/{id}?version=N` serves the
chunk as it was then. What it serves must never outlast the access lists: a document moved
into a restricted folder (a new id, so the old one looks removed), or restricted and then
deleted, gives an outsider the same 404 as a chunk that never existed, while a member of the
group still opens it, marked `removed`; and a version past its retention is 410 without a
later run having cleaned it up.

Three builds of one small corpus, each served through a fresh app over the same stores: the
first is cited, the second moves one document into a restricted folder and restricts another
with a sidecar, the third deletes the restricted one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from api.main import create_app
from lorehouse.api_keys import add_key
from lorehouse.search import tables
from lorehouse.settings import Settings
from lorehouse.stores.duckdb_store import DuckDBStore
from tests.conftest import materialize_everything

# Three builds of a small corpus, in the first test's time.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

WINDOW = 5
SECTIONS = ("Scope", "Timeline", "Budget", "Risks")
ALPHA, BRAVO, DELTA = "pub/alpha.md", "pub/bravo.md", "pub/delta.md"
MOVED = "sec/bravo.md"
ABSENT_ID = hashlib.sha256(b"no such chunk").hexdigest()[:32]


def _document(name: str, topic: str) -> str:
    """A Markdown document of one chunk per section, each naming the document."""
    sections = [
        f"## {section}\n\nThe {name} project's {section.lower()}: {topic} is planned in four "
        f"steps, reviewed by the {name} steering group every second week, and reported to "
        f"the board of {name} at the end of each quarter."
        for section in SECTIONS
    ]
    return f"# {name.title()}\n\n" + "\n\n".join(sections) + "\n"


@dataclass
class Build:
    """What one build's app answered."""

    responses: dict[tuple[str, str], httpx.Response] = field(default_factory=dict)


@dataclass
class Story:
    data_dir: Path
    keys_file: Path
    keys: dict[str, str]
    #: The version cited and, per cited document, the chunk cited (its first).
    cited_version: int
    cited: dict[str, str]
    builds: list[Build]
    #: The outsider's saved conversation, asked in at the first build (about the document
    #: restricted later, then the one nobody touches), as opened after each build.
    conversation: list[dict] = field(default_factory=list)


def _client(data_dir: Path, keys_file: Path) -> TestClient:
    return TestClient(create_app(Settings(data_dir=data_dir, api_keys_file=keys_file)))


def _first_chunks(data_dir: Path) -> dict[str, str]:
    """rel_path -> the id of its first chunk, as the feature store holds them."""
    store = DuckDBStore(data_dir / "lorehouse.duckdb")
    chunks, documents = store.table("chunks"), store.table("documents")
    paths = dict(zip(documents["doc_id"], documents["rel_path"], strict=True))
    first = chunks[chunks["position"] == 0]
    pairs = zip(first["doc_id"], first["chunk_id"], strict=True)
    return {paths[doc_id]: chunk_id for doc_id, chunk_id in pairs}


def _observe(
    keys: dict[str, str], client: TestClient, cited: dict[str, str], version: int
) -> Build:
    """Each caller's pinned preview of each cited chunk and of an absent one (keyed by its
    id), at the widest window."""
    build = Build()
    for who in ("public", "security"):
        for rel_path, chunk_id in {**cited, ABSENT_ID: ABSENT_ID}.items():
            build.responses[(who, rel_path)] = client.get(
                f"/v1/chunks/{chunk_id}?version={version}&window={WINDOW}",
                headers={"X-API-Key": keys[who]},
            )
    return build


#: Asked in the outsider's conversation at the first build: of the document restricted at the
#: second, then of the one nobody touches.
CONVERSATION = ("What is the merger project's budget?", "How is the warehouse project reviewed?")


def _open(client: TestClient, headers: dict[str, str], conversation_id: str) -> dict:
    response = client.get(f"/v1/conversations/{conversation_id}", headers=headers)
    assert response.status_code == 200, response.text
    return response.json()


def _build(source: Path, data_dir: Path) -> None:
    result = materialize_everything(source, data_dir, with_evals=False)
    assert result.success  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Story]:
    root = tmp_path_factory.mktemp("pinned")
    source, data_dir = root / "corpus", root / "data"
    (source / "pub").mkdir(parents=True)
    (source / "sec").mkdir()
    (source / "sec" / "_access.json").write_text(json.dumps({"groups": ["security"]}))
    for rel_path, topic in ((ALPHA, "the warehouse"), (BRAVO, "the launch"), (DELTA, "a merger")):
        (source / rel_path).write_text(_document(Path(rel_path).stem, topic))
    keys_file = root / "api-keys.yaml"
    keys = {
        "public": add_key(keys_file, "everyone", []),
        "security": add_key(keys_file, "security-team", ["security"]),
    }

    _build(source, data_dir)
    cited = _first_chunks(data_dir)
    assert set(cited) == {ALPHA, BRAVO, DELTA}
    with _client(data_dir, keys_file) as client:
        hit = client.post(
            "/v1/search",
            json={"query": "launch timeline", "top_k": 1},
            headers={"X-API-Key": keys["public"]},
        ).json()["hits"][0]
        version = hit["index_version"]
        builds = [_observe(keys, client, cited, version)]
        outsider = {"X-API-Key": keys["public"]}
        conversation_id = client.post("/v1/conversations", json={}, headers=outsider).json()[
            "conversation_id"
        ]
        for question in CONVERSATION:
            asked = client.post(
                "/v1/ask",
                json={"question": question, "conversation_id": conversation_id},
                headers=outsider,
            )
            assert asked.status_code == 200, asked.text
        opened = [_open(client, outsider, conversation_id)]

    # A move into the restricted folder, and a sidecar restricting a document in place.
    (source / MOVED).write_text((source / BRAVO).read_text())
    (source / BRAVO).unlink()
    (source / f"{DELTA}.meta.json").write_text(json.dumps({"groups": ["security"]}))
    _build(source, data_dir)
    assert MOVED in _first_chunks(data_dir)
    with _client(data_dir, keys_file) as client:
        builds.append(_observe(keys, client, cited, version))
        opened.append(_open(client, outsider, conversation_id))
        # Nobody else opens, renames or deletes it, whatever their groups.
        insider = {"X-API-Key": keys["security"]}
        path = f"/v1/conversations/{conversation_id}"
        assert client.get(path, headers=insider).status_code == 404
        assert client.patch(path, json={"title": "x"}, headers=insider).status_code == 404
        assert client.delete(path, headers=insider).status_code == 404
        listed = client.get("/v1/conversations", headers=insider).json()
        assert listed["total"] == 0 and listed["conversations"] == []

    # The restricted document deleted.
    (source / DELTA).unlink()
    _build(source, data_dir)
    assert DELTA not in _first_chunks(data_dir)
    with _client(data_dir, keys_file) as client:
        builds.append(_observe(keys, client, cited, version))
        opened.append(_open(client, outsider, conversation_id))
    yield Story(data_dir, keys_file, keys, version, cited, builds, opened)


def _assert_hidden(build: Build, who: str, rel_path: str, chunk_id: str) -> None:
    """A 404 that says no more than one for a chunk id that never existed."""
    response, absent = build.responses[(who, rel_path)], build.responses[(who, ABSENT_ID)]
    assert response.status_code == absent.status_code == 404, response.text
    assert response.text.replace(chunk_id, "ID") == absent.text.replace(ABSENT_ID, "ID")


def _shown(response: httpx.Response) -> list[dict]:
    assert response.status_code == 200, response.text
    body = response.json()
    return [*body["before"], body["chunk"], *body["after"]]


def test_the_cited_version_served_every_document_to_everyone(story: Story) -> None:
    """Guards the fixtures: at the first build every cited document is public, whole."""
    first = story.builds[0]
    for rel_path in (ALPHA, BRAVO, DELTA):
        for who in ("public", "security"):
            response = first.responses[(who, rel_path)]
            assert len(_shown(response)) == len(SECTIONS), (who, rel_path)
            assert response.json()["changed_since"] == "unchanged"


def test_a_document_moved_into_a_restricted_folder_is_hidden_at_its_old_version(
    story: Story,
) -> None:
    """The move gives the document a new id, so the old one looks removed; its text lives on
    under the restricted folder's list, which an outsider lacks."""
    for build in story.builds[1:]:
        _assert_hidden(build, "public", BRAVO, story.cited[BRAVO])
        insider = build.responses[("security", BRAVO)]
        assert len(_shown(insider)) == len(SECTIONS)
        assert insider.json()["changed_since"] == "removed"


def test_a_document_restricted_and_then_deleted_stays_hidden_at_its_old_version(
    story: Story,
) -> None:
    """Deleted, a document keeps the access list it was last indexed with."""
    restricted, deleted = story.builds[1], story.builds[2]
    _assert_hidden(restricted, "public", DELTA, story.cited[DELTA])
    _assert_hidden(deleted, "public", DELTA, story.cited[DELTA])
    assert restricted.responses[("security", DELTA)].json()["changed_since"] == "unchanged"
    insider = deleted.responses[("security", DELTA)]
    assert len(_shown(insider)) == len(SECTIONS)
    assert insider.json()["changed_since"] == "removed"
    # Control: the document nobody touched is served to the outsider all along.
    for build in story.builds:
        assert build.responses[("public", ALPHA)].json()["changed_since"] == "unchanged"


def test_a_version_past_its_retention_is_gone_without_another_build(
    story: Story, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing has cleaned the cited version up: its files, the deleted document's text
    among them, are still there. Its age is checked when it is read."""
    retention = timedelta(hours=Settings().citation_retention_hours)
    later = datetime.now(UTC) + retention + timedelta(hours=1)
    with _client(story.data_dir, story.keys_file) as client:
        latest = client.post(
            "/v1/search",
            json={"query": "warehouse scope", "top_k": 1},
            headers={"X-API-Key": story.keys["public"]},
        ).json()["hits"][0]
        assert latest["index_version"] > story.cited_version
        monkeypatch.setattr(tables, "_utc_now", lambda: later)
        for who, rel_path in (("security", DELTA), ("public", ALPHA), ("security", BRAVO)):
            response = client.get(
                f"/v1/chunks/{story.cited[rel_path]}?version={story.cited_version}",
                headers={"X-API-Key": story.keys[who]},
            )
            assert response.status_code == 410, (who, rel_path, response.text)
            assert "no longer kept" in response.json()["detail"]
        # The latest version is what the index holds now: it never ages.
        current = client.get(latest["citation"], headers={"X-API-Key": story.keys["public"]})
        assert current.status_code == 200 and current.json()["changed_since"] == "unchanged"


def test_a_saved_answer_is_withheld_once_its_document_is_restricted(story: Story) -> None:
    """The outsider's conversation outlives each app (a restart): its answer about the
    document restricted since is withheld, question kept; the other stays whole."""
    first, *later = story.conversation
    assert first["title"] == CONVERSATION[0] and first["turn_count"] == 2
    merger, warehouse = first["turns"]
    assert not merger["withheld"]
    assert {c["rel_path"] for c in merger["answer"]["citations"]} == {DELTA}
    restricted_since = {c["chunk_id"] for c in merger["answer"]["citations"]}
    assert restricted_since & set(warehouse["answer"]["trace"]["context_chunk_ids"])
    for opened in later:
        merger, warehouse_now = opened["turns"]
        assert merger["question"] == CONVERSATION[0]
        assert merger["withheld"] and merger["answer"] is None
        # The other answer stays, without the ids of the passages restricted since.
        assert not warehouse_now["withheld"]
        assert warehouse_now["answer"]["answer"] == warehouse["answer"]["answer"]
        assert warehouse_now["answer"]["citations"] == warehouse["answer"]["citations"]
        shown = json.dumps(opened)
        assert not [chunk_id for chunk_id in restricted_since if chunk_id in shown]
        assert "merger" not in shown.replace(CONVERSATION[0], "")
