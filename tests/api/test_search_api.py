"""The HTTP API over stores materialized from the sample corpus: search, previews, ACL, errors."""

from __future__ import annotations

import re
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import duckdb
import pytest
from fastapi.testclient import TestClient

from api.main import create_app
from lorehouse.api_keys import add_key
from lorehouse.settings import Settings
from lorehouse.stores.duckdb_store import DuckDBStore
from lorehouse.text import chunk_body
from lorehouse.wiring import Lorehouse
from tests.provider_server import provider_server


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    path = tmp_path_factory.mktemp("keys") / "api-keys.yaml"
    return {
        "file": path,
        "public": add_key(path, "everyone", []),
        "security": add_key(path, "security-team", ["security"]),
    }


@pytest.fixture(scope="module")
def client(materialized_sample: Path, keys: dict[str, object]) -> Iterator[TestClient]:
    settings = Settings(data_dir=materialized_sample, api_keys_file=keys["file"])
    with TestClient(create_app(settings)) as test_client:
        yield test_client


@pytest.fixture(scope="module")
def open_client(materialized_sample: Path) -> Iterator[TestClient]:
    with TestClient(create_app(Settings(data_dir=materialized_sample))) as test_client:
        yield test_client


def _as(keys: dict[str, object], who: str) -> dict[str, str]:
    return {"X-API-Key": str(keys[who])}


def _search(client: TestClient, headers: dict[str, str], **body: object) -> dict:
    response = client.post("/v1/search", json=body, headers=headers)
    assert response.status_code == 200, response.text
    return response.json()


@pytest.mark.parametrize("mode", ["vector", "bm25", "hybrid"])
def test_each_mode_finds_the_answer_with_a_citation(client, keys, mode: str) -> None:
    result = _search(
        client, _as(keys, "public"), query="How many weeks of parental leave do I get?", mode=mode
    )
    assert result["mode"] == mode and len(result["hits"]) == 8
    top = result["hits"][:3]
    assert any("20 weeks" in hit["text_chat"] for hit in top), [h["text_chat"] for h in top]
    hit = top[0]
    assert hit["citation"] == f"/v1/chunks/{hit['chunk_id']}?version={hit['index_version']}"
    preview = client.get(hit["citation"], headers=_as(keys, "public"))
    assert preview.status_code == 200 and preview.json()["changed_since"] == "unchanged"
    assert hit["title"] and hit["heading_path"] and hit["page_start"] >= 1
    expected_scores = {"vector": {"vector"}, "bm25": {"bm25"}, "hybrid": {"rrf"}}[mode]
    assert expected_scores <= set(hit["scores"])
    assert [h["rank"] for h in result["hits"]] == list(range(1, 9))
    scores = [h["score"] for h in result["hits"]]
    assert scores == sorted(scores, reverse=True)


def test_without_a_reranker_the_first_stage_order_is_final(client, keys) -> None:
    result = _search(
        client, _as(keys, "public"), query="laptop encryption requirements", rerank="none"
    )
    assert result["rerank"] == "none" and result["hits"]
    assert "rerank" not in result["hits"][0]["scores"]
    assert "acceptable-use-policy" in result["hits"][0]["rel_path"]
    # The field-fusion reranker lost recall everywhere it was measured and was removed.
    removed = client.post(
        "/v1/search", headers=_as(keys, "public"), json={"query": "laptop", "rerank": "rrf"}
    )
    assert removed.status_code == 422 and "none" in removed.text


def test_late_interaction_reorders_the_candidates_and_keeps_the_evidence_first(
    client, keys
) -> None:
    public = _as(keys, "public")
    query = "How many weeks of parental leave do primary caregivers get?"
    plain = _search(client, public, query=query, rerank="none", top_k=8)["hits"]
    result = _search(client, public, query=query, rerank="maxsim", top_k=8)
    hits = result["hits"]
    assert result["rerank"] == "maxsim" and "rerank" in result["timings_ms"]
    assert "20 weeks" in hits[0]["text_chat"]
    assert all({"maxsim", "rerank"} <= set(hit["scores"]) for hit in hits)
    assert [hit["score"] for hit in hits] == sorted((h["score"] for h in hits), reverse=True)
    # The same candidates, another order: MaxSim reranks, it does not search again.
    assert {h["chunk_id"] for h in hits} <= {
        h["chunk_id"] for h in _search(client, public, query=query, rerank="none", top_k=30)["hits"]
    }
    assert [h["chunk_id"] for h in hits] != [h["chunk_id"] for h in plain]


