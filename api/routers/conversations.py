"""/v1/conversations: each caller's saved conversations, to list, open, rename, delete and
go on with (POST /v1/ask with `conversation_id`).

A conversation is its owner's alone: another caller's id, guessed or seen, is a 404 like an
id that never existed. A stored answer is shown again only while its owner may still read
every passage it drew on; one that drew on a passage whose access has narrowed since, or
whose document left the index, is withheld (its question stays), and it is not fed back to
the model as history either.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, HTTPException, Path, Query, Response
from sqlalchemy.exc import SQLAlchemyError

from api.deps import CONVERSATIONS_UNAVAILABLE, CallerDep, Service, ServiceDep, StoreUnavailable
from api.deps import log as api_log
from api.models import (
    ConversationCreate,
    ConversationPage,
    ConversationRename,
    ConversationSummary,
    ConversationTurn,
    ConversationView,
    ErrorResponse,
)
from api.openapi import NOT_READY, UNAUTHORIZED, UNREADABLE_BODY
from lorehouse.agents.ask import AskResponse
from lorehouse.agents.query_optimizer import Turn
from lorehouse.api_keys import Caller
from lorehouse.stores.conversations import ConversationRecord, TurnRecord

router = APIRouter(prefix="/v1")
_T = TypeVar("_T")

#: The most earlier turns an answer reads as its history, as /v1/ask's `history` allows.
HISTORY_TURNS = 10
#: A history message's length as `Turn` allows it.
HISTORY_CHARS = 4000

ConversationIdPath = Annotated[
    str,
    Path(min_length=1, max_length=64, description="A conversation's id, as created."),
]
_NO_SUCH_CONVERSATION: dict[int | str, dict[str, Any]] = {
    404: {
        "model": ErrorResponse,
        "description": "No such conversation of yours (another caller's is not told apart).",
    }
}


def no_conversation(conversation_id: str) -> HTTPException:
    return HTTPException(status_code=404, detail=f"no conversation {conversation_id!r}")


def _stored(work: Callable[[], _T]) -> _T:
    """`work` on the conversations database; one that does not answer is a 503 to retry,
    logged without the caller's data."""
    try:
        return work()
    except SQLAlchemyError as error:
        api_log.warning("the conversations database failed: %s", type(error).__name__)
        raise StoreUnavailable(CONVERSATIONS_UNAVAILABLE) from error


def _summary(record: ConversationRecord) -> ConversationSummary:
    return ConversationSummary(
        conversation_id=record.conversation_id,
        title=record.title,
        created_at=record.created_at,
        updated_at=record.updated_at,
        turn_count=record.turns,
    )


@router.get(
    "/conversations",
    summary="List your conversations",
    response_model=ConversationPage,
    tags=["conversations"],
    responses={**UNAUTHORIZED, **NOT_READY},
)
def conversations(
    service: ServiceDep,
    caller: CallerDep,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
) -> ConversationPage:
    """Your saved conversations, the one you asked in last first."""
    store = service.conversation_store()
    total, records = _stored(lambda: store.conversations(caller.name, limit, offset))
    return ConversationPage(
        total=total,
        limit=limit,
        offset=offset,
        conversations=[_summary(record) for record in records],
    )


@router.post(
    "/conversations",
    summary="Start a conversation",
    status_code=201,
    response_model=ConversationSummary,
    tags=["conversations"],
    responses={**UNREADABLE_BODY, **UNAUTHORIZED, **NOT_READY},
)
def create_conversation(
    body: ConversationCreate, service: ServiceDep, caller: CallerDep
) -> ConversationSummary:
    """A new, empty conversation of yours; ask in it with POST /v1/ask and its
    `conversation_id`. Kept LOREHOUSE_CONVERSATION_RETENTION_DAYS after its last question."""
    store = service.conversation_store()
    return _summary(_stored(lambda: store.create(caller.name, body.title or "")))


@router.get(
    "/conversations/{conversation_id}",
    summary="Open a conversation",
    response_model=ConversationView,
    tags=["conversations"],
    responses={**UNAUTHORIZED, **_NO_SUCH_CONVERSATION, **NOT_READY},
)
def conversation(
    service: ServiceDep, caller: CallerDep, conversation_id: ConversationIdPath
) -> ConversationView:
    """The conversation with each question and its answer. An answer that drew on a passage
    you can no longer read is withheld (`withheld`, `answer` null); its question stays."""
    store = service.conversation_store()
    found = _stored(lambda: store.conversation(caller.name, conversation_id))
    if found is None:
        raise no_conversation(conversation_id)
    record, turns = found
    return ConversationView(
        **_summary(record).model_dump(), turns=shown_turns(service, caller, turns)
    )


