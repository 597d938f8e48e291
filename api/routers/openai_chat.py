"""POST /v1/chat/completions: Lorehouse as a model to any OpenAI client (Open WebUI, the
`openai` SDKs, LangChain's ChatOpenAI...), streamed or not.

The last user message is the question and the turns before it its history; the answer is
/v1/ask's, with the caller's key as the bearer token. Citations must survive a client that
shows nothing but the message's text, so the content ends with the sources, each [n] with
its document, place and a link to the cited passage on the chat page; the full citations
are also in the response's `citations` field (and in the last chunk of a stream).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Generator, Iterator
from typing import Any

from fastapi import APIRouter
from pydantic import ValidationError
from sse_starlette import EventSourceResponse, ServerSentEvent

from api.deps import CallerDep, ServiceDep
from api.errors import invalid_field
from api.models import (
    AskRequest,
    ChatCompletion,
    ChatCompletionChoice,
    ChatCompletionMessage,
    ChatCompletionRequest,
)
from api.openapi import NOT_READY, UNAUTHORIZED, UNREADABLE_BODY
from api.routers.ask import LINE_END, answer
from lorehouse.agents.ask import AskResponse, Citation
from lorehouse.agents.query_optimizer import Turn
from lorehouse.agents.trace import StepTrace

router = APIRouter(prefix="/v1")

#: The model name a completion reports, whatever the request named.
MODEL = "lorehouse"
#: Turns of history an answer reads, as /v1/ask's `history` allows.
HISTORY_MESSAGES = 20
#: A history message's length as `Turn` allows it.
HISTORY_CHARS = 4000
#: Formats whose citations name pages (slides and sheets are numbered as pages).
PAGED = (".pdf", ".pptx", ".xlsx")
DEGRADED = "\n\n(The model's reply could not be used; the answer from the passages:)\n\n"


@router.post(
    "/chat/completions",
    summary="Answer as an OpenAI-compatible chat model",
    response_model=ChatCompletion,
    tags=["answers"],
    responses={
        200: {"content": {"text/event-stream": {}}},
        **UNREADABLE_BODY,
        **UNAUTHORIZED,
        **NOT_READY,
    },
)
async def chat_completions(
    body: ChatCompletionRequest, service: ServiceDep, caller: CallerDep
) -> ChatCompletion | EventSourceResponse:
    """The answer to the last user message, from the documents the caller may read, as a
    Chat Completions response; with `stream: true` as its chunks, then `data: [DONE]`. The
    content ends with the sources; `citations` lists them in full."""
    request = _ask_request(body)
    links = service.settings.chat_url
    completion_id = f"chatcmpl-{int(time.time() * 1000):x}"
    answered = await answer(
        request,
        service,
        caller,
        lambda stream, _saved: _chunks(stream, completion_id, links),
    )
    if isinstance(answered, AskResponse):
        return ChatCompletion(
            id=f"chatcmpl-{answered.answer_id}",
            created=int(answered.answered_at.timestamp()),
            model=MODEL,
            choices=[
                ChatCompletionChoice(
                    message=ChatCompletionMessage(content=_content(answered, links))
                )
            ],
            usage=_usage(answered),
            citations=answered.citations,
        )
    return answered


def _ask_request(body: ChatCompletionRequest) -> AskRequest:
    """The question (the last message, a user's) and the history before it, as /v1/ask
    takes them; system and tool messages are not read."""
    *earlier, last = body.messages
    if last.role != "user" or not last.text().strip():
        raise invalid_field(
            ("body", "messages", str(len(body.messages) - 1)),
            "the last message must be the user's question, with text",
        )
    history = [
        Turn(role=message.role, content=message.text()[:HISTORY_CHARS])  # type: ignore[arg-type]
        for message in earlier
        if message.role in ("user", "assistant") and message.text().strip()
    ][-HISTORY_MESSAGES:]
    try:
        return AskRequest(
            question=last.text(), history=history, filters=body.filters, stream=body.stream
        )
    except ValidationError as error:
        problem = error.errors()[0]
        where = ("body", "messages", str(len(body.messages) - 1), "content")
        raise invalid_field(where, str(problem["msg"])) from error


def _content(response: AskResponse, links: str) -> str:
    return response.answer + _sources(response.citations, links)


def _sources(citations: list[Citation], links: str) -> str:
    """The sources as the end of a message: "[n] Title (path › section, p. 5): link"."""
    if not citations:
        return ""
    lines = []
    for citation in citations:
        # As the chat page writes them: the headings below the title, and pages only for the
        # formats that have them.
        headings = citation.heading_path
        if headings and headings[0] == citation.title:
            headings = headings[1:]
        place = " › ".join([citation.rel_path, *headings])
        if citation.page_start and citation.rel_path.lower().endswith(PAGED):
            place += f", p. {citation.page_start}"
            if citation.page_end and citation.page_end != citation.page_start:
                place += f"-{citation.page_end}"
        title = citation.title or citation.rel_path
        lines.append(f"[{citation.number}] {title} ({place}): {links}#chunk={citation.chunk_id}")
    return "\n\nSources:\n" + "\n".join(lines)


def _usage(response: AskResponse) -> dict[str, int]:
    tokens_in = int(response.totals.get("tokens_in", 0))
    tokens_out = int(response.totals.get("tokens_out", 0))
    return {
        "prompt_tokens": tokens_in,
        "completion_tokens": tokens_out,
        "total_tokens": tokens_in + tokens_out,
    }


def _chunks(
    stream: Iterator[str | StepTrace | AskResponse], completion_id: str, links: str
) -> Generator[ServerSentEvent, None, None]:
    """The answer as Chat Completions chunks: its text as it is produced, then the sources
    (and, should a model's reply turn out unusable, the answer from the passages after it),
    a last chunk with `finish_reason` and the citations, then `[DONE]`."""
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> ServerSentEvent:
        payload = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": MODEL,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            **extra,
        }
        return ServerSentEvent(data=json.dumps(payload), sep=LINE_END)

    streamed: list[str] = []
    with contextlib.closing(stream):  # type: ignore[type-var]
        yield chunk({"role": "assistant", "content": ""})
        for item in stream:
            if isinstance(item, StepTrace):
                continue
            if isinstance(item, str):
                streamed.append(item)
                yield chunk({"content": item})
                continue
            text = "".join(streamed)
            rest = item.answer[len(text) :] if item.answer.startswith(text) else None
            if rest is None:
                rest = DEGRADED + item.answer
            yield chunk({"content": rest + _sources(item.citations, links)})
            yield chunk(
                {},
                "stop",
                usage=_usage(item),
                citations=[c.model_dump(mode="json") for c in item.citations],
            )
    yield ServerSentEvent(data="[DONE]", sep=LINE_END)
