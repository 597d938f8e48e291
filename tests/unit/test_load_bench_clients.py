"""bench/load.py's HTTP clients: each posts the JSON body it is given and hands back status and
text, so a failing server is counted as an error whichever client generates the load."""

from __future__ import annotations

import asyncio
import json

import pytest
from aiohttp import web

from tests.bench_scripts import bench_script


async def _post_twice(kind: str) -> list[tuple[int, str]]:
    """Two posts through the bench's client of `kind` to a server on 127.0.0.1 that echoes a
    good body and refuses a body without "query"."""
    load = bench_script("load")

    async def search(request: web.Request) -> web.Response:
        body = await request.json()
        if "query" not in body:
            return web.json_response({"detail": "query is required"}, status=422)
        return web.json_response({"hits": [body["query"]]})

    app = web.Application()
    app.router.add_post("/v1/search", search)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        async with load.open_client(kind, f"http://127.0.0.1:{port}", 2, 10.0) as client:
            return [
                await client.post("/v1/search", {"query": "vacation days"}),
                await client.post("/v1/search", {"top_k": 8}),
            ]
    finally:
        await runner.cleanup()


@pytest.mark.parametrize("kind", ["aiohttp", "httpx"])
def test_each_client_reports_status_and_body_so_errors_are_classified(kind: str) -> None:
    load = bench_script("load")
    (good_status, good_text), (bad_status, bad_text) = asyncio.run(_post_twice(kind))
    assert good_status == 200 and json.loads(good_text) == {"hits": ["vacation days"]}
    assert load.classify(good_status, good_text, ("hits",)) == "ok"
    assert bad_status == 422 and "query is required" in bad_text
    assert load.classify(bad_status, bad_text, ("hits",)) == "HTTP 422"
    assert load.classify(200, "<html>", ("hits",)) == "invalid JSON"
    assert load.classify(200, '{"answer": 1}', ("answer", "citations")) == "missing citations"
