"""Server processes sharing one listening socket split the clients evenly."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator

import httpx
import pytest
import uvicorn

from cli.serving import (
    ACCEPT_DELAY_PER_CONNECTION,
    MAX_ACCEPT_DELAY,
    BalancedListener,
    BalancedLoop,
    accept_delay,
)

WORKERS = 2
CLIENTS = 20


async def _who_answers(scope: dict, receive: object, send: object) -> None:
    """A one-route ASGI app naming the server (thread) that answered."""
    if scope["type"] != "http":
        return
    body = threading.current_thread().name.encode()
    await send({"type": "http.response.start", "status": 200, "headers": []})  # type: ignore[operator]
    await send({"type": "http.response.body", "body": body})  # type: ignore[operator]


@pytest.fixture
def shared_socket_servers() -> Iterator[str]:
    """Two uvicorn servers on one bound socket, as `lorehouse serve --workers 2` runs them
    (there each in its own process): their base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    servers, threads = [], []
    for index in range(WORKERS):
        config = uvicorn.Config(
            _who_answers,
            loop="cli.serving:BalancedLoop",
            lifespan="off",
            log_level="warning",
        )
        server = uvicorn.Server(config)
        # Each server gets its own descriptor of the socket, as each process does.
        thread = threading.Thread(
            target=server.run, kwargs={"sockets": [sock.dup()]}, name=f"worker-{index}"
        )
        thread.start()
        servers.append(server)
        threads.append(thread)
    deadline = time.monotonic() + 10
    while not all(server.started for server in servers):
        assert time.monotonic() < deadline, "the servers did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        for server in servers:
            server.should_exit = True
        for thread in threads:
            thread.join(timeout=10)
        sock.close()


def test_clients_connecting_one_after_another_are_split_evenly(
    shared_socket_servers: str,
) -> None:
    clients = [httpx.Client(base_url=shared_socket_servers) for _ in range(CLIENTS)]
    try:
        # Each client keeps its connection, as HTTP clients do: its first answer says which
        # server holds it, and so do all the later ones.
        first = [client.get("/").text for client in clients]
        again = [client.get("/").text for client in clients]
    finally:
        for client in clients:
            client.close()
    assert first == again
    held = Counter(first)
    assert len(held) == WORKERS, held
    assert max(held.values()) - min(held.values()) <= 2, held


def test_clients_connecting_all_at_once_are_split_evenly(shared_socket_servers: str) -> None:
    async def connect_all() -> list[str]:
        clients = [httpx.AsyncClient(base_url=shared_socket_servers) for _ in range(CLIENTS)]
        try:
            responses = await asyncio.gather(*(client.get("/") for client in clients))
            return [response.text for response in responses]
        finally:
            await asyncio.gather(*(client.aclose() for client in clients))

    held = Counter(asyncio.run(connect_all()))
    assert len(held) == WORKERS, held
    assert max(held.values()) - min(held.values()) <= 4, held


def test_a_process_without_connections_accepts_at_once_and_the_wait_is_capped() -> None:
    assert accept_delay(0) == 0
    assert accept_delay(3) == pytest.approx(3 * ACCEPT_DELAY_PER_CONNECTION)
    assert accept_delay(100_000) == MAX_ACCEPT_DELAY


def test_servers_uvicorn_binds_itself_are_uvloops_own() -> None:
    async def serve_and_ask() -> bytes:
        async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.write(await reader.read(5))
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(echo, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"hello")
        answer = await reader.read(5)
        writer.close()
        server.close()
        await server.wait_closed()
        return answer

    loop = BalancedLoop()
    try:
        assert loop.run_until_complete(serve_and_ask()) == b"hello"
    finally:
        loop.close()


def test_a_closed_listener_stops_watching_the_socket_before_uvicorn_closes_it() -> None:
    """Uvicorn closes the socket right after closing the server, while the other processes
    keep it open: a loop still watching that descriptor aborted the process (uvloop), as a
    server thread of this file's tests once did on shutdown."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    loop = BalancedLoop()

    async def close_as_uvicorn_does() -> bool:
        own = sock.dup()
        listener = BalancedListener(loop, asyncio.Protocol, own, 16)
        await asyncio.sleep(0.05)
        assert listener.watching  # it waits for a connection
        listener.close()
        still_watched = listener.watching
        own.close()
        # A connection arriving afterwards, on the socket the other processes hold open.
        with socket.create_connection(("127.0.0.1", port)):
            await asyncio.sleep(0.1)
        await listener.wait_closed()
        return still_watched

    try:
        assert loop.run_until_complete(close_as_uvicorn_does()) is False
    finally:
        loop.close()
        sock.close()
