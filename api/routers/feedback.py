"""POST /v1/feedback: thumbs up or down on an answer, kept for review as a golden-set
candidate (`lorehouse eval feedback` exports them)."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, HTTPException

from api.deps import CallerDep, ServiceDep
from api.models import ErrorResponse, FeedbackRequest, FeedbackStored
from api.openapi import NOT_READY, UNAUTHORIZED, UNREADABLE_BODY

router = APIRouter(prefix="/v1")


@router.post(
    "/feedback",
    summary="Rate an answer",
    status_code=201,
    response_model=FeedbackStored,
    tags=["answers"],
    responses={
        **UNREADABLE_BODY,
        **UNAUTHORIZED,
        404: {
            "model": ErrorResponse,
            "description": "A cited chunk does not exist or the caller may not see it.",
        },
        **NOT_READY,
    },
)
def feedback(body: FeedbackRequest, service: ServiceDep, caller: CallerDep) -> FeedbackStored:
    """Stores a verdict on an answer; every cited chunk must be one the caller may see."""
    files = []
    for chunk_id in body.citations:
        found = service.retriever.chunk_preview(chunk_id, caller.groups, window=0)
        if found is None:
            raise HTTPException(status_code=404, detail=f"no chunk {chunk_id!r}")
        files.append(found[0]["rel_path"])
    service.feature_store().add_feedback(
        {
            "answer_id": body.answer_id,
            "given_at": datetime.now(UTC),
            "caller": caller.name,
            "rating": body.rating,
            "comment": body.comment,
            "question": body.question,
            "answer": body.answer,
            "cited_chunk_ids": list(body.citations),
            "cited_files": files,
        }
    )
    return FeedbackStored(answer_id=body.answer_id, rating=body.rating)
