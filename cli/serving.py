"""Serving the HTTP API from several processes that share the clients evenly.

With `lorehouse serve --workers N` the processes accept connections from one listening
socket, and HTTP clients keep their connection for request after request. Uvicorn's
processes accept whatever is waiting when they wake, so clients connecting at once ended up
unevenly split between the processes: the process holding more answered its clients no
faster than the other (each has its cores' share), so their requests waited longer, and that
process set the 95th percentile.

Here each process waits before accepting for a time that grows with the connections it
already holds, so the process holding fewer takes the newcomer and the clients split evenly.
A process holding no connection accepts at once, and a single process never waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import os
import socket
import sys
from collections.abc import Callable
from typing import Any

import uvloop

log = logging.getLogger(__name__)

#: Seconds a process waits before accepting, per connection it holds open: longer than the
#: event loop's usual delay in answering (a few ms under load), so that a difference of a
#: few connections decides which process accepts.
ACCEPT_DELAY_PER_CONNECTION = 0.001
#: The longest wait: a new connection is never held back longer than this, however many
#: idle connections a process keeps.
MAX_ACCEPT_DELAY = 0.05
#: Seconds to back off after an accept error other than "another process took it" (out of
#: file descriptors, say), so the loop does not spin on it.
ACCEPT_ERROR_PAUSE = 0.1


def accept_delay(open_connections: int) -> float:
    """How long a process holding `open_connections` waits before accepting another."""
    return min(MAX_ACCEPT_DELAY, ACCEPT_DELAY_PER_CONNECTION * open_connections)


class BalancedListener:
    """Accepts connections from a listening socket that other processes share, leaving
    each one to the process holding the fewest connections.

    Stands in for the `asyncio.Server` uvicorn closes on shutdown (`close`, `wait_closed`).
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        protocol_factory: Callable[[], asyncio.BaseProtocol],
        sock: socket.socket,
        backlog: int,
    ) -> None:
        self._loop = loop
        self._protocol_factory = protocol_factory
        self._sock = sock
        self._transports: list[asyncio.BaseTransport] = []
        #: The descriptor the loop watches for a waiting connection, while it does.
        self._watched: int | None = None
        sock.setblocking(False)
        sock.listen(backlog)
        self.sockets = [sock]
        self._accepting = loop.create_task(self._accept_forever())

    def open_connections(self) -> int:
        """Connections this process accepted that are still open."""
        self._transports = [t for t in self._transports if not t.is_closing()]
        return len(self._transports)

    async def _readable(self) -> None:
        """Returns once a connection waits to be accepted (by this process or another)."""
        ready = self._loop.create_future()
        self._watched = self._sock.fileno()
        self._loop.add_reader(self._watched, lambda: ready.done() or ready.set_result(None))
        try:
            await ready
        finally:
            self._stop_watching()

    @property
    def watching(self) -> bool:
        """Whether the loop watches the socket for a waiting connection now."""
        return self._watched is not None

    def _stop_watching(self) -> None:
        if self._watched is not None:
            self._loop.remove_reader(self._watched)
            self._watched = None

    async def _accept_forever(self) -> None:
        while True:
            await self._readable()
            delay = accept_delay(self.open_connections())
            if delay:
                await asyncio.sleep(delay)
            try:
                connection, _ = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                continue  # a process holding fewer connections took it meanwhile
            except OSError as error:
                log.warning("accepting a connection failed, retrying: %s", error)
                await asyncio.sleep(ACCEPT_ERROR_PAUSE)
                continue
            connection.setblocking(False)
            try:
                transport, _ = await self._loop.connect_accepted_socket(
                    self._protocol_factory, connection
                )
            except OSError as error:
                log.warning("a connection closed while it was accepted: %s", error)
                connection.close()
                continue
            self._transports.append(transport)

    def close(self) -> None:
        """Stops accepting; open connections stay with their protocol (uvicorn ends them).

        The loop stops watching the socket now, not when the cancelled task next runs:
        uvicorn closes the socket right after this, and the other processes keep it open,
        so a loop still watching the closed descriptor would be told of connections on a
        descriptor it no longer has (uvloop aborts the process).
        """
        self._stop_watching()
        self._accepting.cancel()

    async def wait_closed(self) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            await self._accepting


class BalancedLoop(uvloop.Loop):  # type: ignore[misc]  # uvloop ships no stubs for Loop
    """uvloop's event loop, whose servers on an already bound socket (the one the
    processes of `lorehouse serve --workers N` share) accept through a BalancedListener.

    Uvicorn builds it by import path (`loop="cli.serving:BalancedLoop"`); servers it
    binds itself, or with TLS, are uvloop's own.
    """

    async def create_server(
        self, protocol_factory: Callable[[], asyncio.BaseProtocol], *args: Any, **kwargs: Any
    ) -> Any:
        sock = kwargs.get("sock")
        if args or sock is None or kwargs.get("ssl") is not None:
            return await super().create_server(protocol_factory, *args, **kwargs)
        return BalancedListener(self, protocol_factory, sock, kwargs.get("backlog", 100))


def serve_log_config() -> dict[str, Any]:
    """uvicorn's logging configuration with Lorehouse's loggers added at INFO on stderr,
    named on each line. Without them only warnings reached stderr, through Python's
    last-resort handler and without a level or a name, and information such as how long
    the start-up search took was dropped. Every server process applies it."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config["formatters"]["lorehouse"] = {
        "()": "uvicorn.logging.DefaultFormatter",
        "fmt": "%(levelprefix)s %(name)s: %(message)s",
    }
    config["handlers"]["lorehouse"] = {
        "formatter": "lorehouse",
        "class": "logging.StreamHandler",
        "stream": "ext://sys.stderr",
    }
    # `cli` for this module's listener, which runs in the server processes.
    for name in ("lorehouse", "cli"):
        config["loggers"][name] = {"handlers": ["lorehouse"], "level": "INFO", "propagate": False}
    # The MCP SDK: a tool that crashed, with its stack (a refused call is a line at INFO).
    config["loggers"]["mcp"] = {"handlers": ["lorehouse"], "level": "WARNING", "propagate": False}
    return config


def serve_api(app: str, host: str, port: int, workers: int, keep_alive_seconds: int) -> None:
    """Runs the ASGI app factory at import path `app` with uvicorn, its `workers`
    processes sharing the clients evenly (see the module's docstring).

    The processes learn how many they are from LOREHOUSE_API_WORKERS, which sets how many
    searches each computes at once (`api_search_threads`).
    """
    import uvicorn

    from lorehouse.settings import get_settings

    os.environ["LOREHOUSE_API_WORKERS"] = str(workers)
    # A single process serves from this one, whose settings may have been read already.
    get_settings.cache_clear()

    uvicorn.run(
        app,
        factory=True,
        host=host,
        port=port,
        workers=workers,
        timeout_keep_alive=keep_alive_seconds,
        log_level="info",
        log_config=serve_log_config(),
        loop="cli.serving:BalancedLoop" if workers > 1 else "auto",
    )


def serve_mcp_stdio() -> None:
    """Serves the API's MCP tools over stdio (`lorehouse mcp`): this process becomes
    `python -m api.stdio`, with the same standard streams and environment.

    The tools are the API's (`api/mcp.py`), so the server is the API's entry point, run as
    `serve_api` hands uvicorn the API's application by name: the command line never imports
    the web layer, and every other command runs without it.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, "-m", "api.stdio"])
