"""What every request shares: the service the lifespan opens, and the caller a request's key
names. Routes take them as `ServiceDep` and `CallerDep`."""

from __future__ import annotations

import asyncio
import logging
import threading
from dataclasses import dataclass, field
from typing import Annotated

import anyio
from fastapi import Depends, HTTPException, Request, Security
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
from slack_bolt import App
from sqlalchemy.exc import SQLAlchemyError
from starlette.datastructures import Headers
from threadpoolctl import threadpool_limits

from api.slack import build_slack_app
from lorehouse.agents.ask import AskPipeline
from lorehouse.api_keys import ANONYMOUS, Caller, KeysFileWatch
from lorehouse.embedding.base import Embedder
from lorehouse.llm import LLMClient
from lorehouse.search.retriever import Retriever
from lorehouse.search.tables import ChunkTable
from lorehouse.settings import Settings
from lorehouse.sources.uploads import UploadFolder
from lorehouse.stores import DuckDBStore
from lorehouse.stores.conversations import ConversationStore
from lorehouse.wiring import Lorehouse

log = logging.getLogger("lorehouse.api")
NOT_MATERIALIZED = "the {store} store is not materialized yet; run `lorehouse materialize`"
# The document list waits this long for a materialization's write lock before a 503.
DUCKDB_WAIT_SECONDS = 10.0
#: Page previews drawn at once per server process. Each takes a core of its own (MuPDF draws
#: on one thread, in a process of its own) for as long as RENDER_TIMEOUT_SECONDS; more at once
#: would take the cores searches and answers run on.
PAGE_RENDERS = 2
#: How long a page preview waits for its turn before a 503 with Retry-After: a capped page is
#: drawn in well under a second, so a longer wait means the renders are being flooded.
PAGE_RENDER_WAIT_SECONDS = 10.0


class Turns:
    """Turns for work that must not all run at once: at most `limit` at a time.

    A request waits for its turn on the event loop, never in a worker thread: a waiting
    request that held a thread would take it from the running ones (and every other route)
    that need the same pool to finish, and a burst would stall the whole API.
    """

    def __init__(self, limit: int, wait_seconds: float, busy: str) -> None:
        self.limit = limit
        self.wait_seconds = wait_seconds
        #: What a 503 says when no turn comes, e.g. "4 answers are being computed".
        self.busy = busy
        self._free = asyncio.Semaphore(limit)
        #: Turns taken and not yet given back: what /v1/health reports, so an operator sees
        #: the load and a turn that is never given back shows as a count that stays up.
        self.taken = 0

    async def take(self) -> None:
        """Waits up to `wait_seconds` for a turn; StoreUnavailable (a 503) when none comes."""
        try:
            await asyncio.wait_for(self._free.acquire(), self.wait_seconds)
        except TimeoutError:
            raise StoreUnavailable(f"{self.busy}; retry shortly") from None
        self.taken += 1

    def give_back(self) -> None:
        self.taken -= 1
        self._free.release()


class AskTurns(Turns):
    """Turns for computing an answer: each holds the answer's working memory while it runs,
    so memory stays bounded by `limit`."""

    def __init__(self, limit: int, wait_seconds: float) -> None:
        super().__init__(limit, wait_seconds, busy=f"{limit} answers are being computed")


@dataclass
class Service:
    """What the lifespan opens once and every request shares."""

    settings: Settings
    lorehouse: Lorehouse
    index: ChunkTable
    embedder: Embedder
    retriever: Retriever
    #: The keys file as it is now (read again when it changes); None: no keys required.
    keys: KeysFileWatch | None
    pipeline: AskPipeline
    ask_turns: AskTurns
    #: Turns for computing a search (`api_search_threads` at once), awaited on the event loop.
    search_turns: anyio.CapacityLimiter
    #: Turns for drawing a page preview (`PAGE_RENDERS` at once).
    page_turns: Turns
    #: The Slack bot, when its token and signing secret are configured.
    slack: App | None = None
    #: Where chat page uploads go; None when LOREHOUSE_UPLOAD_FOLDER is unset.
    uploads: UploadFolder | None = None
    _feature_store: DuckDBStore | None = field(default=None, init=False, repr=False)
    _conversations: ConversationStore | None = field(default=None, init=False, repr=False)
    _conversations_opening: threading.Lock = field(
        default_factory=threading.Lock, init=False, repr=False
    )

    def feature_store(self) -> DuckDBStore:
        """The DuckDB feature store, once a materialization has written it.

        Built once per process: building one checks the schema, a write transaction on the
        file (CPU time of its own, and a wait whenever a reindex holds the lock) that every
        document list, feedback and health probe paid before.
        """
        if not self.settings.duckdb_path.exists():
            raise StoreUnavailable(NOT_MATERIALIZED.format(store="DuckDB"))
        if self._feature_store is None:
            self._feature_store = self.lorehouse.feature_store(
                lock_timeout_seconds=DUCKDB_WAIT_SECONDS
            )
        return self._feature_store

    def conversation_store(self) -> ConversationStore:
        """The saved conversations' store, opened on first use (it creates its tables)."""
        with self._conversations_opening:  # one process creates the tables once
            if self._conversations is None:
                try:
                    self._conversations = self.lorehouse.conversation_store()
                except SQLAlchemyError as error:
                    log.warning("the conversations database cannot be opened: %s", error)
                    raise StoreUnavailable(CONVERSATIONS_UNAVAILABLE) from error
            return self._conversations


