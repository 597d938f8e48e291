"""The Lorehouse HTTP API: a thin layer over the materialized stores.

Every request is answered from what the asset graph wrote (LanceDB for chunks, DuckDB for the
document list); nothing here parses, chunks or indexes. Bad input is a 422 naming the field,
stores that are not built yet are a 503 saying what to run, and access control is applied in
the store queries themselves.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import AsyncIterator, Generator, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Annotated, Any

import anyio
import duckdb
from fastapi import Depends, FastAPI, HTTPException, Path, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.types import Receive, Scope, Send
from threadpoolctl import threadpool_limits

from api.models import (
    AskRequest,
    AskToken,
    ChunkPreview,
    ChunkView,
    DocumentPage,
    DocumentView,
    ErrorResponse,
    Health,
    Liveness,
    SearchRequest,
    StoreHealth,
)
from lorehouse.agents.ask import AskPipeline, AskResponse
from lorehouse.api_keys import ANONYMOUS, Caller, KeyRing
from lorehouse.embedding.base import Embedder, EmbeddingFailure
from lorehouse.llm import LLMClient
from lorehouse.rerankers import available_rerankers
from lorehouse.retrieval import IndexModelMismatch, Retriever, SearchResult, access_clause
from lorehouse.settings import Settings, get_settings
from lorehouse.stores import DuckDBStore
from lorehouse.stores.lance_index import ChunkIndex, IndexNotBuilt
from lorehouse.wiring import Lorehouse

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


class AskTurns:
    """Turns for computing an answer: at most `limit` at once, so memory stays bounded.

    An ask waits for its turn on the event loop, never in a worker thread: a waiting ask that
    held a thread would take it from the running answers (and every other route) that need
    the same pool to finish, and a burst of asks would stall the whole API.
    """

    def __init__(self, limit: int, wait_seconds: float) -> None:
        self.limit = limit
        self.wait_seconds = wait_seconds
        self._free = asyncio.Semaphore(limit)

    async def take(self) -> None:
        """Waits up to `wait_seconds` for a turn; StoreUnavailable (a 503) when none comes."""
        try:
            await asyncio.wait_for(self._free.acquire(), self.wait_seconds)
        except TimeoutError:
            raise StoreUnavailable(
                f"{self.limit} answers are being computed; retry shortly"
            ) from None

    def give_back(self) -> None:
        self._free.release()


@dataclass
class Service:
    """What the lifespan opens once and every request shares."""

    settings: Settings
    lorehouse: Lorehouse
    index: ChunkIndex
    embedder: Embedder
    retriever: Retriever
    keys: KeyRing | None
    pipeline: AskPipeline
    ask_turns: AskTurns

    def feature_store(self) -> DuckDBStore:
        if not self.settings.duckdb_path.exists():
            raise StoreUnavailable(_NOT_MATERIALIZED.format(store="DuckDB"))
        return self.lorehouse.feature_store(lock_timeout_seconds=_DUCKDB_WAIT_SECONDS)


class StoreUnavailable(RuntimeError):
    """A store cannot answer now (not built, or busy); the client should retry later."""


def open_service(settings: Settings, llm_client: LLMClient | None = None) -> Service:
    """Opens the stores, loads the embedder and the API keys: everything a request needs.

    `llm_client` overrides the client built from settings (e.g. one with extra litellm
    options); without either, answers are extractive.
    """
    keys = KeyRing.load(settings.api_keys_file) if settings.api_keys_file else None
    # For the whole process: every request thread calling a multi-threaded BLAS at once makes
    # their threads spin against each other on the two cores.
    threadpool_limits(limits=settings.api_blas_threads, user_api="blas")
    lorehouse = Lorehouse(settings, answer_llm=llm_client)
    embedder = lorehouse.embedder()
    embedder.embed(["warm up"])  # load the model now, not during the first request
    pipeline = lorehouse.ask_pipeline()
    turns = AskTurns(settings.api_max_concurrent_asks, settings.api_ask_wait_seconds)
    return Service(
        settings,
        lorehouse,
        lorehouse.chunk_index(),
        embedder,
        pipeline.retriever,
        keys,
        pipeline,
        turns,
    )


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
        # A redirect from `/v1/search/` would be built from the request's Host header, which
        # the client controls; paths are exact instead.
        redirect_slashes=False,
    )
    _install_error_handlers(app)
    _install_routes(app)
    _document_rerankers(app, available_rerankers(settings.rerank))
    return app


def _document_rerankers(app: FastAPI, allowed: list[str]) -> None:
    """Lists the rerankers this deployment accepts in the served schema.

    Which names are valid depends on settings (a configured litellm model joins none and maxsim),
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
    """Every non-empty key the request carries, in X-API-Key headers and Bearer tokens.

    One rule for both headers: whitespace around a key is not part of it. HTTP says so for
    header values (uvicorn strips it before the application sees the header), and a key
    that worked behind one server or header but not another would be a trap.
    """
    presented = {value.strip() for value in request.headers.getlist("x-api-key")}
    for authorization in request.headers.getlist("authorization"):
        scheme, _, token = authorization.strip().partition(" ")
        if scheme.lower() == "bearer":
            presented.add(token.strip())
    presented.discard("")
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
    async def ask(
        body: AskRequest, service: ServiceDep, caller: CallerDep
    ) -> AskResponse | StreamingResponse:
        """A cited answer from the documents the caller may see, with its trace.

        With `stream: true` the answer arrives as Server-Sent Events: `token` events with
        text pieces, then one `answer` event holding this response.
        """
        # Store reads and answering run in worker threads; only the wait for a turn runs on
        # the event loop, where it costs no thread.
        await run_in_threadpool(service.retriever.check_model)
        await service.ask_turns.take()
        arguments = {
            "question": body.question,
            "history": body.history,
            "filters": body.filters,
            "top_k": body.top_k,
            "caller_groups": caller.groups,
        }
        handed_over = False
        try:
            if body.stream:
                # Fail before the stream starts if the stores are not there: a 503 cannot
                # follow a 200 whose body has begun.
                await run_in_threadpool(service.index.table)
                events = _events(service.pipeline.stream(**arguments))
                handed_over = True  # the response gives the turn back when it is over
                return AnswerStream(events, service.ask_turns)
            return await run_in_threadpool(lambda: service.pipeline.ask(**arguments))
        finally:
            if not handed_over:
                service.ask_turns.give_back()

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
        response_model=Liveness,
        tags=["operations"],
        responses={503: {"model": Liveness, "description": "A store is unreachable or not built."}},
    )
    def healthz(service: ServiceDep) -> JSONResponse:
        """Liveness and readiness for probes: 200 once both stores are built, else 503.

        Needs no key, so it tells nothing else; GET /v1/health has the details.
        """
        health = _health(service, caller_groups=())
        liveness = Liveness(status=health.status)
        if health.status != "ok":
            not_ready = next(s for s in (health.lancedb, health.duckdb) if not s.ready)
            liveness.detail = not_ready.detail
        return JSONResponse(liveness.model_dump(mode="json"), status_code=_health_code(health))

    @app.get(
        "/v1/health",
        response_model=Health,
        tags=["operations"],
        responses={
            **_UNAUTHORIZED,
            503: {"model": Health, "description": "A store is unreachable or not built."},
        },
    )
    def health(service: ServiceDep, caller: CallerDep) -> JSONResponse:
        """Both stores' state, with counts of the documents and chunks the caller may see."""
        health = _health(service, caller.groups)
        return JSONResponse(health.model_dump(mode="json"), status_code=_health_code(health))


