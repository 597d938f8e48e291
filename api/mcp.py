"""The MCP server: Lorehouse's search, answers, chunks and document list as tools that agents
and assistants call, built with the official `mcp` SDK.

It is served two ways. In the API process, at `/mcp` over streamable HTTP, beside the routes:
the same keys (X-API-Key or Authorization: Bearer, on every request), the same turns for
searches and answers. And over stdio by `lorehouse mcp`, for desktop clients that start a
server of their own, as the one key LOREHOUSE_MCP_API_KEY names.

Each tool calls the route function of its HTTP twin in `api/routers/` with the caller its key
names, so access, validation, limits and error wording are those of the HTTP API, and a
restricted chunk reaches no caller outside its groups through any tool, result or error.
HTTP is stateless (`stateless_http`): any process of `--workers N`, or any pod behind a load
balancer, answers any request, as for the rest of the API.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Annotated, Any, TypeVar

from fastapi import HTTPException
from fastapi.concurrency import run_in_threadpool
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import ToolAnnotations
from pydantic import Field, ValidationError
from starlette.applications import Starlette
from starlette.types import Receive, Scope, Send

from api.deps import KEY_REQUIRED, Service, StoreUnavailable, identify_caller, open_service
from api.models import (
    MAX_VERSION,
    AskRequest,
    ChunkPreview,
    DocumentPage,
    QueryText,
    SearchFiltersIn,
    SearchRequest,
)
from api.routers import ask as ask_route
from api.routers import chunks as chunks_route
from api.routers import documents as documents_route
from api.routers import search as search_route
from lorehouse.agents.ask import AskResponse
from lorehouse.agents.query_optimizer import Turn
from lorehouse.api_keys import ANONYMOUS, Caller
from lorehouse.errors import field_errors, validation_summary
from lorehouse.search.hits import SearchResult
from lorehouse.search.retriever import SearchMode
from lorehouse.settings import Settings

log = logging.getLogger("lorehouse.mcp")

#: Where the API process serves MCP over streamable HTTP.
MCP_PATH = "/mcp"
INSTRUCTIONS = (
    "Lorehouse searches and answers from an organization's indexed documents (PDF, Office, "
    "HTML, Markdown...), with citations to chunks. Every result holds only what the key you "
    "connect with may read. Use `search` for ranked passages, `ask` for a cited answer, "
    "`get_chunk` to read a cited chunk with its neighbours, `list_documents` to see what is "
    "indexed (its doc_ids scope `search` and `ask` through `filters.doc_ids`)."
)
_READ_ONLY = ToolAnnotations(readOnlyHint=True, openWorldHint=False)
_T = TypeVar("_T")


def build_mcp_server(
    service_of: Callable[[], Service],
    stdio_key: str | None = None,
    lifespan: Callable[[MCPServer], Any] | None = None,
) -> MCPServer:
    """The MCP server over the service `service_of` returns.

    Over HTTP the caller comes from each request's headers; over stdio (no headers) it is the
    one `stdio_key` names, looked up in the keys file on every call.
    """

    def caller_of(ctx: Context) -> Caller:
        service = service_of()
        headers = ctx.headers
        if headers is not None:
            caller = identify_caller(service, headers)  # type: ignore[arg-type]
        elif service.keys is None:
            caller = Caller(ANONYMOUS, ())
        else:
            caller = service.keys.identify(stdio_key) if stdio_key else None
        if caller is None:
            # Over HTTP the API refused the request before it got here (api/guards.py); a
            # revoked stdio key, or none, ends here.
            raise ToolError(
                KEY_REQUIRED if headers is not None else f"{KEY_REQUIRED}: LOREHOUSE_MCP_API_KEY"
            )
        return caller

    async def in_thread(route: Callable[..., _T], ctx: Context, *arguments: object) -> _T:
        """A synchronous route's function for the caller, in a worker thread as FastAPI
        runs it."""
        return await _tool_call(run_in_threadpool(route, service_of(), caller_of(ctx), *arguments))

    # The SDK sets up the root logger (a handler printing every library's INFO lines) unless
    # one is there already; the process's own logging configuration decides instead.
    root_handlers, root_level = list(logging.root.handlers), logging.root.level
    server = MCPServer(
        "lorehouse",
        title="Lorehouse",
        instructions=INSTRUCTIONS,
        lifespan=lifespan,
        warn_on_duplicate_tools=False,
    )
    logging.root.handlers[:] = root_handlers
    logging.root.setLevel(root_level)

    @server.tool(title="Search the documents", annotations=_READ_ONLY)
    async def search(
        query: Annotated[QueryText, Field(description="What to look for, in words.")],
        ctx: Context,
        top_k: Annotated[int, Field(ge=1, le=100, description="How many hits.")] = 8,
        filters: Annotated[
            SearchFiltersIn | None,
            Field(
                description="Only these documents (doc_ids, from list_documents or a hit), "
                "pages (page_from, page_to), file types (pdf, docx, ...) or tables."
            ),
        ] = None,
        mode: Annotated[
            SearchMode, Field(description="hybrid (default), vector or bm25.")
        ] = SearchMode.HYBRID,
    ) -> SearchResult:
        """Ranked passages of the documents you may read that match the query, best first.

        Each hit has its chunk_id, doc_id, title, rel_path, pages (page_start, page_end),
        heading_path, text (text_chat), score and citation. Pass a chunk_id to `get_chunk`
        to read it between its neighbours.
        """
        with _as_tool_errors():
            request = SearchRequest(query=query, top_k=top_k, filters=filters, mode=mode)
        return await _tool_call(
            search_route.search(request, service_of(), caller_of(ctx))  # type: ignore[arg-type]
        )

    @server.tool(title="Answer a question with citations", annotations=_READ_ONLY)
    async def ask(
        question: Annotated[QueryText, Field(description="The question, as a person asks it.")],
        ctx: Context,
        history: Annotated[
            list[Turn] | None,
            Field(
                max_length=20,
                description="The conversation so far ({role: user|assistant, content}), so a "
                "follow-up such as 'and for part-timers?' is read in its context.",
            ),
        ] = None,
        filters: Annotated[
            SearchFiltersIn | None,
            Field(description="Scope the answer to documents, pages or file types."),
        ] = None,
    ) -> AskResponse:
        """A cited answer from the documents you may read.

        `answer` is the reply. `answerable` false means the documents do not answer it (then
        `related` lists the nearest sources); `asserted` false means the closest passages
        may not state it directly, and `excerpts` hold what they say. `citations` give each
        source's chunk_id, title, path, pages and index version (for `get_chunk`), and
        `trace` the queries and steps that produced the answer.
        """
        with _as_tool_errors():
            request = AskRequest(question=question, history=history or [], filters=filters)
        answer = await _tool_call(
            ask_route.ask(request, service_of(), caller_of(ctx))  # type: ignore[arg-type]
        )
        if not isinstance(answer, AskResponse):  # only a streamed request gets anything else
            raise ToolError("the answer could not be produced")
        return answer

    @server.tool(title="Read a chunk between its neighbours", annotations=_READ_ONLY)
    async def get_chunk(
        chunk_id: Annotated[
            str,
            Field(min_length=1, max_length=128, description="A hit's or citation's chunk_id."),
        ],
        ctx: Context,
        window: Annotated[int, Field(ge=0, le=5, description="Neighbours on each side.")] = 1,
        version: Annotated[
            int | None,
            Field(
                ge=1,
                le=MAX_VERSION,
                description="A citation's index version: the chunk as it was cited, and "
                "whether it changed since (changed_since).",
            ),
        ] = None,
    ) -> ChunkPreview:
        """A chunk's text with the chunks before and after it in its document.

        A chunk that does not exist and one you may not read get the same error.
        """
        return await in_thread(chunks_route.chunk, ctx, chunk_id, window, version)

    @server.tool(title="List the indexed documents", annotations=_READ_ONLY)
    async def list_documents(
        ctx: Context,
        limit: Annotated[int, Field(ge=1, le=200, description="Documents per page.")] = 50,
        offset: Annotated[
            int, Field(ge=0, le=10_000_000, description="Documents to skip, for later pages.")
        ] = 0,
    ) -> DocumentPage:
        """The documents you may read, by path: doc_id, title, path, file type, summary,
        chunks, pages and when each was indexed, with the total to page through."""
        return await in_thread(documents_route.documents, ctx, limit, offset)

    return server


@contextmanager
def _as_tool_errors() -> Iterator[None]:
    """What the HTTP API answers with a 4xx or 503, as a tool error a caller can read.

    The messages are those of the HTTP API, which never name a chunk, document or path the
    caller may not read; anything else the SDK reports as a bare "Error executing tool".
    """
    try:
        yield
    except HTTPException as error:
        raise ToolError(_detail(error.detail)) from error
    except StoreUnavailable as error:
        raise ToolError(str(error)) from error
    except ValidationError as error:
        raise ToolError(validation_summary(error)) from error


async def _tool_call(work: Awaitable[_T]) -> _T:
    with _as_tool_errors():
        return await work


def _detail(detail: Any) -> str:
    """An HTTPException's detail as one line: a string as it is, a 422's list of field
    errors as `field: message; ...`."""
    if isinstance(detail, list):
        return field_errors(item for item in detail if isinstance(item, dict))
    return str(detail)


def transport_security(settings: Settings) -> TransportSecuritySettings:
    """The Host and Origin headers /mcp answers (LOREHOUSE_MCP_ALLOWED_HOSTS)."""
    hosts = [host.strip() for host in settings.mcp_allowed_hosts.split(",") if host.strip()]
    if "*" in hosts:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=hosts,
        allowed_origins=[f"{scheme}://{host}" for host in hosts for scheme in ("http", "https")],
    )


class McpEndpoint:
    """The ASGI endpoint at MCP_PATH, served by the MCP server of the running lifespan.

    The SDK's session manager runs once per instance, and an application's lifespan may run
    more than once (each test client of one app starts it again), so each run builds its own
    server and HTTP app, and this endpoint hands requests to the current one.
    """

    def __init__(self, settings: Settings, service_of: Callable[[], Service]) -> None:
        self.settings = settings
        self.service_of = service_of
        self._current: Starlette | None = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Serves MCP for as long as the block runs (the application's lifespan)."""
        server = build_mcp_server(self.service_of)
        # Stateless, with JSON responses: any server process answers any request, and a
        # tool's result is one response, never a held stream.
        app = server.streamable_http_app(
            streamable_http_path=MCP_PATH,
            stateless_http=True,
            json_response=True,
            max_request_body_size=self.settings.api_max_body_bytes,
            transport_security=transport_security(self.settings),
        )
        async with server.session_manager.run():
            self._current = app
            try:
                yield
            finally:
                self._current = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._current is None:
            raise StoreUnavailable("the server is starting; retry shortly")
        await self._current(scope, receive, send)


def run_stdio(settings: Settings) -> None:
    """Serves MCP over stdin and stdout until the client closes them (`lorehouse mcp`).

    The stores and models are opened inside the server's lifespan, once the SDK has moved
    stdout aside: a library printing while it loads would otherwise corrupt the protocol.
    """
    import anyio

    opened: list[Service] = []

    @asynccontextmanager
    async def lifespan(_: MCPServer) -> AsyncIterator[None]:
        opened.append(await run_in_threadpool(open_service, settings))
        log.info("serving MCP over stdio from %s", settings.data_dir)
        yield

    server = build_mcp_server(lambda: opened[0], settings.mcp_api_key, lifespan)
    anyio.run(server.run_stdio_async)
