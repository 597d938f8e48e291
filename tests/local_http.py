"""A real HTTP server on a free port of 127.0.0.1: for the local stand-ins of web services,
and for Lorehouse's own app (`serve_app`) where a test's client must reach it over HTTP."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import uvicorn

from api.main import create_app
from lorehouse.settings import Settings


@contextmanager
def local_server(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """Serves `handler` on its own thread until the block ends; yields the base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def serve_app(settings: Settings) -> Iterator[str]:
    """Lorehouse's app for `settings` with uvicorn on a free port, in a thread of this
    process, until the generator is closed; yields the base URL. For a fixture to
    `yield from`."""
    server = uvicorn.Server(uvicorn.Config(create_app(settings), port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def send_json(
    handler: BaseHTTPRequestHandler,
    status: int,
    body: Any,
    headers: dict[str, str] | None = None,
) -> None:
    """Answers a request with `body` as JSON, and any extra headers (Retry-After...)."""
    data = json.dumps(body).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json; charset=UTF-8")
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)
