"""POST /v1/feedback: thumbs up or down on an answer, kept for review as a golden-set
candidate (`lorehouse eval feedback` exports them, each marked with the key that sent it)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi import APIRouter, HTTPException

from api.deps import CallerDep, ServiceDep
from api.models import ErrorResponse, FeedbackRequest, FeedbackStored
from api.openapi import NOT_READY, UNAUTHORIZED, UNREADABLE_BODY
from lorehouse.stores.duckdb_store import FeedbackQuota

router = APIRouter(prefix="/v1")

TOO_MANY_VERDICTS: dict[int | str, dict[str, Any]] = {
    429: {
        "model": ErrorResponse,
        "description": (
            "This key has sent LOREHOUSE_API_FEEDBACK_PER_KEY verdicts within "
            "LOREHOUSE_API_FEEDBACK_WINDOW_SECONDS; nothing was stored."
        ),
        "headers": {
            "Retry-After": {
                "description": "Seconds until this key's next verdict is taken.",
                "required": True,
                "schema": {"type": "integer"},
            }
        },
    }
}


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
        **TOO_MANY_VERDICTS,
        **NOT_READY,
    },
)
def feedback(body: FeedbackRequest, service: ServiceDep, caller: CallerDep) -> FeedbackStored:
    """Stores a verdict on an answer. Every cited chunk must be one the caller may see. A key
    that sends more verdicts than the server allows in its window gets a 429 with
    Retry-After saying when it may send again.
    \f
    The allowance is `api_feedback_per_key` verdicts per `api_feedback_window_seconds`.
    """
    files = []
    for chunk_id in body.citations:
        found = service.retriever.chunk_preview(chunk_id, caller.groups, window=0)
        if found is None:
            raise HTTPException(status_code=404, detail=f"no chunk {chunk_id!r}")
        files.append(found[0]["rel_path"])
    settings = service.settings
    quota = FeedbackQuota(
        settings.api_feedback_per_key, timedelta(seconds=settings.api_feedback_window_seconds)
    )
    given_at = datetime.now(UTC)
    retry_at = service.feature_store().add_feedback(
        {
            "answer_id": body.answer_id,
            "given_at": given_at,
            "caller": caller.name,
            "rating": body.rating,
            "comment": body.comment,
            "question": body.question,
            "answer": body.answer,
            "cited_chunk_ids": list(body.citations),
            "cited_files": files,
        },
        quota,
    )
    if retry_at is not None:
        wait = max(1, math.ceil((retry_at - given_at).total_seconds()))
        raise HTTPException(
            status_code=429,
            detail=(
                f"this key has sent {quota.verdicts} verdicts in the last "
                f"{settings.api_feedback_window_seconds} s, the most it may; nothing was "
                f"stored, retry in {wait} s"
            ),
            headers={"Retry-After": str(wait)},
        )
    return FeedbackStored(answer_id=body.answer_id, rating=body.rating)
