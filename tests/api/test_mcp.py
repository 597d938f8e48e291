"""The MCP tools as an agent reaches them: the SDK's own client against a real `lorehouse
serve` (/mcp over streamable HTTP) and against `lorehouse mcp` started over stdio, with an
outsider's key (no groups) and an insider's.

The attacks of tests/api/test_access_attacks.py run through MCP there too; here, what a
caller gets: the same results as the HTTP API, errors it can read, and refusals."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest
from fastapi.testclient import TestClient
from mcp import Client
from typer.testing import CliRunner

from api.main import create_app
from cli.main import app as cli
from lorehouse.api_keys import KEYS_FILE_CHECK_SECONDS, add_key, revoke_key
from lorehouse.settings import Settings, get_settings
from lorehouse.stores.duckdb_store import DuckDBStore
from tests.mcp_client import (
    ToolResult,
    call_tool,
    call_tools,
    http_target,
    list_tools,
    running_server,
    stdio_target,
)

TOOLS = {"search", "ask", "get_chunk", "list_documents"}
QUESTION = "How many weeks of parental leave do primary caregivers get?"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    path = tmp_path_factory.mktemp("mcp-keys") / "api-keys.yaml"
    return {
        "file": str(path),
        "outsider": add_key(path, "outsider", []),
        "insider": add_key(path, "insider", ["security", "hr"]),
    }


@pytest.fixture(scope="module")
def served(
    materialized_sample: Path, keys: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A real `lorehouse serve` over the sample corpus, keys required; its base URL."""
    logs = tmp_path_factory.mktemp("mcp-serve")
    with running_server(materialized_sample, logs, LOREHOUSE_API_KEYS_FILE=keys["file"]) as server:
        yield server.base_url


@pytest.fixture(scope="module")
def restricted(materialized_sample: Path) -> dict[str, set[str]]:
    """The sample corpus's restricted documents and chunks (the `security` folder)."""
    store = DuckDBStore(materialized_sample / "lorehouse.duckdb")
    documents, chunks = store.table("documents"), store.table("chunks")
    found = {
        "docs": set(documents[documents["acl"].map(len) > 0]["doc_id"]),
        "chunks": set(chunks[chunks["acl"].map(len) > 0]["chunk_id"]),
    }
    assert found["docs"] and found["chunks"]
    return found


def _as(keys: dict[str, str], who: str) -> dict[str, str]:
    return {"X-API-Key": keys[who]}


def test_the_tools_say_what_a_caller_gets(served: str, keys: dict[str, str]) -> None:
    tools = {tool.name: tool for tool in list_tools(http_target(served, _as(keys, "outsider")))}
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.description and len(tool.description) > 60, tool.name
        assert tool.output_schema and tool.output_schema.get("properties"), tool.name
        assert tool.annotations and tool.annotations.read_only_hint, tool.name
    search = tools["search"].input_schema
    assert search["required"] == ["query"]
    assert {"query", "top_k", "filters", "mode"} <= set(search["properties"])
    filters = json.dumps(search["properties"]["filters"]) + json.dumps(search.get("$defs", {}))
    for field in ("doc_ids", "page_from", "page_to", "file_types", "is_table"):
        assert field in filters, field
    assert tools["get_chunk"].input_schema["required"] == ["chunk_id"]


