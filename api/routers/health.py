"""GET /healthz (for probes, no key) and GET /v1/health (per-store details for a caller)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import duckdb
from fastapi import APIRouter
from fastapi.responses import JSONResponse

from api.deps import NOT_MATERIALIZED, CallerDep, Service, ServiceDep, StoreUnavailable
from api.models import Health, Liveness, StoreHealth
from api.openapi import UNAUTHORIZED
from lorehouse.search.filters import access_clause
from lorehouse.search.retriever import IndexModelMismatch

log = logging.getLogger("lorehouse.api")
router = APIRouter()


@router.get(
    "/healthz",
    summary="Liveness and readiness",
    response_model=Liveness,
    tags=["operations"],
    responses={503: {"model": Liveness, "description": "A store is unreachable or not built."}},
)
def healthz(service: ServiceDep) -> JSONResponse:
    """Liveness and readiness for probes: 200 once both stores are built, else 503.

    Needs no key, so it tells nothing else; GET /v1/health has the details.
    \f
    Probes call it every few seconds, so it counts nothing: each count is a scan of a store.
    """
    health = _health(service, caller_groups=(), counts=False)
    liveness = Liveness(status=health.status)
    if health.status != "ok":
        not_ready = next(s for s in (health.lancedb, health.duckdb) if not s.ready)
        liveness.detail = not_ready.detail
    return JSONResponse(liveness.model_dump(mode="json"), status_code=_health_code(health))


@router.get(
    "/v1/health",
    summary="The stores' state for you",
    response_model=Health,
    tags=["operations"],
    responses={
        **UNAUTHORIZED,
        503: {"model": Health, "description": "A store is unreachable or not built."},
    },
)
def health(service: ServiceDep, caller: CallerDep) -> JSONResponse:
    """Both stores' state, with counts of the documents and chunks the caller may see, and
    how many answers this process is computing now."""
    health = _health(service, caller.groups)
    health.caller = caller.name
    health.answers_running = service.ask_turns.taken
    health.answers_limit = service.ask_turns.limit
    return JSONResponse(health.model_dump(mode="json"), status_code=_health_code(health))


def _health_code(health: Health) -> int:
    return 200 if health.status == "ok" else 503


def _health(service: Service, caller_groups: Sequence[str], counts: bool = True) -> Health:
    """Both stores' state; counts (unless not wanted) are of what `caller_groups` may see.

    Details name states and error types, never paths or hosts: those are in the server log.
    """
    health = Health(
        status="ok",
        embedding_model=service.embedder.name,
        lancedb=_lance_health(service, caller_groups, counts),
        duckdb=_duckdb_health(service, caller_groups, counts),
    )
    if not (health.lancedb.ready and health.duckdb.ready):
        health.status = "unavailable"
    return health


def _unreachable(store: str, error: Exception) -> StoreHealth:
    log.warning("the %s store is unreachable: %s", store, error)
    return StoreHealth(reachable=False, ready=False, detail=f"unreachable ({type(error).__name__})")


def _lance_health(service: Service, caller_groups: Sequence[str], counts: bool) -> StoreHealth:
    try:
        if not service.index.exists():
            return StoreHealth(
                reachable=True, ready=False, detail=NOT_MATERIALIZED.format(store="LanceDB")
            )
        service.retriever.check_model()
        visible = service.index.count(access_clause(caller_groups)) if counts else None
    except IndexModelMismatch as error:
        return StoreHealth(reachable=True, ready=False, detail=str(error))
    except OSError as error:
        return _unreachable("LanceDB", error)
    return StoreHealth(
        reachable=True,
        ready=True,
        detail="built",
        counts={"chunks": visible} if visible is not None else {},
    )


def _duckdb_health(service: Service, caller_groups: Sequence[str], counts: bool) -> StoreHealth:
    try:
        store = service.feature_store()
        built = store.row_count("documents") > 0
        visible = store.visible_documents(caller_groups, limit=1, offset=0)[0] if counts else None
    except StoreUnavailable as error:
        return StoreHealth(reachable=True, ready=False, detail=str(error))
    except duckdb.Error as error:
        return _unreachable("DuckDB", error)
    detail = "built" if built else "empty; run `lorehouse materialize`"
    return StoreHealth(
        reachable=True,
        ready=built,
        detail=detail,
        counts={"documents": visible} if visible is not None else {},
    )