def _events(stream: Iterator[str | AskResponse]) -> Generator[str, None, None]:
    """Server-Sent Events: one `token` event per text piece, then the `answer` event.

    Closing these events closes the answer stream too, so a client that leaves stops the
    model call instead of leaving it to garbage collection.
    """
    with contextlib.closing(stream):  # type: ignore[type-var]
        for item in stream:
            if isinstance(item, AskResponse):
                yield f"event: answer\ndata: {item.model_dump_json()}\n\n"
            else:
                yield f"event: token\ndata: {AskToken(text=item).model_dump_json()}\n\n"


class AnswerStream(StreamingResponse):
    """A streamed answer that holds its ask's turn for exactly as long as the response runs.

    The turn is given back when the body has been sent, when the client goes away mid-answer,
    and when it goes away before the first event: a generator that never started has no
    `finally` of its own to run, which is why the turn cannot be given back inside it.
    """

    def __init__(self, events: Generator[str, None, None], turns: AskTurns) -> None:
        super().__init__(events, media_type="text/event-stream")
        self._events = events
        self._turns = turns

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            try:
                # Shielded: a response cancelled by a disconnect must still close its events.
                # Starlette's worker threads finish their step before a cancel lands, so the
                # generator is never running when it is closed here.
                with anyio.CancelScope(shield=True):
                    await run_in_threadpool(self._events.close)
            finally:
                self._turns.give_back()


def _health_code(health: Health) -> int:
    return 200 if health.status == "ok" else 503


