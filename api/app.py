"""The Lorehouse HTTP API: a thin layer over the materialized stores.

Every request is answered from what the asset graph wrote (LanceDB for chunks, DuckDB for the
document list); nothing here parses, chunks or indexes. Bad input is a 422 naming the field,
stores that are not built yet are a 503 saying what to run, and access control is applied in
the store queries themselves.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Annotated, Any

import duckdb
from fastapi import Depends, FastAPI, HTTPException, Path, Query, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse

from api.auth import ANONYMOUS, Caller, KeyRing
from api.models import (
    AskRequest,
    AskToken,
    ChunkPreview,
    ChunkView,
    DocumentPage,
    DocumentView,
    ErrorResponse,
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
from lorehouse.embedding_providers import Embedder, EmbeddingFailure
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
_RETRY_AFTER_SECONDS = 10

# Every status a route can answer is declared, with its body and headers, so clients generated
# from the schema handle errors too and the schema can be checked against real responses.
_UNREADABLE_BODY: dict[int | str, dict[str, Any]] = {
    400: {
        "model": ErrorResponse,
        "description": "The body is not text in the declared encoding (JSON must be UTF-8).",
    }
}
_UNAUTHORIZED: dict[int | str, dict[str, Any]] = {
    401: {
        "model": ErrorResponse,
        "description": (
            "No valid API key was presented, or two different ones were (only when API keys "
            "are configured)."
        ),
        "headers": {
            "WWW-Authenticate": {
                "description": "The accepted scheme: `Bearer` (or the X-API-Key header).",
                "required": True,
                "schema": {"type": "string"},
            }
        },
    }
}
_NOT_READY: dict[int | str, dict[str, Any]] = {
    503: {
        "model": ErrorResponse,
        "description": (
            "A store is not materialized yet, was built with another embedding model, or is "
            "busy; `detail` says which and what to run."
        ),
        "headers": {
            "Retry-After": {
                "description": "Seconds to wait before trying again.",
                "required": True,
                "schema": {"type": "integer"},
            }
        },
    }
}


# With `stream: true` every event of the body matches this: `event` names the kind and `data`
# holds JSON (the next text piece, or the complete answer as the JSON response would carry it).
def _event_schema(event: str, data_schema: dict[str, Any]) -> dict[str, Any]:
    """One kind of Server-Sent Event: its name, and the JSON its `data` line holds."""
    return {
        "type": "object",
        "required": ["event", "data"],
        "properties": {
            "event": {"const": event},
            "data": {
                "type": "string",
                "contentMediaType": "application/json",
                "contentSchema": data_schema,
            },
        },
    }


_ASK_EVENT_SCHEMA: dict[str, Any] = {
    "description": "One Server-Sent Event; the stream is `token` events, then one `answer`.",
    "oneOf": [
        _event_schema("token", AskToken.model_json_schema()),
        _event_schema("answer", {"$ref": "#/components/schemas/AskResponse"}),
    ],
}


@dataclass
class Service:
    """What the lifespan opens once and every request shares."""

    settings: Settings
    index: ChunkIndex
    embedder: Embedder
    retriever: Retriever
    keys: KeyRing | None
    pipeline: AskPipeline
    #: Turns for computing an answer: asks beyond the limit wait, so memory stays bounded.
    ask_turns: threading.BoundedSemaphore

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
    turns = threading.BoundedSemaphore(settings.api_max_concurrent_asks)
    return Service(settings, index, embedder, retriever, keys, pipeline, turns)


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
    _document_rerankers(app, available_rerankers(settings.rerank))
    return app


def _document_rerankers(app: FastAPI, allowed: list[str]) -> None:
    """Lists the rerankers this deployment accepts in the served schema.

    Which names are valid depends on settings (a configured litellm model joins none and rrf),
    so the request model cannot spell them out; without the list, a client built from the
    schema would send names that only earn a 422.
    """
    build = app.openapi

    def openapi() -> dict[str, Any]:
        schema = build()
        rerank = schema["components"]["schemas"]["SearchRequest"]["properties"]["rerank"]
        rerank["anyOf"] = [{"type": "string", "enum": list(allowed)}, {"type": "null"}]
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


def _service(request: Request) -> Service:
    return request.app.state.service


ServiceDep = Annotated[Service, Depends(_service)]


def _presented_keys(request: Request) -> set[str]:
    """Every non-empty key the request carries, in X-API-Key headers and Bearer tokens."""
    presented = {value for value in request.headers.getlist("x-api-key") if value}
    for authorization in request.headers.getlist("authorization"):
        if authorization.lower().startswith("bearer ") and authorization[7:].strip():
            presented.add(authorization[7:].strip())
    return presented


def _caller(request: Request, service: ServiceDep) -> Caller:
    """The caller behind the request's key; 401 when keys are configured and none matches.

    A request carrying two different keys is refused rather than resolved by header order:
    otherwise which groups it gets would depend on a precedence that a proxy checking only
    one of the headers does not know about.
    """
    if service.keys is None:
        return Caller(ANONYMOUS, ())
    presented = _presented_keys(request)
    caller = service.keys.identify(presented.pop()) if len(presented) == 1 else None
    if caller is None:
        raise HTTPException(
            status_code=401,
            detail="a valid API key is required (X-API-Key header or Authorization: Bearer)",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return caller


CallerDep = Annotated[Caller, Depends(_caller)]


def _install_routes(app: FastAPI) -> None:
    @app.post(
        "/v1/search",
        response_model=SearchResult,
        tags=["search"],
        responses={**_UNREADABLE_BODY, **_UNAUTHORIZED, **_NOT_READY},
    )
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
        responses={
            200: {"content": {"text/event-stream": {"schema": _ASK_EVENT_SCHEMA}}},
            **_UNREADABLE_BODY,
            **_UNAUTHORIZED,
            **_NOT_READY,
        },
    )
    def ask(
        body: AskRequest, service: ServiceDep, caller: CallerDep
    ) -> AskResponse | StreamingResponse:
        """A cited answer from the documents the caller may see, with its trace.

        With `stream: true` the answer arrives as Server-Sent Events: `token` events with
        text pieces, then one `answer` event holding this response.
        """
        service.retriever.check_model()
        if not service.ask_turns.acquire(timeout=service.settings.api_ask_wait_seconds):
            raise StoreUnavailable(
                f"{service.settings.api_max_concurrent_asks} answers are being computed; "
                "retry shortly"
            )
        arguments = {
            "question": body.question,
            "history": body.history,
            "filters": body.filters,
            "top_k": body.top_k,
            "caller_groups": caller.groups,
        }
        streaming = False
        try:
            if body.stream:
                # Fail before the stream starts if the stores are not there: a 503 cannot
                # follow a 200 whose body has begun.
                service.index.table()
                events = _events(service.pipeline.stream(**arguments), service.ask_turns)
                streaming = True  # the stream gives the turn back when it ends
                return StreamingResponse(events, media_type="text/event-stream")
            return service.pipeline.ask(**arguments)
        finally:
            if not streaming:
                service.ask_turns.release()

    @app.get(
        "/v1/chunks/{chunk_id}",
        response_model=ChunkPreview,
        tags=["search"],
        responses={
            **_UNAUTHORIZED,
            404: {
                "model": ErrorResponse,
                "description": "No such chunk, or one the caller may not see (not told apart).",
            },
            **_NOT_READY,
        },
    )
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

    @app.get(
        "/v1/documents",
        response_model=DocumentPage,
        tags=["documents"],
        responses={**_UNAUTHORIZED, **_NOT_READY},
    )
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

    @app.get(
        "/healthz",
        response_model=Health,
        tags=["operations"],
        responses={503: {"model": Health, "description": "A store is unreachable or not built."}},
    )
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


def _events(stream: Iterator[str | AskResponse], turn: threading.BoundedSemaphore) -> Iterator[str]:
    """Server-Sent Events: one `token` event per text piece, then the `answer` event.

    Holds the ask's turn until the stream ends or the client goes away.
    """
    try:
        for item in stream:
            if isinstance(item, AskResponse):
                yield f"event: answer\ndata: {item.model_dump_json()}\n\n"
            else:
                yield f"event: token\ndata: {AskToken(text=item).model_dump_json()}\n\n"
    finally:
        turn.release()


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


def _json_safe(value: Any) -> Any:
    """`value` with what JSON text cannot carry spelled out: NaN and infinities as their names,
    lone surrogates as escapes.

    A 422 echoes the offending input, and Python's JSON parser lets `NaN`, `1e400` and
    `"\\ud800"` in; rendering them as they are would turn the 422 into a 500.
    """
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {_json_safe(key): _json_safe(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_json_safe(item) for item in value]
    return value


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _invalid_request(request: Request, error: RequestValidationError) -> JSONResponse:
        detail = _json_safe(jsonable_encoder(error.errors()))
        return JSONResponse({"detail": detail}, status_code=422)

    @app.exception_handler(IndexNotBuilt)
    async def _not_built(request: Request, error: IndexNotBuilt) -> JSONResponse:
        return _unavailable(_NOT_MATERIALIZED.format(store="LanceDB"))

    @app.exception_handler(IndexModelMismatch)
    async def _other_model(request: Request, error: IndexModelMismatch) -> JSONResponse:
        return _unavailable(str(error))

    @app.exception_handler(EmbeddingFailure)
    async def _embedder_down(request: Request, error: EmbeddingFailure) -> JSONResponse:
        # Reached only where nothing can stand in for a vector (vector-only search, an
        # answer); hybrid search degrades to keyword search instead.
        log.warning("embedding provider failed on %s: %s", request.url.path, error)
        return _unavailable(f"the embedding provider failed: {error}")

    @app.exception_handler(StoreUnavailable)
    async def _unavailable_store(request: Request, error: StoreUnavailable) -> JSONResponse:
        return _unavailable(str(error))

    @app.exception_handler(duckdb.IOException)
    async def _duckdb_busy(request: Request, error: duckdb.IOException) -> JSONResponse:
        log.warning("DuckDB could not answer %s: %s", request.url.path, error)
        return _unavailable(f"the DuckDB store is busy or unreadable ({type(error).__name__})")


def _unavailable(detail: str) -> JSONResponse:
    return JSONResponse(
        ErrorResponse(detail=detail).model_dump(),
        status_code=503,
        headers={"Retry-After": str(_RETRY_AFTER_SECONDS)},
    )
