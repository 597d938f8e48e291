"""How failures reach a client: 422s that name the field (and echo only a bounded piece of
the input), and 503s with Retry-After for stores that are not built, busy or unreachable."""

from __future__ import annotations

import logging
import math
from typing import Any

import duckdb
from fastapi import FastAPI, HTTPException, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from api.deps import NOT_MATERIALIZED, StoreUnavailable
from api.models import ErrorResponse
from lorehouse.embedding.base import EmbeddingFailure
from lorehouse.search.retriever import IndexModelMismatch
from lorehouse.search.tables import IndexNotBuilt

log = logging.getLogger("lorehouse.api")
RETRY_AFTER_SECONDS = 10


def invalid_field(location: tuple[str, ...], message: str) -> HTTPException:
    """A 422 shaped like FastAPI's own validation errors, for checks a model cannot express."""
    return HTTPException(
        status_code=422, detail=[{"loc": list(location), "msg": message, "type": "value_error"}]
    )


# What a 422 repeats of the offending input: enough to find the mistake, never the input itself
# (a 16 MB field would come back as a 16 MB error) and never deeper than a few levels.
_ECHO_CHARS = 200
_ECHO_ITEMS = 10
_ECHO_DEPTH = 3
_ECHO_ERRORS = 20


def _echo(value: Any, depth: int = 0) -> Any:
    """`value` cut to what an error message may repeat, and made safe for JSON text.

    Lists and objects are kept to `_ECHO_ITEMS` entries and `_ECHO_DEPTH` levels, so the
    recursion is bounded however deeply the request nests; strings are cut to `_ECHO_CHARS`
    characters, with lone surrogates escaped and NaN and infinities spelled out (JSON text
    cannot carry them, though Python's parser lets them in).
    """
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, int):
        # Digits beyond the cap would also trip Python's limit on int-to-text conversion.
        return value if abs(value) < 2**63 else f"<an integer of {value.bit_length()} bits>"
    if isinstance(value, dict | list | tuple):
        items = list(value.items()) if isinstance(value, dict) else list(value)
        if depth >= _ECHO_DEPTH:
            return f"<{type(value).__name__} of {len(items)} items>"
        kept = items[:_ECHO_ITEMS]
        if isinstance(value, dict):
            return {str(_echo(k, depth + 1)): _echo(v, depth + 1) for k, v in kept}
        echoed = [_echo(item, depth + 1) for item in kept]
        if len(items) > _ECHO_ITEMS:
            echoed.append(f"<{len(items) - _ECHO_ITEMS} more items>")
        return echoed
    text = value if isinstance(value, str) else str(value)  # e.g. the exception in a `ctx`
    if len(text) > _ECHO_CHARS:
        text = f"{text[:_ECHO_CHARS]}<{len(text) - _ECHO_CHARS} more characters>"
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _validation_details(error: RequestValidationError) -> list[dict[str, Any]]:
    """FastAPI's error list with every echoed input and context bounded by `_echo`."""
    details = []
    for item in error.errors()[:_ECHO_ERRORS]:
        detail = {key: item[key] for key in ("type", "loc", "msg") if key in item}
        detail["loc"] = [_echo(part) for part in detail.get("loc", ())]
        if "input" in item:
            detail["input"] = _echo(item["input"])
        if "ctx" in item:
            detail["ctx"] = _echo(item["ctx"])
        details.append(detail)
    return details


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, error: StarletteHTTPException) -> Response:
        if error.status_code != 405:
            return await http_exception_handler(request, error)
        # Starlette's 405 names the methods of the first route at the path; a path served by
        # several route functions (one per method) allows them all.
        allowed = sorted(
            {
                method
                for route in request.app.router.routes
                if route.matches(request.scope)[0] is not Match.NONE
                for method in getattr(route, "methods", None) or ()
            }
        )
        return JSONResponse(
            {"detail": "Method Not Allowed"}, status_code=405, headers={"Allow": ", ".join(allowed)}
        )

    @app.exception_handler(RequestValidationError)
    async def _invalid_request(request: Request, error: RequestValidationError) -> JSONResponse:
        return JSONResponse({"detail": _validation_details(error)}, status_code=422)

    @app.exception_handler(IndexNotBuilt)
    async def _not_built(request: Request, error: IndexNotBuilt) -> JSONResponse:
        return _unavailable(NOT_MATERIALIZED.format(store="LanceDB"))

    @app.exception_handler(IndexModelMismatch)
    async def _other_model(request: Request, error: IndexModelMismatch) -> JSONResponse:
        return _unavailable(str(error))

    @app.exception_handler(EmbeddingFailure)
    async def _embedder_down(request: Request, error: EmbeddingFailure) -> JSONResponse:
        # Reached only where nothing can stand in for a vector (vector-only search, an
        # answer); hybrid search degrades to keyword search instead.
        log.warning("embedding provider failed on %s: %s", request.url.path, error)
        return _unavailable(f"the embedding provider failed: {error}")

    @app.exception_handler(StoreUnavailable)
    async def _unavailable_store(request: Request, error: StoreUnavailable) -> JSONResponse:
        return _unavailable(str(error))

    @app.exception_handler(duckdb.IOException)
    async def _duckdb_busy(request: Request, error: duckdb.IOException) -> JSONResponse:
        log.warning("DuckDB could not answer %s: %s", request.url.path, error)
        return _unavailable(f"the DuckDB store is busy or unreadable ({type(error).__name__})")


def _unavailable(detail: str) -> JSONResponse:
    return JSONResponse(
        ErrorResponse(detail=detail).model_dump(),
        status_code=503,
        headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
    )