def test_filters_restrict_documents_pages_types_and_tables(client, keys) -> None:
    headers = _as(keys, "public")
    documents = client.get("/v1/documents", headers=headers).json()["documents"]
    handbook = next(d for d in documents if d["rel_path"] == "handbook/employee-handbook.pdf")

    only_handbook = _search(
        client, headers, query="leave", top_k=20, filters={"doc_ids": [handbook["doc_id"]]}
    )
    assert only_handbook["hits"]
    assert {h["doc_id"] for h in only_handbook["hits"]} == {handbook["doc_id"]}

    pages = _search(
        client,
        headers,
        query="leave",
        top_k=50,
        filters={"doc_ids": [handbook["doc_id"]], "page_from": 5, "page_to": 6},
    )
    assert pages["hits"]
    assert all(h["page_end"] >= 5 and h["page_start"] <= 6 for h in pages["hits"])
    assert len(pages["hits"]) < len(
        _search(client, headers, query="leave", top_k=50, filters=only_handbook_filter(handbook))[
            "hits"
        ]
    )

    spreadsheets = _search(
        client, headers, query="budget", top_k=20, filters={"file_types": ["xlsx"]}
    )
    assert spreadsheets["hits"] and {h["file_type"] for h in spreadsheets["hits"]} == {"xlsx"}

    tables = _search(client, headers, query="expenses", top_k=20, filters={"is_table": True})
    assert tables["hits"] and all(h["is_table"] for h in tables["hits"])
    prose = _search(client, headers, query="expenses", top_k=20, filters={"is_table": False})
    assert prose["hits"] and not any(h["is_table"] for h in prose["hits"])


def only_handbook_filter(handbook: dict) -> dict:
    return {"doc_ids": [handbook["doc_id"]]}


def test_chunk_preview_shows_neighbours_in_document_order(client, keys) -> None:
    headers = _as(keys, "public")
    hit = _search(client, headers, query="phased return to work after leave")["hits"][0]
    preview = client.get(f"/v1/chunks/{hit['chunk_id']}?window=2", headers=headers)
    assert preview.status_code == 200
    body = preview.json()
    assert body["chunk"]["chunk_id"] == hit["chunk_id"]
    position = body["chunk"]["position"]
    assert [c["position"] for c in body["before"]] == list(range(max(0, position - 2), position))
    assert all(c["doc_id"] == hit["doc_id"] for c in body["before"] + body["after"])
    assert [c["position"] for c in body["after"]] == sorted(c["position"] for c in body["after"])


def test_passages_join_each_hit_to_its_neighbours_once_within_its_document(client, keys) -> None:
    headers = _as(keys, "public")
    query = "phased return to work after leave"
    chunks = _search(client, headers, query=query, top_k=8)["hits"]
    passages = _search(client, headers, query=query, top_k=8, passage_words=400)["hits"]
    assert all(hit["passage_chunk_ids"] == [] for hit in chunks)
    # The same ranking underneath: the best chunk leads, now with its neighbours.
    assert passages[0]["chunk_id"] == chunks[0]["chunk_id"]
    assert [hit["rank"] for hit in passages] == list(range(1, len(passages) + 1))
    assert len(passages) == 8
    shown: set[str] = set()
    for hit in passages:
        members = hit["passage_chunk_ids"]
        assert hit["chunk_id"] in members
        assert "passage_parts" not in hit, "the chunks' texts are not sent twice"
        assert not shown & set(members), "a chunk appears in two passages"
        shown |= set(members)
        views = [client.get(f"/v1/chunks/{m}", headers=headers).json()["chunk"] for m in members]
        assert {view["doc_id"] for view in views} == {hit["doc_id"]}
        positions = [view["position"] for view in views]
        assert positions == list(range(positions[0], positions[0] + len(members)))
        for view in views:
            assert chunk_body(view["text_chat"], view["heading_path"]) in hit["text_chat"]
    assert any(len(hit["passage_chunk_ids"]) > 1 for hit in passages)
    # 0 asks for chunks, whatever the server's default.
    assert _search(client, headers, query=query, top_k=8, passage_words=0)["hits"] == chunks


