"""GET /v1/chunks/{chunk_id}: a cited chunk between its neighbours, the PDF page it is on
(highlighted) and its original file: what a citation preview shows."""

from __future__ import annotations

import hashlib
import logging
import mimetypes
from pathlib import PurePosixPath
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, HTTPException, Path, Query, Response
from fastapi.concurrency import run_in_threadpool

from api.deps import CallerDep, ServiceDep
from api.errors import invalid_field
from api.models import MAX_PAGE, MAX_VERSION, ChunkPreview, ErrorResponse
from api.openapi import NOT_READY, UNAUTHORIZED
from lorehouse.errors import SourceError
from lorehouse.page_images import RenderFailed, render_page
from lorehouse.search.hits import ChunkSince, ChunkView
from lorehouse.search.versions import VersionGone

log = logging.getLogger("lorehouse.api")
router = APIRouter(prefix="/v1")


#: A chunk of the bundled sample corpus (the parental-leave FAQ's entitlement), so "Try it
#: out" in /docs works on `make demo`'s index; a test keeps it an id that index holds.
SAMPLE_CHUNK_ID = "13c5e8efb99dcbb79efbd73a7fbe999b"
ChunkId = Annotated[
    str,
    Path(
        min_length=1,
        max_length=128,
        description="A chunk's id, as a search hit or a citation gives it.",
        openapi_examples={
            "sample": {
                "summary": "A chunk of the sample corpus",
                "value": SAMPLE_CHUNK_ID,
            }
        },
    ),
]
_NO_SUCH_CHUNK: dict[int | str, dict[str, Any]] = {
    404: {
        "model": ErrorResponse,
        "description": "No such chunk, or one the caller may not see (not told apart).",
    }
}


def _visible_chunk(
    service: ServiceDep, caller: CallerDep, chunk_id: str, window: int = 0
) -> tuple[dict, list[dict]]:
    """The chunk and its neighbours; 404 when it does not exist or is not visible."""
    found = service.retriever.chunk_preview(chunk_id, caller.groups, window)
    if found is None:
        raise HTTPException(status_code=404, detail=f"no chunk {chunk_id!r}")
    return found


def _pinned_chunk(
    service: ServiceDep, caller: CallerDep, chunk_id: str, window: int, version: int
) -> tuple[dict, list[dict], ChunkSince]:
    """The chunk and its neighbours as they were at `version`, and what became of it.

    The caller must be able to read it both then and now (`Retriever.pinned_preview`): a
    document whose access list narrowed since, that was restricted and then deleted, or that
    moved into a folder the caller may not read serves its old text to nobody who lacks
    access now (404, as for any chunk the caller may not see). A version no longer kept, or
    replaced more than LOREHOUSE_CITATION_RETENTION_HOURS ago, is 410; one never written 404.
    """
    try:
        found = service.retriever.pinned_preview(chunk_id, caller.groups, window, version)
    except VersionGone as error:
        raise HTTPException(
            status_code=410 if version < error.latest else 404,
            detail=f"{error}; /v1/chunks/{chunk_id} shows the chunk if it is still indexed",
        ) from error
    if found is None:
        raise HTTPException(status_code=404, detail=f"no chunk {chunk_id!r}")
    return found


def _original(service: ServiceDep, row: dict) -> bytes:
    """The bytes a chunk was built from, read again from its source.

    404 when the source no longer has a regular file there (a symbolic link is never
    followed), 409 when the file holds other bytes than those indexed: a route that served
    whatever the path holds now would hand out a file swapped in after indexing, whatever
    its access list.
    """
    try:
        content = service.lorehouse.document_source().read_bytes(row["rel_path"])
    except SourceError as error:
        log.warning("original of %s unreadable: %s", row["chunk_id"], error)
        raise HTTPException(
            status_code=404,
            detail="the original file is not in the source any more; the next reindex "
            "removes its chunks",
        ) from error
    indexed = service.feature_store().indexed_content_sha256(row["doc_id"])
    if indexed is None or hashlib.sha256(content).hexdigest() != indexed:
        log.warning("original of %s changed since it was indexed", row["chunk_id"])
        raise HTTPException(
            status_code=409,
            detail="the original file has changed since it was indexed; the next reindex "
            "picks up the new version",
        )
    return content


@router.get(
    "/chunks/{chunk_id}",
    summary="Preview a cited chunk between its neighbours",
    response_model=ChunkPreview,
    tags=["search"],
    responses={**UNAUTHORIZED, **_NO_SUCH_CHUNK, **NOT_READY},
)
def chunk(
    service: ServiceDep,
    caller: CallerDep,
    chunk_id: ChunkId,
    window: Annotated[int, Query(ge=0, le=5, description="Neighbours on each side")] = 1,
    version: Annotated[
        int | None,
        Query(
            ge=1,
            le=MAX_VERSION,
            description="The index version a citation was made from: the chunk as it was "
            "then, and whether it changed since. Kept LOREHOUSE_CITATION_RETENTION_HOURS.",
        ),
    ] = None,
) -> ChunkPreview:
    """A cited chunk with its neighbours; 404 when it does not exist or is not visible,
    410 when the pinned version is no longer kept."""
    since: ChunkSince | None = None
    if version is None:
        chunk_row, around = _visible_chunk(service, caller, chunk_id, window)
    else:
        chunk_row, around, since = _pinned_chunk(service, caller, chunk_id, window, version)
    views = [ChunkView.model_validate(row) for row in around]
    return ChunkPreview(
        chunk=ChunkView.model_validate(chunk_row),
        before=[v for v in views if v.position < chunk_row["position"]],
        after=[v for v in views if v.position > chunk_row["position"]],
        index_version=version,
        changed_since=since,
    )


