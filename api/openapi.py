"""What the served OpenAPI schema says beyond the models: every status a route can answer
(with its body and headers), the Server-Sent Events of a streamed answer, and the rerankers
this deployment accepts."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from api.models import AskToken, ErrorResponse
from lorehouse.agents.trace import StepTrace

# Every status a route can answer is declared, with its body and headers, so clients generated
# from the schema handle errors too and the schema can be checked against real responses.
UNREADABLE_BODY: dict[int | str, dict[str, Any]] = {
    400: {
        "model": ErrorResponse,
        "description": "The body is not text in the declared encoding (JSON must be UTF-8).",
    }
}
UNAUTHORIZED: dict[int | str, dict[str, Any]] = {
    401: {
        "model": ErrorResponse,
        "description": (
            "No valid API key was presented, or two different ones were (only when API keys "
            "are configured)."
        ),
        "headers": {
            "WWW-Authenticate": {
                "description": "The accepted scheme: `Bearer` (or the X-API-Key header).",
                "required": True,
                "schema": {"type": "string"},
            }
        },
    }
}
NOT_READY: dict[int | str, dict[str, Any]] = {
    503: {
        "model": ErrorResponse,
        "description": (
            "A store is not materialized yet, was built with another embedding model, or is "
            "busy; `detail` says which and what to run."
        ),
        "headers": {
            "Retry-After": {
                "description": "Seconds to wait before trying again.",
                "required": True,
                "schema": {"type": "integer"},
            }
        },
    }
}


# With `stream: true` every event of the body matches this: `event` names the kind and `data`
# holds JSON (the next text piece, or the complete answer as the JSON response would carry it).
def _event_schema(event: str, data_schema: dict[str, Any]) -> dict[str, Any]:
    """One kind of Server-Sent Event: its name, and the JSON its `data` line holds."""
    return {
        "type": "object",
        "required": ["event", "data"],
        "properties": {
            "event": {"const": event},
            "data": {
                "type": "string",
                "contentMediaType": "application/json",
                "contentSchema": data_schema,
            },
        },
    }


ASK_EVENT_SCHEMA: dict[str, Any] = {
    "description": (
        "One Server-Sent Event; the stream is a `step` event per pipeline step done before "
        "the answer, `token` events, then one `answer`. While it is quiet, a comment line "
        "(`: ping`) arrives every LOREHOUSE_API_STREAM_PING_SECONDS; it is no event."
    ),
    "oneOf": [
        _event_schema("step", StepTrace.model_json_schema()),
        _event_schema("token", AskToken.model_json_schema()),
        _event_schema("answer", {"$ref": "#/components/schemas/AskResponse"}),
    ],
}


def document_rerankers(app: FastAPI, allowed: list[str]) -> None:
    """Lists the rerankers this deployment accepts in the served schema.

    Which names are valid depends on settings (a configured litellm model joins none and maxsim),
    so the request model cannot spell them out; without the list, a client built from the
    schema would send names that only earn a 422.
    """
    build = app.openapi

    def openapi() -> dict[str, Any]:
        schema = build()
        rerank = schema["components"]["schemas"]["SearchRequest"]["properties"]["rerank"]
        rerank["anyOf"] = [{"type": "string", "enum": list(allowed)}, {"type": "null"}]
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


#: Request examples over the bundled sample corpus, so "Try it out" in /docs finds something.
SEARCH_EXAMPLES: dict[str, dict[str, Any]] = {
    "parental leave": {
        "summary": "A plain question, default hybrid search",
        "value": {"query": "How many weeks of parental leave do primary caregivers get?"},
    },
    "filtered": {
        "summary": "Only PDFs, pages 1-5, keyword search",
        "value": {
            "query": "work from another country",
            "top_k": 3,
            "mode": "bm25",
            "filters": {"file_types": ["pdf"], "page_from": 1, "page_to": 5},
        },
    },
    "passages": {
        "summary": "Each hit with its neighbouring chunks, up to 400 words, for your own LLM",
        "value": {"query": "What is the hotel limit per night?", "passage_words": 400},
    },
}
ASK_EXAMPLES: dict[str, dict[str, Any]] = {
    "question": {
        "summary": "A question answered with citations",
        "value": {"question": "For how many days a year may I work from another country?"},
    },
    "follow-up": {
        "summary": "A follow-up that leans on the conversation",
        "value": {
            "question": "And in Toronto?",
            "history": [
                {"role": "user", "content": "What is the hotel limit per night?"},
                {"role": "assistant", "content": "It depends on the city [1]."},
            ],
        },
    },
    "streamed": {
        "summary": "The same answer as Server-Sent Events",
        "value": {
            "question": "How many weeks of parental leave do secondary caregivers get?",
            "stream": True,
        },
    },
}
