"""Saved conversations: each key's own, kept in their database across restarts, continued
with their history, refused to every other caller, deleted when asked and when retention
ends. (That an answer is withheld once its document is restricted is part of the story in
tests/api/test_pinned_citations.py, which rebuilds a corpus under it.)"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from api.main import create_app
from lorehouse.api_keys import add_key
from lorehouse.settings import Settings
from lorehouse.stores.conversations import CONVERSATIONS, TURNS, ConversationStore
from tests.provider_server import provider_server

LEAVE = "How many weeks of parental leave do primary caregivers get?"
FOLLOW_UP = "And how long for secondary caregivers?"
ABSENT = "0" * 32


@pytest.fixture
def who(tmp_path: Path) -> dict[str, dict[str, str]]:
    """Headers of two callers; their keys are in tmp_path/keys.yaml."""
    path = tmp_path / "keys.yaml"
    return {
        "reader": {"X-API-Key": add_key(path, "reader", [])},
        "other": {"X-API-Key": add_key(path, "other-reader", ["hr"])},
    }


@pytest.fixture
def settings(materialized_sample: Path, tmp_path: Path, who: dict) -> Settings:
    """The sample's stores, read-only; the conversations in a database of this test's own."""
    return Settings(
        data_dir=materialized_sample,
        api_keys_file=tmp_path / "keys.yaml",
        conversations_url=f"sqlite:///{tmp_path / 'conversations.sqlite3'}",
    )


@pytest.fixture
def api(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as client:
        yield client


def _rows(settings: Settings, conversation_id: str) -> tuple[int, int]:
    """(conversations, turns) the database holds under `conversation_id`."""
    engine = sa.create_engine(settings.conversations_database)
    with engine.connect() as connection:
        counted = [
            connection.execute(
                sa.select(sa.func.count()).where(table.c.conversation_id == conversation_id)
            ).scalar_one()
            for table in (CONVERSATIONS, TURNS)
        ]
    engine.dispose()
    return counted[0], counted[1]


def test_a_conversation_is_kept_continued_renamed_and_deleted(
    api: TestClient, settings: Settings, who: dict
) -> None:
    reader = who["reader"]
    created = api.post("/v1/conversations", json={}, headers=reader)
    assert created.status_code == 201, created.text
    conversation_id = created.json()["conversation_id"]
    assert len(conversation_id) == 32 and created.json()["turn_count"] == 0

    first = api.post(
        "/v1/ask", json={"question": LEAVE, "conversation_id": conversation_id}, headers=reader
    )
    assert first.status_code == 200, first.text
    streamed = api.post(
        "/v1/ask",
        json={"question": FOLLOW_UP, "conversation_id": conversation_id, "stream": True},
        headers=reader,
    )
    assert streamed.status_code == 200 and "event: answer" in streamed.text
    other = api.post("/v1/conversations", json={"title": "Travel"}, headers=reader).json()

    listed = api.get("/v1/conversations", headers=reader).json()
    assert listed["total"] == 2
    # The latest asked-in first: the travel conversation was created after the two questions.
    assert [c["conversation_id"] for c in listed["conversations"]] == [
        other["conversation_id"],
        conversation_id,
    ]
    assert listed["conversations"][1]["turn_count"] == 2
    assert listed["conversations"][1]["title"] == LEAVE  # named by its first question
    page = api.get("/v1/conversations?limit=1&offset=1", headers=reader).json()
    assert [c["conversation_id"] for c in page["conversations"]] == [conversation_id]

    # A restart: a new app over the same database opens it as it was.
    with TestClient(create_app(settings)) as restarted:
        opened = restarted.get(f"/v1/conversations/{conversation_id}", headers=reader).json()
    assert [t["question"] for t in opened["turns"]] == [LEAVE, FOLLOW_UP]
    assert opened["turns"][0]["answer"]["answer"] == first.json()["answer"]
    assert opened["turns"][0]["answer"]["citations"] == first.json()["citations"]
    assert not any(t["withheld"] for t in opened["turns"])

    renamed = api.patch(
        f"/v1/conversations/{conversation_id}",
        json={"title": "  Parental   leave "},
        headers=reader,
    )
    assert renamed.status_code == 200 and renamed.json()["title"] == "Parental leave"

    assert _rows(settings, conversation_id) == (1, 2)
    assert api.delete(f"/v1/conversations/{conversation_id}", headers=reader).status_code == 204
    assert _rows(settings, conversation_id) == (0, 0)
    path = f"/v1/conversations/{conversation_id}"
    assert api.get(path, headers=reader).status_code == 404
    assert api.delete(path, headers=reader).status_code == 404
    gone = api.post(
        "/v1/ask", json={"question": LEAVE, "conversation_id": conversation_id}, headers=reader
    )
    assert (
        gone.status_code == 404 and gone.json()["detail"] == f"no conversation {conversation_id!r}"
    )
    assert api.get("/v1/conversations", headers=reader).json()["total"] == 1


def test_nobody_reads_lists_renames_or_deletes_another_callers_conversation(
    api: TestClient, who: dict
) -> None:
    reader, other = who["reader"], who["other"]
    mine = api.post("/v1/conversations", json={"title": "Mine"}, headers=reader).json()
    conversation_id = mine["conversation_id"]
    api.post(
        "/v1/ask", json={"question": LEAVE, "conversation_id": conversation_id}, headers=reader
    )

    def refused(identifier: str) -> list[tuple[int, str]]:
        path = f"/v1/conversations/{identifier}"
        answers = [
            api.get(path, headers=other),
            api.patch(path, json={"title": "Taken"}, headers=other),
            api.delete(path, headers=other),
            api.post(
                "/v1/ask", json={"question": LEAVE, "conversation_id": identifier}, headers=other
            ),
        ]
        return [(a.status_code, a.text.replace(identifier, "ID")) for a in answers]

    # The owner's id and one that never existed get the same answers, word for word.
    assert refused(conversation_id) == refused(ABSENT)
    assert {status for status, _ in refused(conversation_id)} == {404}
    assert api.get("/v1/conversations", headers=other).json() == {
        "total": 0,
        "limit": 50,
        "offset": 0,
        "conversations": [],
    }
    # Untouched for its owner.
    kept = api.get(f"/v1/conversations/{conversation_id}", headers=reader).json()
    assert kept["title"] == "Mine" and kept["turn_count"] == 1


def test_a_conversation_s_earlier_turns_are_the_history_the_model_reads(
    settings: Settings, who: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "local-test")
    with provider_server() as server:
        answered = settings.model_copy(
            update={
                "llm_model": "openai/gpt-4o-mini",
                "llm_api_base": server.base_url,
                "llm_max_attempts": 1,
            }
        )
        server.chat_answer = _keeps_the_question
        with TestClient(create_app(answered)) as api:
            reader = who["reader"]
            conversation_id = api.post("/v1/conversations", json={}, headers=reader).json()[
                "conversation_id"
            ]
            first = api.post(
                "/v1/ask",
                json={"question": LEAVE, "conversation_id": conversation_id},
                headers=reader,
            ).json()
            server.chat_prompts.clear()
            api.post(
                "/v1/ask",
                json={"question": FOLLOW_UP, "conversation_id": conversation_id},
                headers=reader,
            )
            rewriting = [p for p in server.chat_prompts if p.startswith("You rewrite")]
    assert len(rewriting) == 1
    history = rewriting[0].split("Conversation so far", 1)[1].split("New question", 1)[0]
    assert f"user: {LEAVE}" in history
    assert f"assistant: {first['answer']}" in history


def _keeps_the_question(prompt: str) -> str:
    """A model that rewrites nothing, lets retrieval search everything and cites [1]."""
    if prompt.startswith("You rewrite"):
        question = prompt.split('New question:\n"""\n', 1)[1].split('\n"""', 1)[0]
        return json.dumps({"standalone": question, "sub_queries": [question]})
    if prompt.startswith("You choose"):
        return json.dumps({"documents": [], "all": True})
    return "Primary caregivers get 20 weeks [1]."


def test_conversations_past_retention_are_not_shown_and_are_deleted(
    settings: Settings, who: dict
) -> None:
    kept = settings.model_copy(update={"conversation_retention_days": 30})
    with TestClient(create_app(kept)) as api:
        reader = who["reader"]
        old, recent = (
            api.post("/v1/conversations", json={"title": title}, headers=reader).json()
            for title in ("Old", "Recent")
        )
        engine = sa.create_engine(settings.conversations_database)
        with engine.begin() as connection:
            connection.execute(
                CONVERSATIONS.update()
                .where(CONVERSATIONS.c.conversation_id == old["conversation_id"])
                .values(updated_at=datetime.now(UTC) - timedelta(days=31))
            )
        engine.dispose()
        listed = api.get("/v1/conversations", headers=reader).json()
        assert [c["title"] for c in listed["conversations"]] == ["Recent"]
        assert (
            api.get(f"/v1/conversations/{old['conversation_id']}", headers=reader).status_code
            == 404
        )
        assert recent["conversation_id"]
    store = ConversationStore(settings.conversations_database, retention_days=30)
    assert store.purge() == 1
    assert _rows(settings, old["conversation_id"]) == (0, 0)
    assert _rows(settings, recent["conversation_id"]) == (1, 0)
    # 0 keeps every conversation until its owner deletes it.
    assert ConversationStore(settings.conversations_database, retention_days=0).purge() == 0
    store.dispose()


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/v1/conversations", {"title": "x" * 201}),
        ("POST", "/v1/conversations", {"title": "   "}),
        ("POST", "/v1/conversations", {"name": "typo"}),
        ("PATCH", f"/v1/conversations/{ABSENT}", {}),
        ("GET", "/v1/conversations?limit=0", None),
        (
            "POST",
            "/v1/ask",
            {
                "question": LEAVE,
                "conversation_id": ABSENT,
                "history": [{"role": "user", "content": "earlier"}],
            },
        ),
        ("POST", "/v1/ask", {"question": LEAVE, "conversation_id": ""}),
    ],
)
def test_a_bad_conversation_request_is_a_422_naming_the_field(
    api: TestClient, who: dict, method: str, path: str, body: dict | None
) -> None:
    response = api.request(method, path, json=body, headers=who["reader"])
    assert response.status_code == 422, response.text
    assert response.json()["detail"]