def test_the_tools_answer_as_the_http_api_does(served: str, keys: dict[str, str]) -> None:
    """Each tool returns what its HTTP twin returns to the same key."""
    insider = _as(keys, "insider")
    http = httpx.Client(base_url=served, headers=insider, timeout=120)
    found, answered, documents = call_tools(
        http_target(served, insider),
        [
            ("search", {"query": "security incident severity levels", "top_k": 5}),
            ("ask", {"question": QUESTION}),
            ("list_documents", {"limit": 200}),
        ],
    )
    via_http = http.post(
        "/v1/search", json={"query": "security incident severity levels", "top_k": 5}
    ).json()
    assert [h["chunk_id"] for h in found.ok["hits"]] == [h["chunk_id"] for h in via_http["hits"]]
    assert found.ok["hits"][0]["text_chat"] == via_http["hits"][0]["text_chat"]

    asked = http.post("/v1/ask", json={"question": QUESTION}).json()
    assert answered.ok["answer"] == asked["answer"] and answered.ok["answerable"]
    cited = [c["chunk_id"] for c in answered.ok["citations"]]
    assert cited and cited == [c["chunk_id"] for c in asked["citations"]]
    assert http.get("/v1/documents?limit=200").json() == documents.ok

    # A citation's chunk, pinned to the version it was cited from, as /v1/chunks gives it.
    citation = answered.ok["citations"][0]
    chunk = call_tool(
        http_target(served, insider),
        "get_chunk",
        chunk_id=citation["chunk_id"],
        version=citation["index_version"],
        window=2,
    ).ok
    preview = http.get(
        f"/v1/chunks/{citation['chunk_id']}?version={citation['index_version']}&window=2"
    ).json()
    assert chunk == preview and chunk["changed_since"] == "unchanged"


def test_filters_scope_a_search_and_an_answer(served: str, keys: dict[str, str]) -> None:
    insider = _as(keys, "insider")
    documents = call_tool(http_target(served, insider), "list_documents", limit=200).ok
    sheet = next(d for d in documents["documents"] if d["file_type"] == "xlsx")
    by_doc, by_type, asked = call_tools(
        http_target(served, insider),
        [
            ("search", {"query": "total", "top_k": 20, "filters": {"doc_ids": [sheet["doc_id"]]}}),
            ("search", {"query": "policy", "top_k": 20, "filters": {"file_types": ["pdf"]}}),
            ("ask", {"question": QUESTION, "filters": {"doc_ids": [sheet["doc_id"]]}}),
        ],
    )
    assert by_doc.ok["hits"] and {h["doc_id"] for h in by_doc.ok["hits"]} == {sheet["doc_id"]}
    assert by_type.ok["hits"] and {h["file_type"] for h in by_type.ok["hits"]} == {"pdf"}
    cited = {c["doc_id"] for c in asked.ok["citations"]}
    assert cited <= {sheet["doc_id"]} or asked.ok["beyond_filters"]


def test_a_bad_call_is_an_error_the_caller_can_read(served: str, keys: dict[str, str]) -> None:
    outsider = _as(keys, "outsider")
    reversed_pages, blank, unknown_type, missing, gone = call_tools(
        http_target(served, outsider),
        [
            ("search", {"query": "leave", "filters": {"page_from": 5, "page_to": 2}}),
            ("ask", {"question": "   "}),
            ("search", {"query": "leave", "filters": {"file_types": ["exe"]}}),
            ("get_chunk", {"chunk_id": "0" * 32}),
            ("get_chunk", {"chunk_id": "0" * 32, "version": 2**40}),
        ],
    )
    assert reversed_pages.error and "page_from must not be after page_to" in reversed_pages.error
    assert blank.error and "whitespace" in blank.error
    assert unknown_type.error and "file_types" in unknown_type.error
    assert missing.error and f"no chunk '{'0' * 32}'" in missing.error
    assert gone.error and "version" in gone.error


def test_http_without_a_valid_key_is_refused_before_any_tool_runs(
    served: str, keys: dict[str, str]
) -> None:
    for headers in (
        {},
        {"X-API-Key": "lh_forged"},
        {"Authorization": "Bearer"},
        # Two keys: refused, whichever header holds which.
        {"X-API-Key": keys["outsider"], "Authorization": f"Bearer {keys['insider']}"},
    ):
        response = httpx.post(f"{served}/mcp", json=INITIALIZE, headers={**MCP_HEADERS, **headers})
        assert response.status_code == 401, (headers, response.text)
        assert response.headers["WWW-Authenticate"] == "Bearer"
        assert set(response.json()) == {"detail"}
    # Control: the same request with a key is answered, and by Lorehouse's server.
    response = httpx.post(
        f"{served}/mcp",
        json=INITIALIZE,
        headers={**MCP_HEADERS, "Authorization": f"Bearer {keys['outsider']}"},
    )
    assert response.status_code == 200, response.text
    assert response.json()["result"]["serverInfo"]["name"] == "lorehouse"