@router.patch(
    "/conversations/{conversation_id}",
    summary="Rename a conversation",
    response_model=ConversationSummary,
    tags=["conversations"],
    responses={**UNREADABLE_BODY, **UNAUTHORIZED, **_NO_SUCH_CONVERSATION, **NOT_READY},
)
def rename_conversation(
    body: ConversationRename,
    service: ServiceDep,
    caller: CallerDep,
    conversation_id: ConversationIdPath,
) -> ConversationSummary:
    store = service.conversation_store()

    def rename() -> ConversationRecord | None:
        if not store.rename(caller.name, conversation_id, body.title):
            return None
        found = store.conversation(caller.name, conversation_id)
        return found[0] if found else None

    record = _stored(rename)
    if record is None:
        raise no_conversation(conversation_id)
    return _summary(record)


@router.delete(
    "/conversations/{conversation_id}",
    summary="Delete a conversation",
    status_code=204,
    response_class=Response,
    tags=["conversations"],
    responses={**UNAUTHORIZED, **_NO_SUCH_CONVERSATION, **NOT_READY},
)
def delete_conversation(
    service: ServiceDep, caller: CallerDep, conversation_id: ConversationIdPath
) -> Response:
    """Deletes the conversation with every question and answer in it, for good."""
    store = service.conversation_store()
    if not _stored(lambda: store.delete(caller.name, conversation_id)):
        raise no_conversation(conversation_id)
    return Response(status_code=204)


# -- what a stored answer may show, and what an answer in a conversation reads --------------------


def _drawn_on(answer: AskResponse) -> tuple[set[str], set[str], int | None]:
    """(the chunks an answer's text comes from, every chunk id it names, the index version
    it read). The text of an extractive answer is its cited sources' sentences; a model may
    also have written from passages it read and did not cite."""
    sources = {c.chunk_id for c in answer.citations} | {e.chunk_id for e in answer.excerpts}
    if answer.mode == "llm":
        sources |= set(answer.trace.context_chunk_ids)
    named = sources | {c.chunk_id for c in answer.related} | set(answer.trace.context_chunk_ids)
    for ids in answer.trace.retrieved.values():
        named |= set(ids)
    versions = [c.index_version for c in [*answer.citations, *answer.related] if c.index_version]
    return sources, named, (versions[0] if versions else None)


def _as_readable(answer: AskResponse, readable: set[str]) -> AskResponse:
    """The answer without the ids and nearest sources its owner can no longer read."""
    trace = answer.trace.model_copy(
        update={
            "retrieved": {
                query: [i for i in ids if i in readable]
                for query, ids in answer.trace.retrieved.items()
            },
            "context_chunk_ids": [i for i in answer.trace.context_chunk_ids if i in readable],
        }
    )
    related = [c for c in answer.related if c.chunk_id in readable]
    if isinstance(trace.sources, list):
        known = {c.doc_id for c in [*answer.citations, *related]}
        trace.sources = [doc_id for doc_id in trace.sources if doc_id in known]
    return answer.model_copy(update={"related": related, "trace": trace})


def shown_turns(
    service: Service, caller: Caller, turns: Sequence[TurnRecord]
) -> list[ConversationTurn]:
    """The turns as their owner may see them now: each stored answer whose text comes from
    passages the owner still reads, without the ids of any it no longer does; the others
    withheld."""
    shown = []
    for turn in turns:
        answer = AskResponse.model_validate(turn.answer)
        sources, named, version = _drawn_on(answer)
        readable = service.retriever.readable_as_cited(sorted(named), caller.groups, version)
        withheld = not sources <= readable
        shown.append(
            ConversationTurn(
                position=turn.position,
                question=turn.question,
                asked_at=turn.asked_at,
                answer=None if withheld else _as_readable(answer, readable),
                withheld=withheld,
            )
        )
    return shown


def conversation_history(service: Service, caller: Caller, conversation_id: str) -> list[Turn]:
    """The history an answer in the conversation reads: its last HISTORY_TURNS questions and
    the answers its owner may still see; 404 when it is not the caller's."""
    store = service.conversation_store()
    found = _stored(lambda: store.conversation(caller.name, conversation_id))
    if found is None:
        raise no_conversation(conversation_id)
    history: list[Turn] = []
    for turn in shown_turns(service, caller, found[1][-HISTORY_TURNS:]):
        history.append(Turn(role="user", content=turn.question[:HISTORY_CHARS]))
        if turn.answer is not None:
            history.append(Turn(role="assistant", content=turn.answer.answer[:HISTORY_CHARS]))
    return history


def record_turn(
    service: Service, caller: Caller, conversation_id: str, answer: AskResponse
) -> None:
    """Adds the answered question to its conversation (deleted meanwhile: nothing to add)."""
    store = service.conversation_store()
    _stored(
        lambda: store.add_turn(
            caller.name, conversation_id, answer.question, answer.model_dump(mode="json")
        )
    )
