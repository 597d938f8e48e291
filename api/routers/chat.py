"""The chat page at /chat: one HTML file, its script and its style sheet, served from the
package (no build step, no CDN). The page holds no data of its own: everything it shows comes
from the /v1 routes with the reader's key, so the caller's access applies to all of it."""

from __future__ import annotations

from importlib.resources import files
from typing import Literal

from fastapi import APIRouter
from fastapi.responses import RedirectResponse, Response

router = APIRouter(include_in_schema=False)

_ASSETS = files("api") / "static"
_MEDIA_TYPES = {
    "chat.js": "text/javascript; charset=utf-8",
    "chat.css": "text/css; charset=utf-8",
}
#: The page may load only what it is served with and talk only to this API.
_SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; img-src 'self' blob:; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-cache",
}


@router.get("/")
def home() -> RedirectResponse:
    return RedirectResponse("/chat")


@router.get("/chat")
def chat_page() -> Response:
    """The chat page."""
    html = (_ASSETS / "chat.html").read_bytes()
    return Response(html, media_type="text/html; charset=utf-8", headers=_SECURITY_HEADERS)


@router.get("/chat/{asset}")
def chat_asset(asset: Literal["chat.js", "chat.css"]) -> Response:
    """The page's script and style sheet."""
    content = (_ASSETS / asset).read_bytes()
    return Response(content, media_type=_MEDIA_TYPES[asset], headers=_SECURITY_HEADERS)