def test_a_page_renaming_its_host_to_the_server_is_refused(materialized_sample: Path) -> None:
    """DNS rebinding: a page at another name reaching a local server without keys."""
    settings = Settings(data_dir=materialized_sample)
    with TestClient(create_app(settings), base_url="http://127.0.0.1:8000") as client:
        assert client.post("/mcp", json=INITIALIZE, headers=MCP_HEADERS).status_code == 200
        renamed = client.post(
            "/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "Host": "attacker.example:8000"}
        )
        assert renamed.status_code == 421
        foreign = client.post(
            "/mcp",
            json=INITIALIZE,
            headers={**MCP_HEADERS, "Origin": "http://attacker.example"},
        )
        assert foreign.status_code == 403
    anywhere = Settings(data_dir=materialized_sample, mcp_allowed_hosts="*")
    with TestClient(create_app(anywhere), base_url="http://lorehouse.internal") as client:
        assert client.post("/mcp", json=INITIALIZE, headers=MCP_HEADERS).status_code == 200


def test_stdio_answers_as_its_key_until_the_key_is_revoked(
    materialized_sample: Path, tmp_path: Path, restricted: dict[str, set[str]]
) -> None:
    keys_file = tmp_path / "api-keys.yaml"
    outsider = add_key(keys_file, "desk-outsider", [])
    insider = add_key(keys_file, "desk-insider", ["security", "hr"])

    def listed(key: str) -> set[str]:
        target = stdio_target(
            materialized_sample,
            {"LOREHOUSE_API_KEYS_FILE": str(keys_file), "LOREHOUSE_MCP_API_KEY": key},
            tmp_path,
        )
        page = call_tool(target, "list_documents", limit=200).ok
        return {d["doc_id"] for d in page["documents"]}

    public = listed(outsider)
    assert public and not public & restricted["docs"]
    assert restricted["docs"] <= listed(insider)

    # One session: a search, then the key is revoked, then every call is refused.
    env = {"LOREHOUSE_API_KEYS_FILE": str(keys_file), "LOREHOUSE_MCP_API_KEY": insider}
    target = stdio_target(materialized_sample, env, tmp_path)

    async def session() -> tuple[dict, str]:
        async with Client(target, read_timeout_seconds=120) as client:
            before = ToolResult.of(
                await client.call_tool("search", {"query": "incident severity", "top_k": 3})
            )
            revoke_key(keys_file, "desk-insider")
            # A server looks at the keys file at most this often.
            await anyio.sleep(KEYS_FILE_CHECK_SECONDS + 0.2)
            after = ToolResult.of(await client.call_tool("list_documents", {}))
            assert after.error is not None
            return before.ok, after.error

    before, refused = anyio.run(session)
    assert {h["chunk_id"] for h in before["hits"]} & restricted["chunks"]
    assert "a valid API key is required" in refused


def test_stdio_refuses_to_start_without_a_key_of_the_keys_file(
    materialized_sample: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys_file = tmp_path / "api-keys.yaml"
    add_key(keys_file, "someone", [])
    monkeypatch.setenv("LOREHOUSE_DATA_DIR", str(materialized_sample))
    monkeypatch.setenv("LOREHOUSE_API_KEYS_FILE", str(keys_file))
    for key in (None, "lh_not-a-key"):
        if key is None:
            monkeypatch.delenv("LOREHOUSE_MCP_API_KEY", raising=False)
        else:
            monkeypatch.setenv("LOREHOUSE_MCP_API_KEY", key)
        get_settings.cache_clear()
        result = CliRunner().invoke(cli, ["mcp"])
        assert result.exit_code == 2, result.output
        assert "LOREHOUSE_MCP_API_KEY must hold a key" in result.output
    get_settings.cache_clear()
