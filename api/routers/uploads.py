"""/v1/uploads: files a signed-in caller adds to the knowledge base, for groups of their own.

The API only stores the file, with its access sidecar, in the deployment's upload folder
(lorehouse/sources/uploads.py); Dagster's runs index it like any other document (the upload
sensor requests an inventory run, which carries on to the file's partition and the merge).
An upload's state is read from what those runs wrote: the inventory's and the parse stage's
records in DuckDB, and the served search index.

An upload is its uploader's alone to list, follow and delete: another caller's id is a 404
like one that never existed.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Path, Query, Request, Response
from starlette.concurrency import run_in_threadpool

from api.deps import CallerDep, Service, ServiceDep, StoreUnavailable
from api.models import ErrorResponse, UploadsOverview, UploadState, UploadView
from api.openapi import NOT_READY, UNAUTHORIZED
from lorehouse.api_keys import Caller
from lorehouse.sniffing import READABLE_EXTENSIONS
from lorehouse.sources.uploads import Refusal, Upload, UploadFolder, UploadRefused
from lorehouse.stores.status_tables import DocumentStatus

router = APIRouter(prefix="/v1")

#: The path the request guard lets carry an upload's larger body (api/main.py).
UPLOADS_PATH = "/v1/uploads"
#: The status each refusal is answered with.
_REFUSAL_STATUS = {
    Refusal.TOO_LARGE: 413,
    Refusal.UNREADABLE_TYPE: 415,
    Refusal.BAD_NAME: 422,
    Refusal.BAD_GROUPS: 422,
    Refusal.NO_GROUPS: 403,
}
UploadIdPath = Annotated[
    str, Path(min_length=1, max_length=64, description="An upload's id, as created.")
]
_NOT_ENABLED: dict[int | str, dict[str, Any]] = {
    404: {
        "model": ErrorResponse,
        "description": "Uploads are not enabled on this deployment, or no such upload of yours.",
    }
}
_REFUSED: dict[int | str, dict[str, Any]] = {
    403: {"model": ErrorResponse, "description": "The caller's key has no group to upload for."},
    413: {"model": ErrorResponse, "description": "The file is larger than uploads take."},
    415: {"model": ErrorResponse, "description": "The file's type is not one Lorehouse reads."},
}


def _folder(service: Service) -> UploadFolder:
    if service.uploads is None:
        raise HTTPException(
            status_code=404,
            detail="uploads are not enabled on this deployment (LOREHOUSE_UPLOAD_FOLDER)",
        )
    return service.uploads


def _no_upload(upload_id: str) -> HTTPException:
    return HTTPException(status_code=404, detail=f"no upload {upload_id!r}")


@router.get(
    "/uploads",
    summary="What you may upload, and your uploads",
    response_model=UploadsOverview,
    tags=["uploads"],
    responses={**UNAUTHORIZED, **_NOT_ENABLED, **NOT_READY},
)
def uploads(service: ServiceDep, caller: CallerDep) -> UploadsOverview:
    """The upload limits, the groups the caller may upload for, and each of the caller's
    uploads with where its indexing stands, the latest first."""
    folder = _folder(service)
    return UploadsOverview(
        max_bytes=folder.max_bytes,
        readable_extensions=list(READABLE_EXTENSIONS),
        groups=sorted(caller.groups),
        uploads=_views(service, caller, folder.uploads(caller.name)),
    )


@router.post(
    "/uploads",
    summary="Upload a file for groups of yours",
    status_code=201,
    response_model=UploadView,
    tags=["uploads"],
    responses={**UNAUTHORIZED, **_NOT_ENABLED, **_REFUSED, **NOT_READY},
    openapi_extra={
        "requestBody": {
            "required": True,
            "description": "The file's bytes, as they are (no multipart form).",
            "content": {"application/octet-stream": {"schema": {"type": "string"}}},
        }
    },
)
async def create_upload(
    request: Request,
    service: ServiceDep,
    caller: CallerDep,
    filename: Annotated[
        str, Query(min_length=1, max_length=255, description="The file's name, with its type.")
    ],
    groups: Annotated[
        list[str],
        Query(max_length=50, description="The groups that may read it, among yours (repeat)."),
    ],
) -> UploadView:
    """Stores the file in the upload folder for `groups`, which must be the caller's own;
    the next inventory run takes it in. Never public: a caller without groups cannot upload.
    The name and groups are checked before the body is read."""
    folder = _folder(service)
    try:
        folder.check(filename, groups, caller.groups)
        data = await request.body()
        upload = await run_in_threadpool(
            folder.store, caller.name, filename, data, groups, caller.groups
        )
    except UploadRefused as refused:
        raise HTTPException(_REFUSAL_STATUS[refused.refusal], detail=refused.message) from None
    return _views(service, caller, [upload])[0]


@router.get(
    "/uploads/{upload_id}",
    summary="Where an upload stands",
    response_model=UploadView,
    tags=["uploads"],
    responses={**UNAUTHORIZED, **_NOT_ENABLED, **NOT_READY},
)
def upload(service: ServiceDep, caller: CallerDep, upload_id: UploadIdPath) -> UploadView:
    """One of the caller's uploads: queued, parsing, indexing, indexed or failed (and why)."""
    found = _folder(service).find(caller.name, upload_id)
    if found is None:
        raise _no_upload(upload_id)
    return _views(service, caller, [found])[0]


@router.delete(
    "/uploads/{upload_id}",
    summary="Delete an upload",
    status_code=204,
    response_class=Response,
    tags=["uploads"],
    responses={**UNAUTHORIZED, **_NOT_ENABLED},
)
def delete_upload(service: ServiceDep, caller: CallerDep, upload_id: UploadIdPath) -> Response:
    """Removes the file from the upload folder; the next inventory run takes it out of the
    index."""
    if not _folder(service).delete(caller.name, upload_id):
        raise _no_upload(upload_id)
    return Response(status_code=204)


def _views(service: Service, caller: Caller, found: list[Upload]) -> list[UploadView]:
    """The uploads with their states, from one read of the statuses and one of the index."""
    doc_ids = [upload.doc_id for upload in found]
    try:
        statuses = service.feature_store().statuses_of(doc_ids) if doc_ids else {}
    except StoreUnavailable:
        statuses = {}  # nothing materialized yet: every upload waits for its first run
    indexed = service.retriever.readable_documents(doc_ids, caller.groups)
    return [
        _view(upload, statuses.get(upload.doc_id), upload.doc_id in indexed) for upload in found
    ]


def _view(upload: Upload, status: DocumentStatus | None, indexed: bool) -> UploadView:
    state: UploadState
    reason = None
    if indexed:
        state, detail = "indexed", "searchable by " + ", ".join(upload.groups)
    elif status is None:
        state, detail = "queued", "stored; waiting for the next inventory run"
    elif status.status == "failed":
        state, reason = "failed", status.reason
        detail = status.detail or status.reason
    elif status.status == "parsed":
        state, detail = "indexing", "parsed; waiting for the search index to publish it"
    else:
        state, detail = "parsing", "listed by the inventory; being parsed"
    return UploadView(
        upload_id=upload.id,
        filename=upload.filename,
        path=upload.path,
        doc_id=upload.doc_id,
        groups=list(upload.groups),
        size_bytes=upload.size_bytes,
        uploaded_at=upload.uploaded_at,
        state=state,
        reason=reason,
        detail=detail,
    )
