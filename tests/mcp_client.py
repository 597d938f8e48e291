"""Calling Lorehouse's MCP tools with the `mcp` SDK's own client, over streamable HTTP or by
starting `lorehouse mcp` over stdio, from synchronous tests."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, Tool

from lorehouse.settings import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "bench"))
# bench/load.py starts and stops Lorehouse processes
from load import (
    BIN,
    Server,
    start_server,
    stop_process_group,
    subprocess_env,
    wait_until_healthy,
)

#: Long enough for an answer on a busy 2-core machine.
READ_SECONDS = 120.0


@dataclass
class ToolResult:
    """A tool call's outcome: its structured result, or the error text a caller reads."""

    data: dict[str, Any] | None
    error: str | None

    @classmethod
    def of(cls, result: CallToolResult) -> ToolResult:
        text = " ".join(getattr(part, "text", "") for part in result.content)
        if result.is_error:
            return cls(None, text)
        assert result.structured_content is not None, text
        return cls(dict(result.structured_content), None)

    @property
    def ok(self) -> dict[str, Any]:
        assert self.error is None, self.error
        assert self.data is not None
        return self.data


@contextmanager
def running_server(data_dir: Path, log_dir: Path, **settings: str) -> Iterator[Server]:
    """A real `lorehouse serve` over `data_dir`, healthy, until the block ends."""
    server = start_server(data_dir, log_dir, log_dir, **settings)
    try:
        wait_until_healthy(server, timeout_seconds=120)
        yield server
    finally:
        stop_process_group(server.process)


def http_target(url: str, headers: dict[str, str] | None = None) -> Any:
    """The SDK's streamable HTTP transport to `url`/mcp, sending `headers` on every request."""
    client = httpx2.AsyncClient(headers=headers or {}, timeout=READ_SECONDS)
    return streamable_http_client(f"{url}/mcp", http_client=client)


def stdio_target(data_dir: Path, env: dict[str, str], cwd: Path) -> StdioServerParameters:
    """`lorehouse mcp` started by the SDK over stdio, reading the stores in `data_dir`."""
    return StdioServerParameters(
        command=str(BIN / "lorehouse"),
        args=["mcp"],
        env=subprocess_env(data_dir, **env),
        cwd=str(cwd),
    )


def call_tools(target: Any, calls: Sequence[tuple[str, dict[str, Any]]]) -> list[ToolResult]:
    """Each (tool, arguments) of `calls` in one client session, in order."""

    async def run() -> list[ToolResult]:
        async with Client(target, read_timeout_seconds=READ_SECONDS) as client:
            return [ToolResult.of(await client.call_tool(name, args)) for name, args in calls]

    return anyio.run(run)


def call_tool(target: Any, name: str, **arguments: Any) -> ToolResult:
    return call_tools(target, [(name, arguments)])[0]


def list_tools(target: Any) -> list[Tool]:
    async def run() -> list[Tool]:
        async with Client(target, read_timeout_seconds=READ_SECONDS) as client:
            return list((await client.list_tools()).tools)

    return anyio.run(run)