def test_the_server_default_can_return_passages(materialized_sample: Path) -> None:
    settings = Settings(data_dir=materialized_sample, search_passage_words=400)
    with TestClient(create_app(settings)) as passages_client:
        hits = _search(passages_client, {}, query="phased return to work after leave")["hits"]
        chunks = _search(
            passages_client, {}, query="phased return to work after leave", passage_words=0
        )["hits"]
    assert any(len(hit["passage_chunk_ids"]) > 1 for hit in hits)
    assert all(hit["passage_chunk_ids"] == [] for hit in chunks)

    # In the process, a passage hit keeps each of its chunks' own text and heading, for
    # the extractive answers of /v1/ask that read them one by one.
    retriever = Lorehouse(settings).retriever()
    for hit in retriever.search("phased return to work after leave", passage_words=400).hits:
        assert len(hit.passage_parts) == len(hit.passage_chunk_ids)
        for part in hit.passage_parts:
            assert chunk_body(part.text_chat, part.heading_path) in hit.text_chat


def test_documents_are_paginated_with_summaries(client, keys) -> None:
    headers = _as(keys, "security")
    first = client.get("/v1/documents?limit=4&offset=0", headers=headers).json()
    second = client.get("/v1/documents?limit=4&offset=4", headers=headers).json()
    assert first["total"] == second["total"] == 9  # all but the hr-restricted spreadsheet
    assert len(first["documents"]) == 4
    assert not {d["doc_id"] for d in first["documents"]} & {
        d["doc_id"] for d in second["documents"]
    }
    assert all(d["summary"] for d in first["documents"])


