"""GET /v1/chunks/{chunk_id}: a cited chunk between its neighbours, for citation previews."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Query

from api.deps import CallerDep, ServiceDep
from api.models import ChunkPreview, ErrorResponse
from api.openapi import NOT_READY, UNAUTHORIZED
from lorehouse.retrieval import ChunkView

router = APIRouter(prefix="/v1")


@router.get(
    "/chunks/{chunk_id}",
    response_model=ChunkPreview,
    tags=["search"],
    responses={
        **UNAUTHORIZED,
        404: {
            "model": ErrorResponse,
            "description": "No such chunk, or one the caller may not see (not told apart).",
        },
        **NOT_READY,
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
