"""GET /v1/documents: the documents the caller may see, a page at a time."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from api.deps import CallerDep, ServiceDep
from api.models import DocumentPage, DocumentView
from api.openapi import NOT_READY, UNAUTHORIZED

router = APIRouter(prefix="/v1")


@router.get(
    "/documents",
    summary="List the documents you may read",
    response_model=DocumentPage,
    tags=["documents"],
    responses={**UNAUTHORIZED, **NOT_READY},
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
