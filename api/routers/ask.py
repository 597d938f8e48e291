"""POST /v1/ask: a cited answer, as one JSON response or as Server-Sent Events."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Generator, Iterator
from typing import Annotated

import anyio
from fastapi import APIRouter, Body
from fastapi.concurrency import run_in_threadpool
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.types import Receive, Scope, Send

from api.deps import AskTurns, CallerDep, Service, ServiceDep
from api.models import AskRequest, AskToken, ErrorResponse
from api.openapi import ASK_EVENT_SCHEMA, ASK_EXAMPLES, NOT_READY, UNAUTHORIZED, UNREADABLE_BODY
from api.routers.conversations import conversation_history, record_turn
from lorehouse.agents.ask import AskResponse
from lorehouse.agents.trace import StepTrace
from lorehouse.api_keys import Caller

router = APIRouter(prefix="/v1")

#: Events end in a bare LF, which every SSE parser reads (the spec allows CRLF, LF or CR).
LINE_END = "\n"


@router.post(
    "/ask",
    summary="Answer a question with citations",
    response_model=AskResponse,
    tags=["answers"],
    responses={
        200: {"content": {"text/event-stream": {"schema": ASK_EVENT_SCHEMA}}},
        **UNREADABLE_BODY,
        **UNAUTHORIZED,
        404: {
            "model": ErrorResponse,
            "description": "No such conversation of yours (`conversation_id`).",
        },
        **NOT_READY,
    },
)
async def ask(
    body: Annotated[AskRequest, Body(openapi_examples=ASK_EXAMPLES)],
    service: ServiceDep,
    caller: CallerDep,
) -> AskResponse | EventSourceResponse:
    """A cited answer from the documents the caller may see, with its trace.

    With `stream: true` the answer arrives as Server-Sent Events: a `step` event for each
    step done before the answer (query optimizer, source identifier, retrieval, post-
    processor), `token` events with text pieces, then one `answer` event holding this
    response. A comment line (`: ping`) keeps a quiet stream open every
    `LOREHOUSE_API_STREAM_PING_SECONDS` (15) while the model thinks.
    """
    return await answer(body, service, caller, _events)


#: Server-Sent Events of an answer's steps, pieces and response (each route has its own
#: format), given `saved` to call with the response before its event.
EventEncoder = Callable[
    [Iterator["str | StepTrace | AskResponse"], "Callable[[AskResponse], None] | None"],
    Generator[ServerSentEvent, None, None],
]


async def answer(
    body: AskRequest, service: Service, caller: Caller, encode: EventEncoder
) -> AskResponse | EventSourceResponse:
    """The answer to `body` as `caller`, taking one of the process's turns while it is
    computed; streamed (`body.stream`) as `encode` writes its events.

    Store reads and answering run in worker threads; only the wait for a turn runs on the
    event loop, where it costs no thread.
    """
    await run_in_threadpool(service.retriever.check_model)
    history = body.history
    saved: Callable[[AskResponse], None] | None = None
    if (conversation_id := body.conversation_id) is not None:
        history = await run_in_threadpool(conversation_history, service, caller, conversation_id)

        def saved(answer: AskResponse) -> None:
            record_turn(service, caller, conversation_id, answer)

    await service.ask_turns.take()
    arguments = {
        "question": body.question,
        "history": history,
        "filters": body.filters,
        "top_k": body.top_k,
        "caller_groups": caller.groups,
    }
    handed_over = False
    try:
        if body.stream:
            # Fail before the stream starts if the stores are not there: a 503 cannot
            # follow a 200 whose body has begun.
            await run_in_threadpool(service.index.table)
            events = encode(service.pipeline.stream(**arguments), saved)
            handed_over = True  # the response gives the turn back when it is over
            return AnswerStream(events, service.ask_turns, service.settings.api_stream_ping_seconds)
        answered = await run_in_threadpool(lambda: service.pipeline.ask(**arguments))
    finally:
        if not handed_over:
            service.ask_turns.give_back()
    if saved is not None:
        await run_in_threadpool(saved, answered)
    return answered


def _events(
    stream: Iterator[str | StepTrace | AskResponse],
    saved: Callable[[AskResponse], None] | None = None,
) -> Generator[ServerSentEvent, None, None]:
    """Server-Sent Events: a `step` event per pipeline step done before the answer, a `token`
    event per text piece, then the `answer` event, once `saved` has stored the answer in its
    conversation (if the ask is in one).

    Closing these events closes the answer stream too, so a client that leaves stops the
    model call instead of leaving it to garbage collection.
    """
    with contextlib.closing(stream):  # type: ignore[type-var]
        for item in stream:
            if isinstance(item, AskResponse):
                if saved is not None:
                    saved(item)
                yield ServerSentEvent(event="answer", data=item.model_dump_json(), sep=LINE_END)
            elif isinstance(item, StepTrace):
                yield ServerSentEvent(event="step", data=item.model_dump_json(), sep=LINE_END)
            else:
                token = AskToken(text=item).model_dump_json()
                yield ServerSentEvent(event="token", data=token, sep=LINE_END)


class AnswerStream(EventSourceResponse):
    """A streamed answer that holds its ask's turn for exactly as long as the response runs.

    sse-starlette encodes the events, sends keep-alive pings while the stream is quiet and
    stops when the client disconnects.

    The turn is given back when the body has been sent, when the client goes away mid-answer,
    and when it goes away before the first event: a generator that never started has no
    `finally` of its own to run, which is why the turn cannot be given back inside it.
    """

    def __init__(
        self,
        events: Generator[ServerSentEvent, None, None],
        turns: AskTurns,
        ping_seconds: float,
    ) -> None:
        super().__init__(
            events,
            ping=ping_seconds,
            ping_message_factory=lambda: ServerSentEvent(comment="ping", sep=LINE_END),
            sep=LINE_END,
        )
        self._events = events
        self._turns = turns

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            try:
                # Shielded: a response cancelled by a disconnect must still close its events.
                # Starlette's worker threads finish their step before a cancel lands, so the
                # generator is never running when it is closed here.
                with anyio.CancelScope(shield=True):
                    await run_in_threadpool(self._events.close)
            finally:
                self._turns.give_back()
