"""What a request must pass before the application reads any of its body: the size limit, on
every route, and a valid key, on every route that takes one.

FastAPI reads and parses a request's body before it resolves any dependency, `get_caller`
among them: without these checks an unauthenticated caller's body was parsed, whatever its
size, before its 401. A body is refused as soon as it is known to be too large, from its
Content-Length before any of it is read, or once a body sent without one passes the limit;
a key is checked from the headers alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from fastapi import APIRouter, HTTPException
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.deps import CHALLENGE, KEY_REQUIRED, Service, get_caller, identify_caller
from api.models import ErrorResponse


def keyed_routes(routers: Sequence[APIRouter]) -> list[APIRoute]:
    """The routes of `routers` that resolve their caller from the request's key (`CallerDep`),
    as the application serves them: the routers are included without a prefix of their own."""
    return [
        route
        for router in routers
        for route in router.routes
        if isinstance(route, APIRoute) and _takes_caller(route.dependant)
    ]


def _takes_caller(dependant: Dependant) -> bool:
    return any(
        needed.call is get_caller or _takes_caller(needed) for needed in dependant.dependencies
    )


def too_large(max_body_bytes: int) -> str:
    """What a 413 says."""
    return f"the request body is larger than the {max_body_bytes} bytes the API accepts"


class RequestGuard:
    """Pure ASGI middleware: a 413 for a body past `max_body_bytes`, and a 401 for a request
    to one of `keyed` without a valid key, before the application reads any of the body.

    Pure ASGI rather than Starlette's BaseHTTPMiddleware, which would run the application in
    a task of its own for every request; and not FastAPI's own `max_body_size`, which
    answers in plain text whenever the route has not read the body, a refused key included.
    """

    def __init__(
        self,
        app: ASGIApp,
        max_body_bytes: int,
        keyed: Sequence[APIRoute],
        keyed_paths: Sequence[str] = (),
        larger_bodies: Mapping[str, int] | None = None,
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        #: Exact paths whose bodies may be larger (an upload carries a whole file).
        self.larger_bodies = dict(larger_bodies or {})
        self.keyed = keyed
        #: Exact paths of endpoints that are not FastAPI routes but take a key all the same
        #: (the MCP endpoint): refused here like any keyed route, whatever the method.
        self.keyed_paths = frozenset(keyed_paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.larger_bodies.get(scope["path"], self.max_body_bytes)
        if _declared_length(scope) > limit:
            await _refusal(413, too_large(limit))(scope, receive, send)
            return
        if self._key_refused(scope):
            await _refusal(401, KEY_REQUIRED, CHALLENGE)(scope, receive, send)
            return
        await self.app(scope, self._counting(receive, limit), send)

    def _key_refused(self, scope: Scope) -> bool:
        """Whether the request is for a keyed route and presents no valid key."""
        service: Service | None = getattr(scope["app"].state, "service", None)
        if service is None or service.keys is None:
            return False
        if scope["path"] not in self.keyed_paths and not any(
            route.matches(scope)[0] is Match.FULL for route in self.keyed
        ):
            return False
        return identify_caller(service, Request(scope).headers) is None

    def _counting(self, receive: Receive, limit: int) -> Receive:
        """`receive`, refusing the body once more than `limit` bytes of it have come."""
        received = 0

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    # Raised where the application reads the body: FastAPI lets an
                    # HTTPException through its body parsing, and the error handlers answer
                    # it like any other.
                    raise HTTPException(status_code=413, detail=too_large(limit))
            return message

        return counted


def _declared_length(scope: Scope) -> int:
    """The body's length as its Content-Length headers declare it; 0 without one.

    The HTTP server has refused a malformed Content-Length already; the largest value counts
    should a request carry several.
    """
    lengths = [
        int(value)
        for name, value in scope["headers"]
        if name == b"content-length" and value.strip().isdigit()
    ]
    return max(lengths, default=0)


def _refusal(status: int, detail: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(
        ErrorResponse(detail=detail).model_dump(), status_code=status, headers=headers
    )