@router.get(
    "/chunks/{chunk_id}/page",
    summary="The PDF page of a chunk, highlighted",
    tags=["search"],
    response_class=Response,
    responses={
        200: {"content": {"image/png": {}}, "description": "The page, the chunk highlighted."},
        **UNAUTHORIZED,
        **_NO_SUCH_CHUNK,
        **NOT_READY,
    },
)
async def chunk_page(
    service: ServiceDep,
    caller: CallerDep,
    chunk_id: ChunkId,
    page: Annotated[
        int | None,
        Query(
            ge=1,
            le=MAX_PAGE,
            description="Which of the chunk's pages, from its `page_start` to its `page_end`; "
            "unset: the page it starts on.",
        ),
    ] = None,
) -> Response:
    """A PDF page of a chunk (the one it starts on, or `page` of those it spans), as a PNG
    with the chunk's text highlighted; 404 for a chunk of another format or without pages,
    422 for a `page` the chunk is not on or a page that cannot be drawn within the renderer's
    time and memory. When too many pages are being drawn at once the answer is a 503 with
    Retry-After.
    \f
    Pages are drawn in processes of their own, `PAGE_RENDERS` at once: a request waits for its
    turn on the event loop, holding no worker thread, and gets a 503 when none comes.
    """
    row, _ = await run_in_threadpool(_visible_chunk, service, caller, chunk_id)
    if row["file_type"] != "pdf" or row["page_start"] is None:
        raise HTTPException(status_code=404, detail=f"chunk {chunk_id!r} is not on a PDF page")
    first = int(row["page_start"])
    last = max(first, int(row["page_end"] or first))
    if page is not None and not first <= page <= last:
        spans = f"page {first}" if first == last else f"pages {first} to {last}"
        raise invalid_field(("query", "page"), f"the chunk is on {spans}, not on page {page}")
    pdf = await run_in_threadpool(_original, service, row)
    await service.page_turns.take()
    try:
        png, _ = await run_in_threadpool(render_page, pdf, page or first, row["text_chat"])
    except ValueError as error:
        raise HTTPException(status_code=404, detail=str(error)) from error
    except RenderFailed as error:
        raise invalid_field(("path", "chunk_id"), str(error)) from error
    finally:
        service.page_turns.give_back()
    return Response(png, media_type="image/png", headers={"Cache-Control": "private, max-age=300"})


@router.get(
    "/chunks/{chunk_id}/file",
    summary="The original file of a chunk",
    tags=["search"],
    response_class=Response,
    responses={
        200: {
            # The file's own type: PDF, Markdown or plain text, an Office file, HTML...
            "content": {"*/*": {"schema": {"type": "string", "format": "binary"}}},
            "description": "The original file the chunk was cut from, as its own media type.",
        },
        **UNAUTHORIZED,
        **_NO_SUCH_CHUNK,
        **NOT_READY,
    },
)
def chunk_file(service: ServiceDep, caller: CallerDep, chunk_id: ChunkId) -> Response:
    """The original file of a chunk the caller may see, for the reader to open.

    Only passive types (PDF, images, plain text) open in the browser; anything else, HTML
    and SVG among them, is an attachment, so a document's own script never runs in the
    API's origin. Every answer is sandboxed and never sniffed as another type.
    """
    row, _ = _visible_chunk(service, caller, chunk_id)
    content = _original(service, row)
    name = PurePosixPath(row["rel_path"]).name
    media_type, inline = original_media_type(name)
    disposition = "inline" if inline else "attachment"
    headers = {
        "Content-Disposition": f"{disposition}; filename*=UTF-8''{quote(name)}",
        "X-Content-Type-Options": "nosniff",
        "Cache-Control": "private, no-store",
    }
    # Chromium's PDF viewer does not open in a sandboxed document; a PDF runs no script in
    # the page's origin, so it alone goes without the sandbox.
    if media_type != "application/pdf":
        headers["Content-Security-Policy"] = "sandbox; default-src 'none'"
    return Response(content, media_type=media_type, headers=headers)


#: Types a browser shows without running anything of the document's own.
_PASSIVE_TYPES = {"application/pdf", "image/png", "image/jpeg", "image/gif", "image/webp"}
#: Text formats shown as plain text rather than handed to whatever the browser does with them.
_PLAIN_TEXT_SUFFIXES = {".md", ".markdown", ".txt", ".csv", ".tsv", ".rst", ".log"}


def original_media_type(name: str) -> tuple[str, bool]:
    """(media type, whether it may open inline) for an original file named `name`."""
    if PurePosixPath(name).suffix.lower() in _PLAIN_TEXT_SUFFIXES:
        return "text/plain; charset=utf-8", True
    media_type = mimetypes.guess_type(name)[0] or "application/octet-stream"
    return media_type, media_type in _PASSIVE_TYPES