def test_a_health_probe_opens_the_feature_store_once_and_writes_nothing(
    client, keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Probes come every few seconds: each costs one read of the DuckDB file, not a schema
    check (a write transaction) and two counts it does not show."""
    opened: list[bool] = []
    real_connect = duckdb.connect

    def counting_connect(*args: object, **kwargs: object) -> duckdb.DuckDBPyConnection:
        opened.append(True)
        return real_connect(*args, **kwargs)

    monkeypatch.setattr(duckdb, "connect", counting_connect)
    client.get("/v1/documents?limit=1", headers=_as(keys, "public"))  # the store is built once
    opened.clear()
    for _ in range(5):
        assert client.get("/healthz").json() == {"status": "ok", "detail": None}
    assert len(opened) == 5


def test_health_counts_what_the_caller_may_see(client, keys) -> None:
    assert client.get("/healthz").json() == {"status": "ok", "detail": None}
    assert client.get("/v1/health").status_code == 401
    public = client.get("/v1/health", headers=_as(keys, "public")).json()
    security = client.get("/v1/health", headers=_as(keys, "security")).json()
    assert public["status"] == security["status"] == "ok"
    assert public["duckdb"]["counts"] == {"documents": 7}  # the hr-only document is hidden too
    assert security["duckdb"]["counts"] == {"documents": 9}
    assert 50 < public["lancedb"]["counts"]["chunks"] < security["lancedb"]["counts"]["chunks"]
    # Who the key is, by its name: the chat page says who is signed in.
    assert (public["caller"], security["caller"]) == ("everyone", "security-team")


def test_keys_are_required_when_configured(client, keys) -> None:
    assert client.post("/v1/search", json={"query": "leave"}).status_code == 401
    wrong = client.post("/v1/search", json={"query": "leave"}, headers={"X-API-Key": "lh_nope"})
    assert wrong.status_code == 401
    assert "API key" in wrong.json()["detail"]
    bearer = {"Authorization": f"Bearer {keys['public']}"}
    assert client.post("/v1/search", json={"query": "leave"}, headers=bearer).status_code == 200
    assert client.get("/v1/documents").status_code == 401
    assert client.get("/v1/chunks/abc").status_code == 401
    assert str(keys["public"]) not in Path(str(keys["file"])).read_text()


def test_without_a_keys_file_callers_see_public_documents_only(open_client) -> None:
    total = open_client.get("/v1/documents").json()["total"]
    assert total == 7  # 10 documents, 2 security-only, 1 hr-only
    hits = open_client.post(
        "/v1/search", json={"query": "incident severity levels", "top_k": 30}
    ).json()["hits"]
    assert hits and not any(h["rel_path"].startswith("security/") for h in hits)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"query": ""}, "query"),
        ({"query": "   "}, "query"),
        ({"query": "x" * 2001}, "query"),
        ({"query": "leave", "top_k": 0}, "top_k"),
        ({"query": "leave", "top_k": 101}, "top_k"),
        ({"query": "leave", "mode": "semantic"}, "mode"),
        ({"query": "leave", "rerank": "cross-encoder"}, "rerank"),
        ({"query": "leave", "passage_words": -1}, "passage_words"),
        ({"query": "leave", "passage_words": 5001}, "passage_words"),
        ({"query": "leave", "filters": {"file_types": ["exe"]}}, "filters"),
        ({"query": "leave", "filters": {"file_types": ["PDF"]}}, "filters"),
        ({"query": "leave", "filters": {"page_from": 0}}, "filters"),
        ({"query": "leave", "filters": {"page_from": 6, "page_to": 2}}, "filters"),
        ({"query": "leave", "filters": {"doc_ids": []}}, "filters"),
        ({"query": "leave", "colour": "blue"}, "colour"),
        ({"top_k": 3}, "query"),
        # JSON types are not coerced: a client sending these has a bug to hear about.
        ({"query": "leave", "top_k": "5"}, "top_k"),
        ({"query": "leave", "top_k": True}, "top_k"),
        ({"query": "leave", "top_k": 5.5}, "top_k"),
        ({"query": "leave", "filters": {"is_table": 0}}, "filters"),
        ({"query": "leave", "filters": {"page_from": "2"}}, "filters"),
        # Beyond the 32-bit page numbers the store holds (this was a 500 from LanceDB).
        ({"query": "leave", "filters": {"page_from": 2**31}}, "filters"),
        ({"query": "leave", "filters": {"page_to": 2**31}}, "filters"),
        ({"query": "\u3000\x1c\u2028"}, "query"),
    ],
)
def test_bad_requests_are_422_naming_the_field(client, keys, body: dict, field: str) -> None:
    response = client.post("/v1/search", json=body, headers=_as(keys, "public"))
    assert response.status_code == 422, response.text
    locations = [error["loc"] for error in response.json()["detail"]]
    assert any(field in location for location in locations), locations


def test_malformed_json_and_bad_query_parameters_are_422(client, keys) -> None:
    headers = {**_as(keys, "public"), "Content-Type": "application/json"}
    assert client.post("/v1/search", content=b"{not json", headers=headers).status_code == 422
    assert client.get("/v1/documents?limit=0", headers=headers).status_code == 422
    assert client.get("/v1/documents?offset=-1", headers=headers).status_code == 422
    assert client.get("/v1/chunks/abc?window=9", headers=headers).status_code == 422


def test_nan_infinity_and_lone_surrogates_are_422s_not_500s(client, keys) -> None:
    headers = {**_as(keys, "public"), "Content-Type": "application/json"}
    for raw in (
        b'{"query": "leave", "top_k": NaN}',
        b'{"query": "leave", "top_k": 1e400}',
        b'{"query": "leave", "top_k": -Infinity}',
        b'{"query": "\\ud800"}',
        b'{"query": "leave", "filters": {"doc_ids": ["\\ud800"]}}',
        b'{"query": "leave", "rerank": "\\udfff"}',
    ):
        response = client.post("/v1/search", content=raw, headers=headers)
        assert response.status_code == 422, raw
        assert response.json()["detail"][0]["loc"][0] == "body"


def test_a_body_that_is_not_utf8_is_a_documented_400(client, keys) -> None:
    headers = {**_as(keys, "public"), "Content-Type": "application/json"}
    response = client.post("/v1/search", content=b'{"query": "\xff"}', headers=headers)
    assert response.status_code == 400
    assert response.json()["detail"]
    documented = client.get("/openapi.json").json()["paths"]["/v1/search"]["post"]["responses"]
    assert "400" in documented


def test_the_largest_page_numbers_and_json_integers_written_as_floats_are_accepted(
    client, keys
) -> None:
    headers = _as(keys, "public")
    last_page = 2**31 - 1
    far = _search(client, headers, query="leave", filters={"page_from": last_page})
    assert far["hits"] == []
    everything = _search(client, headers, query="leave", filters={"page_to": last_page})
    assert everything["hits"]
    assert len(_search(client, headers, query="leave", top_k=5.0)["hits"]) == 5


def test_the_blank_text_pattern_in_the_schema_matches_the_server(client) -> None:
    """The served pattern says which queries are blank, exactly as the server's check does."""
    query = client.get("/openapi.json").json()["components"]["schemas"]["SearchRequest"]
    pattern = re.compile(query["properties"]["query"]["pattern"])
    for code in range(sys.maxunicode + 1):
        character = chr(code)
        assert (pattern.search(character) is None) == character.isspace(), hex(code)


def test_the_schema_documents_every_status_and_body_a_route_answers_with(client) -> None:
    """Clients generated from /openapi.json handle only what it lists."""
    schema = client.get("/openapi.json").json()
    expected = {
        ("/v1/search", "post"): {"200", "400", "401", "422", "503"},
        # 404: a conversation_id that is not one of the caller's.
        ("/v1/ask", "post"): {"200", "400", "401", "404", "422", "503"},
        ("/v1/conversations/{conversation_id}", "get"): {"200", "401", "404", "422", "503"},
        ("/v1/chunks/{chunk_id}", "get"): {"200", "401", "404", "422", "503"},
        ("/v1/documents", "get"): {"200", "401", "422", "503"},
        ("/healthz", "get"): {"200", "503"},
        ("/v1/health", "get"): {"200", "401", "503"},
    }
    error = {"$ref": "#/components/schemas/ErrorResponse"}
    for (path, method), statuses in expected.items():
        responses = schema["paths"][path][method]["responses"]
        assert set(responses) == statuses, (path, method)
        for status in statuses & {"400", "401", "404"}:
            assert responses[status]["content"]["application/json"]["schema"] == error
    unauthorized = client.post("/v1/search", json={"query": "leave"})
    assert unauthorized.status_code == 401 and set(unauthorized.json()) == {"detail"}
    assert unauthorized.headers["WWW-Authenticate"] == "Bearer"
    stream = schema["paths"]["/v1/ask"]["post"]["responses"]["200"]["content"]
    assert {"application/json", "text/event-stream"} <= set(stream)
    events = stream["text/event-stream"]["schema"]["oneOf"]
    assert [e["properties"]["event"]["const"] for e in events] == ["step", "token", "answer"]


def test_the_schema_lists_the_rerankers_this_deployment_accepts(tmp_path: Path) -> None:
    """Read without starting the app: the list comes from settings alone."""

    def rerankers(settings: Settings) -> list[str]:
        schema = create_app(settings).openapi()
        rerank = schema["components"]["schemas"]["SearchRequest"]["properties"]["rerank"]
        return next(option["enum"] for option in rerank["anyOf"] if "enum" in option)

    assert rerankers(Settings(data_dir=tmp_path)) == ["none", "maxsim"]
    configured = Settings(data_dir=tmp_path, rerank="cohere/rerank-english-v3.0")
    assert rerankers(configured) == ["none", "maxsim", "cohere/rerank-english-v3.0"]


def test_searches_take_turns_up_to_the_configured_number_and_none_is_lost(
    materialized_sample: Path,
) -> None:
    """Twelve concurrent searches with two turns: at most two run at once, yet two do, and
    every caller gets the ranking it would get alone."""
    settings = Settings(data_dir=materialized_sample, api_search_threads=2)
    query = {"query": "How many weeks of parental leave do I get?", "top_k": 5}
    with TestClient(create_app(settings)) as test_client:
        alone = _search(test_client, {}, **query)
        retriever = test_client.app.state.service.retriever
        search = retriever.search
        running, most = [0], [0]
        lock = threading.Lock()

        def counted(*args: object, **kwargs: object) -> object:
            with lock:
                running[0] += 1
                most[0] = max(most[0], running[0])
            try:
                time.sleep(0.1)  # long enough for the others to arrive and wait
                return search(*args, **kwargs)
            finally:
                with lock:
                    running[0] -= 1

        retriever.search = counted
        try:
            with ThreadPoolExecutor(max_workers=12) as pool:
                results = list(pool.map(lambda _: _search(test_client, {}, **query), range(12)))
        finally:
            del retriever.search
    assert most[0] == 2
    assert [r["hits"] for r in results] == [alone["hits"]] * 12


def test_unknown_chunk_is_404(client, keys) -> None:
    response = client.get("/v1/chunks/does-not-exist", headers=_as(keys, "public"))
    assert response.status_code == 404


def test_stores_not_materialized_are_503_with_the_command(tmp_path: Path) -> None:
    with TestClient(create_app(Settings(data_dir=tmp_path / "empty"))) as empty:
        for response in (
            empty.post("/v1/search", json={"query": "leave"}),
            empty.get("/v1/documents"),
            empty.get("/v1/chunks/abc"),
            empty.get("/healthz"),
        ):
            assert response.status_code == 503, response.text
            assert "lorehouse materialize" in response.text


# -- access control -------------------------------------------------------------------------


def _security_material(data_dir: Path) -> tuple[set[str], set[str], list[str]]:
    """Doc ids and chunk ids of `security` documents, and 20+ queries aimed at their content."""
    chunks = DuckDBStore(data_dir / "lorehouse.duckdb").table("chunks")
    restricted = chunks[chunks["acl"].map(lambda acl: "security" in list(acl))]
    queries: list[str] = []
    for text in restricted["text_chat"]:
        body = text.split("\n", 1)[-1]
        words = re.findall(r"[A-Za-z][A-Za-z0-9'-]+", body)
        if len(words) >= 6:
            queries.append(" ".join(words[:12]))
        if len(words) >= 24:
            queries.append(" ".join(words[-12:]))
    queries += [
        "security incident response plan",
        "incident severity levels SEV1 SEV2",
        "who is the incident commander",
        "vendor risk register",
        "vendor risk rating and review date",
        "data breach notification regulator 72 hours",
    ]
    return set(restricted["doc_id"]), set(restricted["chunk_id"]), queries


def test_a_key_without_the_security_group_never_sees_security_content(
    client, keys, materialized_sample: Path
) -> None:
    doc_ids, chunk_ids, queries = _security_material(materialized_sample)
    assert len(doc_ids) == 2 and len(queries) >= 20
    public, insider = _as(keys, "public"), _as(keys, "security")

    seen_by_insider: set[str] = set()
    for query in queries:
        for mode, rerank in [("vector", "none"), ("bm25", "none"), ("hybrid", "none")]:
            hits = _search(client, public, query=query, mode=mode, rerank=rerank, top_k=100)["hits"]
            leaked = {h["chunk_id"] for h in hits} & chunk_ids
            assert not leaked, (query, mode, leaked)
        passages = _search(client, public, query=query, top_k=50, passage_words=2000)["hits"]
        joined = {m for h in passages for m in [h["chunk_id"], *h["passage_chunk_ids"]]}
        assert not joined & chunk_ids, (query, "passages", joined & chunk_ids)
        insider_hits = _search(client, insider, query=query, top_k=10)["hits"]
        seen_by_insider |= {h["chunk_id"] for h in insider_hits} & chunk_ids
    # The same queries do reach the content for a member of the group.
    assert len(seen_by_insider) >= len(chunk_ids) // 2

    aimed = _search(client, public, query="incident", filters={"doc_ids": sorted(doc_ids)})
    assert aimed["hits"] == []
    for chunk_id in sorted(chunk_ids)[:10]:
        assert client.get(f"/v1/chunks/{chunk_id}", headers=public).status_code == 404
        assert client.get(f"/v1/chunks/{chunk_id}", headers=insider).status_code == 200
    listed = client.get("/v1/documents?limit=200", headers=public).json()["documents"]
    assert not {d["doc_id"] for d in listed} & doc_ids
    listed_insider = client.get("/v1/documents?limit=200", headers=insider).json()["documents"]
    assert doc_ids <= {d["doc_id"] for d in listed_insider}


def test_a_configured_litellm_reranker_reorders_and_degrades_with_a_warning(
    materialized_sample: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COHERE_API_KEY", "local-test")
    model = "cohere/rerank-english-v3.0"
    with provider_server() as server:
        settings = Settings(
            data_dir=materialized_sample,
            rerank=model,
            rerank_api_base=server.base_url.removesuffix("/v1"),
        )
        with TestClient(create_app(settings)) as api:
            query = "what happens to unused weeks of leave"
            result = api.post("/v1/search", json={"query": query, "top_k": 5}).json()
            assert result["rerank"] == model and not result["warnings"]
            assert server.rerank_calls == 1
            scores = [hit["scores"]["rerank"] for hit in result["hits"]]
            assert scores == sorted(scores, reverse=True) and scores[0] > 0

            plain = api.post("/v1/search", json={"query": query, "rerank": "none"}).json()
            assert all("rerank" not in hit["scores"] for hit in plain["hits"])

            server.rerank_status = 500
            degraded = api.post("/v1/search", json={"query": query, "top_k": 5})
            assert degraded.status_code == 200
            body = degraded.json()
            assert body["warnings"] and "first-stage order kept" in body["warnings"][0]
            assert [h["chunk_id"] for h in body["hits"]] == [
                h["chunk_id"] for h in plain["hits"][:5]
            ]
