"""The Lorehouse HTTP API: a thin layer over the materialized stores.

Every request is answered from what the asset graph wrote (LanceDB for chunks, DuckDB for the
document list); nothing here parses, chunks or indexes. Bad input is a 422 naming the field,
stores that are not built yet are a 503 saying what to run, and access control is applied in
the store queries themselves. `lorehouse serve` runs `create_app` with uvicorn.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi_offline import FastAPIOffline
from starlette.routing import Route

from api.deps import open_service
from api.errors import install_error_handlers
from api.guards import RequestGuard, keyed_routes
from api.mcp import MCP_PATH, McpEndpoint
from api.openapi import document_rerankers
from api.routers import (
    ask,
    chat,
    chunks,
    conversations,
    documents,
    feedback,
    health,
    openai_chat,
    reference,
    search,
    slack,
    suggestions,
    uploads,
)
from lorehouse.llm import LLMClient
from lorehouse.search.rerankers import available_rerankers
from lorehouse.settings import Settings, get_settings

ROUTERS = [
    search.router,
    ask.router,
    openai_chat.router,
    chunks.router,
    documents.router,
    conversations.router,
    uploads.router,
    suggestions.router,
    feedback.router,
    health.router,
    chat.router,
    slack.router,
    reference.router,
]


def create_app(settings: Settings | None = None, llm_client: LLMClient | None = None) -> FastAPI:
    """The application; `settings` defaults to the process settings (LOREHOUSE_* variables)."""
    settings = settings or get_settings()
    # The MCP endpoint's tools call the routes' functions with the service opened below.
    mcp = McpEndpoint(settings, lambda: app.state.service)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.service = open_service(settings, llm_client)
        async with mcp.running():
            yield

    # /docs with Swagger UI served from the package: no CDN, so it works on machines without
    # internet access (/redoc is api/routers/reference.py, which keeps ReDoc's logo off too).
    app = FastAPIOffline(
        redoc_url=None,
        static_url=reference.STATIC_URL,
        title="Lorehouse",
        version="0.1.0",
        description="Search the documents Lorehouse indexed, with citations to chunks.",
        lifespan=lifespan,
        # A redirect from `/v1/search/` would be built from the request's Host header, which
        # the client controls; paths are exact instead.
        redirect_slashes=False,
    )
    install_error_handlers(app)
    for router in ROUTERS:
        app.include_router(router)
    # A route, not a mount: `/mcp` is the address clients are given, and a mount would
    # answer it with a redirect to `/mcp/`.
    app.router.routes.append(Route(MCP_PATH, mcp, include_in_schema=False))
    # Sizes and keys are checked before any route reads a body (see api/guards.py).
    app.add_middleware(
        RequestGuard,
        max_body_bytes=settings.api_max_body_bytes,
        keyed=keyed_routes(ROUTERS),
        keyed_paths=[MCP_PATH],
        larger_bodies={uploads.UPLOADS_PATH: settings.upload_max_bytes},
    )
    document_rerankers(app, available_rerankers(settings.rerank))
    return app