def _health(service: Service, caller_groups: Sequence[str]) -> Health:
    """Both stores' state; counts are of what `caller_groups` may see.

    Details name states and error types, never paths or hosts: those are in the server log.
    """
    health = Health(
        status="ok",
        embedding_model=service.embedder.name,
        lancedb=_lance_health(service, caller_groups),
        duckdb=_duckdb_health(service, caller_groups),
    )
    if not (health.lancedb.ready and health.duckdb.ready):
        health.status = "unavailable"
    return health


def _unreachable(store: str, error: Exception) -> StoreHealth:
    log.warning("the %s store is unreachable: %s", store, error)
    return StoreHealth(reachable=False, ready=False, detail=f"unreachable ({type(error).__name__})")


def _lance_health(service: Service, caller_groups: Sequence[str]) -> StoreHealth:
    try:
        if not service.index.exists():
            return StoreHealth(
                reachable=True, ready=False, detail=_NOT_MATERIALIZED.format(store="LanceDB")
            )
        service.retriever.check_model()
        visible = service.index.count(access_clause(caller_groups))
    except IndexModelMismatch as error:
        return StoreHealth(reachable=True, ready=False, detail=str(error))
    except OSError as error:
        return _unreachable("LanceDB", error)
    return StoreHealth(reachable=True, ready=True, detail="built", counts={"chunks": visible})


def _duckdb_health(service: Service, caller_groups: Sequence[str]) -> StoreHealth:
    try:
        store = service.feature_store()
        built = store.row_count("documents") > 0
        visible, _ = store.visible_documents(caller_groups, limit=1, offset=0)
    except StoreUnavailable as error:
        return StoreHealth(reachable=True, ready=False, detail=str(error))
    except duckdb.Error as error:
        return _unreachable("DuckDB", error)
    detail = "built" if built else "empty; run `lorehouse materialize`"
    return StoreHealth(reachable=True, ready=built, detail=detail, counts={"documents": visible})


def _invalid_field(location: tuple[str, ...], message: str) -> HTTPException:
    """A 422 shaped like FastAPI's own validation errors, for checks a model cannot express."""
    return HTTPException(
        status_code=422, detail=[{"loc": list(location), "msg": message, "type": "value_error"}]
    )


# What a 422 repeats of the offending input: enough to find the mistake, never the input itself
# (a 16 MB field would come back as a 16 MB error) and never deeper than a few levels.
_ECHO_CHARS = 200
_ECHO_ITEMS = 10
_ECHO_DEPTH = 3
_ECHO_ERRORS = 20


def _echo(value: Any, depth: int = 0) -> Any:
    """`value` cut to what an error message may repeat, and made safe for JSON text.

    Lists and objects are kept to `_ECHO_ITEMS` entries and `_ECHO_DEPTH` levels, so the
    recursion is bounded however deeply the request nests; strings are cut to `_ECHO_CHARS`
    characters, with lone surrogates escaped and NaN and infinities spelled out (JSON text
    cannot carry them, though Python's parser lets them in).
    """
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, int):
        # Digits beyond the cap would also trip Python's limit on int-to-text conversion.
        return value if abs(value) < 2**63 else f"<an integer of {value.bit_length()} bits>"
    if isinstance(value, dict | list | tuple):
        items = list(value.items()) if isinstance(value, dict) else list(value)
        if depth >= _ECHO_DEPTH:
            return f"<{type(value).__name__} of {len(items)} items>"
        kept = items[:_ECHO_ITEMS]
        if isinstance(value, dict):
            return {str(_echo(k, depth + 1)): _echo(v, depth + 1) for k, v in kept}
        echoed = [_echo(item, depth + 1) for item in kept]
        if len(items) > _ECHO_ITEMS:
            echoed.append(f"<{len(items) - _ECHO_ITEMS} more items>")
        return echoed
    text = value if isinstance(value, str) else str(value)  # e.g. the exception in a `ctx`
    if len(text) > _ECHO_CHARS:
        text = f"{text[:_ECHO_CHARS]}<{len(text) - _ECHO_CHARS} more characters>"
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _validation_details(error: RequestValidationError) -> list[dict[str, Any]]:
    """FastAPI's error list with every echoed input and context bounded by `_echo`."""
    details = []
    for item in error.errors()[:_ECHO_ERRORS]:
        detail = {key: item[key] for key in ("type", "loc", "msg") if key in item}
        detail["loc"] = [_echo(part) for part in detail.get("loc", ())]
        if "input" in item:
            detail["input"] = _echo(item["input"])
        if "ctx" in item:
            detail["ctx"] = _echo(item["ctx"])
        details.append(detail)
    return details


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _invalid_request(request: Request, error: RequestValidationError) -> JSONResponse:
        return JSONResponse({"detail": _validation_details(error)}, status_code=422)

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
