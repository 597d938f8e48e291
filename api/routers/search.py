"""POST /v1/search: ranked chunks the caller may see."""

from __future__ import annotations

from functools import partial
from typing import Annotated

import anyio.to_thread
from fastapi import APIRouter, Body

from api.deps import CallerDep, ServiceDep
from api.errors import invalid_field
from api.models import SearchRequest
from api.openapi import NOT_READY, SEARCH_EXAMPLES, UNAUTHORIZED, UNREADABLE_BODY
from lorehouse.search.hits import SearchResult
from lorehouse.search.rerankers import available_rerankers

router = APIRouter(prefix="/v1")


@router.post(
    "/search",
    summary="Search the chunks you may read",
    response_model=SearchResult,
    tags=["search"],
    responses={**UNREADABLE_BODY, **UNAUTHORIZED, **NOT_READY},
)
async def search(
    body: Annotated[SearchRequest, Body(openapi_examples=SEARCH_EXAMPLES)],
    service: ServiceDep,
    caller: CallerDep,
) -> SearchResult:
    """Chunks matching the query that the caller may see, best first, with citations.

    A busy server queues the search until it can run it; nothing is refused for load.
    \f
    The search runs in a worker thread once one of the process's search turns is free
    (`api_search_threads`); until then the request waits on the event loop. FastAPI's own
    pool would start one search per thread, up to 40, to take turns on the CPU cores.
    """
    allowed = available_rerankers(service.settings.rerank)
    if body.rerank is not None and body.rerank not in allowed:
        raise invalid_field(("body", "rerank"), f"unknown reranker; choose one of {allowed}")
    return await anyio.to_thread.run_sync(
        partial(
            service.retriever.search,
            body.query,
            top_k=body.top_k,
            mode=body.mode,
            filters=body.filters,
            caller_groups=caller.groups,
            rerank=body.rerank,
            passage_words=body.passage_words,
        ),
        limiter=service.search_turns,
    )
