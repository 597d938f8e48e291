"""The Lorehouse HTTP API: a thin layer over the materialized stores.

Every request is answered from what the asset graph wrote (LanceDB for chunks, DuckDB for the
document list); nothing here parses, chunks or indexes. Bad input is a 422 naming the field,
stores that are not built yet are a 503 saying what to run, and access control is applied in
the store queries themselves.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Annotated

import duckdb
from fastapi import Depends, FastAPI, HTTPException, Path, Query, Request
from fastapi.responses import JSONResponse, StreamingResponse

from api.auth import ANONYMOUS, Caller, KeyRing
from api.models import (
    AskRequest,
    ChunkPreview,
    ChunkView,
    DocumentPage,
    DocumentView,
    Health,
    SearchRequest,
    StoreHealth,
)
from lorehouse.agents.pipeline import AskPipeline, AskResponse
from lorehouse.components import (
    ask_options_for,
    embedder_from,
    llm_client_for,
    open_chunk_index,
    retriever_for,
)
from lorehouse.embedding_providers import Embedder
from lorehouse.llm import LLMClient
from lorehouse.rerankers import available_rerankers
from lorehouse.retrieval import IndexModelMismatch, Retriever, SearchResult
from lorehouse.settings import Settings, get_settings
from lorehouse.stores import DuckDBStore
from lorehouse.stores.lance_index import ChunkIndex, IndexNotBuilt

log = logging.getLogger("lorehouse.api")
_NOT_MATERIALIZED = "the {store} store is not materialized yet; run `lorehouse materialize`"
# The document list waits this long for a materialization's write lock before a 503.
_DUCKDB_WAIT_SECONDS = 10.0


@dataclass
class Service:
    """What the lifespan opens once and every request shares."""

    settings: Settings
    index: ChunkIndex
    embedder: Embedder
    retriever: Retriever
    keys: KeyRing | None
    pipeline: AskPipeline

    def feature_store(self) -> DuckDBStore:
        path = self.settings.duckdb_path
        if not path.exists():
            raise StoreUnavailable(_NOT_MATERIALIZED.format(store="DuckDB"))
        return DuckDBStore(path, lock_timeout_seconds=_DUCKDB_WAIT_SECONDS)


class StoreUnavailable(RuntimeError):
    """A store cannot answer now (not built, or busy); the client should retry later."""


def open_service(settings: Settings, llm_client: LLMClient | None = None) -> Service:
    """Opens the stores, loads the embedder and the API keys: everything a request needs.

    `llm_client` overrides the client built from settings (e.g. one with extra litellm
    options); without either, answers are extractive.
    """
    keys = KeyRing.load(settings.api_keys_file) if settings.api_keys_file else None
    index = open_chunk_index(settings)
    embedder = embedder_from(settings)
    embedder.embed(["warm up"])  # load the model now, not during the first request
    retriever = retriever_for(settings, index, embedder)
    llm_client = llm_client or llm_client_for(settings, max_output_tokens=800)
    pipeline = AskPipeline(
        retriever, index.documents(), embedder, llm_client, ask_options_for(settings)
    )
    return Service(settings, index, embedder, retriever, keys, pipeline)


def create_app(settings: Settings | None = None, llm_client: LLMClient | None = None) -> FastAPI:
    """The application; `settings` defaults to the process settings (LOREHOUSE_* variables)."""
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.service = open_service(settings, llm_client)
        yield

    app = FastAPI(
        title="Lorehouse",
        version="0.1.0",
        description="Search the documents Lorehouse indexed, with citations to chunks.",
        lifespan=lifespan,
    )
    _install_error_handlers(app)
    _install_routes(app)
    return app


def _service(request: Request) -> Service:
    return request.app.state.service


ServiceDep = Annotated[Service, Depends(_service)]


def _caller(request: Request, service: ServiceDep) -> Caller:
    """The caller behind the request's key; 401 when keys are configured and none matches."""
    if service.keys is None:
        return Caller(ANONYMOUS, ())
    presented = request.headers.get("x-api-key")
    authorization = request.headers.get("authorization", "")
    if not presented and authorization.lower().startswith("bearer "):
        presented = authorization[7:].strip()
    caller = service.keys.identify(presented) if presented else None
    if caller is None:
        raise HTTPException(
            status_code=401,
            detail="a valid API key is required (X-API-Key header or Authorization: Bearer)",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return caller


CallerDep = Annotated[Caller, Depends(_caller)]


def _install_routes(app: FastAPI) -> None:
    @app.post("/v1/search", response_model=SearchResult, tags=["search"])
    def search(body: SearchRequest, service: ServiceDep, caller: CallerDep) -> SearchResult:
        """Chunks matching the query that the caller may see, best first, with citations."""
        allowed = available_rerankers(service.settings.rerank)
        if body.rerank is not None and body.rerank not in allowed:
            raise _invalid_field(("body", "rerank"), f"unknown reranker; choose one of {allowed}")
        return service.retriever.search(
            body.query,
            top_k=body.top_k,
            mode=body.mode,
            filters=body.filters,
            caller_groups=caller.groups,
            rerank=body.rerank,
        )

    @app.post(
        "/v1/ask",
        response_model=AskResponse,
        tags=["answers"],
        responses={200: {"content": {"text/event-stream": {}}}},
    )
    def ask(
        body: AskRequest, service: ServiceDep, caller: CallerDep
    ) -> AskResponse | StreamingResponse:
        """A cited answer from the documents the caller may see, with its trace.

        With `stream: true` the answer arrives as Server-Sent Events: `token` events with
        text pieces, then one `answer` event holding this response.
        """
        service.retriever.check_model()
        arguments = {
            "question": body.question,
            "history": body.history,
            "filters": body.filters,
            "top_k": body.top_k,
            "caller_groups": caller.groups,
        }
        if body.stream:
            # Fail before the stream starts if the stores are not there: a 503 cannot follow
            # a 200 whose body has begun.
            service.index.table()
            return StreamingResponse(
                _events(service.pipeline.stream(**arguments)), media_type="text/event-stream"
            )
        return service.pipeline.ask(**arguments)

    @app.get("/v1/chunks/{chunk_id}", response_model=ChunkPreview, tags=["search"])
    def chunk(
        service: ServiceDep,
        caller: CallerDep,
        chunk_id: Annotated[str, Path(min_length=1, max_length=128)],
        window: Annotated[int, Query(ge=0, le=5, description="Neighbours on each side")] = 1,
    ) -> ChunkPreview:
        """A cited chunk with its neighbours; 404 when it does not exist or is not visible."""
        found = service.retriever.chunk_preview(chunk_id, caller.groups, window)
        if found is None:
            raise HTTPException(status_code=404, detail=f"no chunk {chunk_id!r}")
        chunk_row, around = found
        views = [ChunkView.model_validate(row) for row in around]
        return ChunkPreview(
            chunk=ChunkView.model_validate(chunk_row),
            before=[v for v in views if v.position < chunk_row["position"]],
            after=[v for v in views if v.position > chunk_row["position"]],
        )

    @app.get("/v1/documents", response_model=DocumentPage, tags=["documents"])
    def documents(
        service: ServiceDep,
        caller: CallerDep,
        limit: Annotated[int, Query(ge=1, le=200)] = 50,
        offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
    ) -> DocumentPage:
        """The documents the caller may see, with their summaries, by path."""
        total, rows = service.feature_store().visible_documents(caller.groups, limit, offset)
        return DocumentPage(
            total=total,
            limit=limit,
            offset=offset,
            documents=[DocumentView.model_validate(row) for row in rows],
        )

    @app.get("/healthz", response_model=Health, tags=["operations"])
    def healthz(service: ServiceDep) -> JSONResponse:
        """Store reachability and counts; 503 until both stores are built."""
        health = Health(
            status="ok",
            embedding_model=service.embedder.name,
            lancedb=_lance_health(service),
            duckdb=_duckdb_health(service),
        )
        if not (health.lancedb.ready and health.duckdb.ready):
            health.status = "unavailable"
        return JSONResponse(health.model_dump(mode="json"), status_code=_health_code(health))


def _events(stream: Iterator[str | AskResponse]) -> Iterator[str]:
    """Server-Sent Events: one `token` event per text piece, then the `answer` event."""
    for item in stream:
        if isinstance(item, AskResponse):
            yield f"event: answer\ndata: {item.model_dump_json()}\n\n"
        else:
            yield f"event: token\ndata: {json.dumps({'text': item})}\n\n"


def _health_code(health: Health) -> int:
    return 200 if health.status == "ok" else 503


def _lance_health(service: Service) -> StoreHealth:
    try:
        if not service.index.exists():
            return StoreHealth(
                reachable=True, ready=False, detail=_NOT_MATERIALIZED.format(store="LanceDB")
            )
        service.retriever.check_model()
        return StoreHealth(
            reachable=True,
            ready=True,
            detail=service.index.uri,
            counts={"chunks": service.index.count()},
        )
    except IndexModelMismatch as error:
        return StoreHealth(reachable=True, ready=False, detail=str(error))
    except OSError as error:
        return StoreHealth(reachable=False, ready=False, detail=f"{type(error).__name__}: {error}")


def _duckdb_health(service: Service) -> StoreHealth:
    try:
        store = service.feature_store()
        counts = {name: store.row_count(name) for name in ("documents", "chunks")}
    except StoreUnavailable as error:
        return StoreHealth(reachable=True, ready=False, detail=str(error))
    except duckdb.Error as error:
        return StoreHealth(reachable=False, ready=False, detail=f"{type(error).__name__}: {error}")
    return StoreHealth(
        reachable=True,
        ready=counts["documents"] > 0,
        detail=str(service.settings.duckdb_path),
        counts=counts,
    )


def _invalid_field(location: tuple[str, ...], message: str) -> HTTPException:
    """A 422 shaped like FastAPI's own validation errors, for checks a model cannot express."""
    return HTTPException(
        status_code=422, detail=[{"loc": list(location), "msg": message, "type": "value_error"}]
    )


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(IndexNotBuilt)
    async def _not_built(request: Request, error: IndexNotBuilt) -> JSONResponse:
        return _unavailable(_NOT_MATERIALIZED.format(store="LanceDB"))

    @app.exception_handler(IndexModelMismatch)
    async def _other_model(request: Request, error: IndexModelMismatch) -> JSONResponse:
        return _unavailable(str(error))

    @app.exception_handler(StoreUnavailable)
    async def _unavailable_store(request: Request, error: StoreUnavailable) -> JSONResponse:
        return _unavailable(str(error))

    @app.exception_handler(duckdb.IOException)
    async def _duckdb_busy(request: Request, error: duckdb.IOException) -> JSONResponse:
        log.warning("DuckDB could not answer %s: %s", request.url.path, error)
        return _unavailable(f"the DuckDB store is busy or unreadable ({type(error).__name__})")


def _unavailable(detail: str) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=503, headers={"Retry-After": "10"})
