"""GET /redoc: the API reference in ReDoc, served from the package and kept on this server.

fastapi-offline serves ReDoc's script from the package, but the script itself loads its
footer logo from Redocly's CDN. The page here runs the same script with that one address
taken out, under a policy that lets the browser load nothing from elsewhere, and without
the footer link that would show the missing logo: the reference works, and tells nothing
to a third party, on a closed network.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import fastapi_offline
from fastapi import APIRouter, Request
from fastapi.openapi.docs import get_redoc_html
from fastapi.responses import HTMLResponse, Response

router = APIRouter()

#: Where fastapi-offline mounts its packaged Swagger UI and ReDoc files.
STATIC_URL = "/static-offline-docs"
_REDOC_SCRIPT = Path(fastapi_offline.__file__).parent / "static" / "redoc.standalone.js"
_REDOC_LOGO = "https://cdn.redoc.ly/redoc/logo-mini.svg"
_POLICY = (
    "default-src 'self'; script-src 'self' blob:; worker-src 'self' blob:; "
    "style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'"
)
_VENDOR_LINK = "a[href*='redocly.com']"
_HIDE_VENDOR_LINK = (
    f"<style>{_VENDOR_LINK},*:has(> {_VENDOR_LINK}){{display:none !important}}</style>"
)


@cache
def _redoc_script() -> bytes:
    """ReDoc's packaged script with its CDN logo address emptied (read once)."""
    return _REDOC_SCRIPT.read_bytes().replace(_REDOC_LOGO.encode(), b"")


@router.get("/redoc", include_in_schema=False)
def redoc(request: Request) -> HTMLResponse:
    """The ReDoc reference of this server's OpenAPI schema."""
    root = request.scope.get("root_path", "")
    page = get_redoc_html(
        openapi_url=f"{root}{request.app.openapi_url}",
        title=f"{request.app.title} - ReDoc",
        redoc_js_url=f"{root}/redoc.js",
        redoc_favicon_url=f"{root}{STATIC_URL}/favicon.png",
        with_google_fonts=False,
    )
    html = page.body.decode().replace("</head>", f"{_HIDE_VENDOR_LINK}</head>", 1)
    return HTMLResponse(html, headers={"Content-Security-Policy": _POLICY})


@router.get("/redoc.js", include_in_schema=False)
def redoc_script() -> Response:
    """The script /redoc runs."""
    return Response(
        _redoc_script(),
        media_type="text/javascript; charset=utf-8",
        headers={"Cache-Control": "public, max-age=86400"},
    )