#: What a 503 says when the conversations' database does not answer; never its URL.
CONVERSATIONS_UNAVAILABLE = "the conversations database does not answer; retry shortly"


class StoreUnavailable(RuntimeError):
    """A store cannot answer now (not built, or busy); the client should retry later."""


def open_service(settings: Settings, llm_client: LLMClient | None = None) -> Service:
    """Opens the stores, loads the embedder and the API keys: everything a request needs.

    `llm_client` overrides the client built from settings (e.g. one with extra litellm
    options); without either, answers are extractive.
    """
    keys = KeysFileWatch(settings.api_keys_file) if settings.api_keys_file else None
    # For the whole process: every request thread calling a multi-threaded BLAS at once makes
    # their threads spin against each other on the two cores.
    threadpool_limits(limits=settings.api_blas_threads, user_api="blas")
    lorehouse = Lorehouse(settings, answer_llm=llm_client)
    embedder = lorehouse.embedder()
    embedder.embed(["warm up"])  # load the model now, not during the first request
    pipeline = lorehouse.ask_pipeline()
    pipeline.retriever.warm()
    turns = AskTurns(settings.api_max_concurrent_asks, settings.api_ask_wait_seconds)
    return Service(
        settings,
        lorehouse,
        lorehouse.chunk_reader(),
        embedder,
        pipeline.retriever,
        keys,
        pipeline,
        turns,
        anyio.CapacityLimiter(settings.api_search_threads),
        Turns(PAGE_RENDERS, PAGE_RENDER_WAIT_SECONDS, busy=f"{PAGE_RENDERS} pages are being drawn"),
        build_slack_app(settings, pipeline),
        lorehouse.upload_folder(),
    )


async def get_service(request: Request) -> Service:
    """The service the lifespan opened.

    `async` because it never blocks: a plain `def` dependency costs every request a hop to
    the thread pool and back (two with `get_caller`), which under load queue behind the
    searches holding the pool's threads.
    """
    return request.app.state.service


ServiceDep = Annotated[Service, Depends(get_service)]


def presented_keys(headers: Headers) -> set[str]:
    """Every non-empty key a request's headers carry, in X-API-Key headers and Bearer tokens.

    One rule for both headers: whitespace around a key is not part of it. HTTP says so for
    header values (uvicorn strips it before the application sees the header), and a key
    that worked behind one server or header but not another would be a trap.
    """
    presented = {value.strip() for value in headers.getlist("x-api-key")}
    for authorization in headers.getlist("authorization"):
        scheme, _, token = authorization.strip().partition(" ")
        if scheme.lower() == "bearer":
            presented.add(token.strip())
    presented.discard("")
    return presented


#: The two ways to present a key, declared so the schema has security schemes and /docs an
#: Authorize button. They do not decide anything: `get_caller` reads every key the request
#: carries, in both headers, so that two different keys are refused.
API_KEY_HEADER = APIKeyHeader(
    name="X-API-Key", auto_error=False, description="A key from `lorehouse keys create`."
)
BEARER = HTTPBearer(auto_error=False, description="The same key as a bearer token.")


#: What a 401 says, and the challenge it carries: the same whether the key is refused before
#: the body is read (api/guards.py) or by `get_caller`.
KEY_REQUIRED = "a valid API key is required (X-API-Key header or Authorization: Bearer)"
CHALLENGE = {"WWW-Authenticate": "Bearer"}


def identify_caller(service: Service, headers: Headers) -> Caller | None:
    """The caller behind the request's key: the anonymous caller when no keys are configured,
    None when they are and the request does not present exactly one key that matches.

    A request carrying two different keys is refused rather than resolved by header order:
    otherwise which groups it gets would depend on a precedence that a proxy checking only
    one of the headers does not know about. Reads the headers alone, never the body.
    """
    if service.keys is None:
        return Caller(ANONYMOUS, ())
    presented = presented_keys(headers)
    return service.keys.identify(presented.pop()) if len(presented) == 1 else None


async def get_caller(
    request: Request,
    service: ServiceDep,
    _api_key: Annotated[str | None, Security(API_KEY_HEADER)] = None,
    _bearer: Annotated[HTTPAuthorizationCredentials | None, Security(BEARER)] = None,
) -> Caller:
    """The caller behind the request's key; 401 when keys are configured and none matches.

    Hashing a key never blocks, so this runs on the event loop rather than in a worker
    thread. FastAPI resolves it only after it has read the body; RequestGuard (api/guards.py)
    refuses the same requests before that.
    """
    caller = identify_caller(service, request.headers)
    if caller is None:
        raise HTTPException(status_code=401, detail=KEY_REQUIRED, headers=dict(CHALLENGE))
    return caller


CallerDep = Annotated[Caller, Depends(get_caller)]
