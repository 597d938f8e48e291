"""The Slack bot: mentions and direct messages answered in their thread by /v1/ask's pipeline.

Each request's signature and timestamp are verified on its raw bytes before anything of its
body is parsed (`verified_request`); Slack Bolt (HTTP mode) then acknowledges at once and
runs the answer on its own worker threads, so a slow answer never makes Slack wait past its
3 seconds; the answer is posted to the thread when it is ready. The thread is the
conversation. Slack retries an event it believes was lost; an event is answered once,
whichever delivery arrives first.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import threading
import time
from collections.abc import Mapping
from typing import Any

from cachetools import LRUCache
from slack_bolt import App, BoltRequest
from slack_sdk import WebClient

from lorehouse.agents.ask import AskPipeline, AskResponse, Citation
from lorehouse.agents.query_optimizer import Turn
from lorehouse.settings import Settings
from lorehouse.slack_access import SlackAccess

log = logging.getLogger("lorehouse.slack")
_MENTION = re.compile(r"<@[A-Z0-9]+>")
#: Thread messages read as the conversation before a question.
THREAD_MESSAGES = 20
#: Event ids remembered to answer each event once across Slack's retries.
_REMEMBERED_EVENTS = 10_000
#: How far a request's timestamp may be from now: Slack's rule, so that a request someone
#: captured cannot be replayed later.
SIGNATURE_MAX_AGE_SECONDS = 5 * 60
#: A timestamp as Slack sends it: seconds since the epoch in ASCII digits. Bounded, since
#: converting an arbitrarily long run of digits to an int is itself costly.
_TIMESTAMP = re.compile(r"[0-9]{1,12}")


class SlackRequestRefused(Exception):
    """A request /slack/events does not hand to Bolt; `status` is its answer: 401 when Slack
    did not sign it, 400 when Slack signed a body that is no Slack payload."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status


def verified_request(
    signing_secret: str,
    headers: Mapping[str, str],
    query: Mapping[str, str],
    body: bytes,
) -> BoltRequest:
    """The Bolt request for `body`, once its signature shows Slack sent it.

    The signature is Slack's: an HMAC-SHA256, under the app's signing secret, of the
    timestamp and the raw bytes of the body. It is checked before the body is decoded or
    parsed, so an unsigned request is refused whatever it holds; Bolt's adapter parsed
    first, and a malformed unsigned body was a 500. Bolt checks the signature again.
    slack_sdk's `SignatureVerifier` is not used here: it decodes the body as UTF-8 and
    converts the timestamp with int(), both of which raise on what an outsider may send.
    """
    timestamp = headers.get("x-slack-request-timestamp", "")
    signature = headers.get("x-slack-signature", "")
    if (
        not _TIMESTAMP.fullmatch(timestamp)
        or abs(time.time() - int(timestamp)) > SIGNATURE_MAX_AGE_SECONDS
    ):
        raise SlackRequestRefused(401, "the request has no current Slack signature")
    signed = b"v0:" + timestamp.encode() + b":" + body
    expected = "v0=" + hmac.new(signing_secret.encode(), signed, hashlib.sha256).hexdigest()
    # Header values are Latin-1 text; compared as bytes, so any value compares.
    if not hmac.compare_digest(expected.encode(), signature.encode("latin-1")):
        raise SlackRequestRefused(401, "the request's Slack signature does not match its body")
    return _bolt_request(headers, query, body)


def _bolt_request(headers: Mapping[str, str], query: Mapping[str, str], body: bytes) -> BoltRequest:
    """A signed body as Bolt's request; SlackRequestRefused (a 400) when it is no Slack payload.

    Bolt parses the body when the request is built (JSON, or form data carrying JSON) and
    reads its routing fields (team, user, channel...) from it as an object's: so a body that
    is not UTF-8, not JSON, nested deeper than the parser goes, not an object, or an object
    whose fields have the wrong types fails here, not while an answer is running.
    """
    try:
        request = BoltRequest(body=body.decode("utf-8"), query=dict(query), headers=dict(headers))
    except (UnicodeDecodeError, ValueError, RecursionError, TypeError, AttributeError) as error:
        log.warning("a signed Slack request is no Slack payload: %s", type(error).__name__)
        raise SlackRequestRefused(
            400, f"the body is not a Slack payload ({type(error).__name__})"
        ) from error
    if not isinstance(request.body, dict):
        raise SlackRequestRefused(400, "the body is not a Slack payload (not a JSON object)")
    return request


class EventsSeen:
    """The ids of the last events taken, so a redelivered event is recognised."""

    def __init__(self, size: int = _REMEMBERED_EVENTS) -> None:
        # Least recently taken first; a redelivery's lookup does not refresh it.
        self._ids: LRUCache[str, None] = LRUCache(size)
        self._lock = threading.Lock()

    def first_time(self, event_id: str) -> bool:
        """True the first time an id is offered, False on every later delivery."""
        with self._lock:
            if event_id in self._ids:
                return False
            self._ids[event_id] = None
            return True


def build_slack_app(settings: Settings, pipeline: AskPipeline) -> App | None:
    """The Bolt app answering with `pipeline`; None when no token and secret are configured."""
    if not (settings.slack_bot_token and settings.slack_signing_secret):
        return None
    access = SlackAccess.load(settings.slack_access_file)
    client = WebClient(
        token=settings.slack_bot_token,
        base_url=settings.slack_api_url or WebClient.BASE_URL,
    )
    app = App(
        client=client,
        signing_secret=settings.slack_signing_secret,
        # No auth.test call at start-up: the server starts without reaching Slack.
        token_verification_enabled=False,
        logger=log,
    )
    seen = EventsSeen()

    def answer(body: dict, event: dict, client: WebClient, direct: bool) -> None:
        if not seen.first_time(str(body.get("event_id") or event.get("ts"))):
            log.info("event %s delivered again; answered once", body.get("event_id"))
            return
        channel, user = event["channel"], event.get("user", "")
        thread = event.get("thread_ts") or event["ts"]
        question = _MENTION.sub("", event.get("text", "")).strip()
        if not question:
            return
        history = _thread_history(client, channel, event) if event.get("thread_ts") else []
        groups = access.groups_for(user, channel, direct)
        try:
            response = pipeline.ask(question, history=history, caller_groups=groups)
            text = slack_answer(response, settings.chat_url)
        except (ValueError, RuntimeError) as error:
            log.warning("no answer for a Slack question in %s: %s", channel, error)
            text = "Sorry, I could not answer that just now; please try again later."
        client.chat_postMessage(
            channel=channel, thread_ts=thread, text=text, unfurl_links=False, unfurl_media=False
        )

    @app.event("app_mention")
    def on_mention(body: dict, event: dict, client: WebClient) -> None:
        answer(body, event, client, direct=False)

    @app.event("message")
    def on_message(body: dict, event: dict, client: WebClient) -> None:
        # Direct messages only; a channel message reaches the bot as a mention instead.
        if event.get("channel_type") == "im" and not event.get("bot_id") and "subtype" not in event:
            answer(body, event, client, direct=True)

    return app


def _thread_history(client: WebClient, channel: str, event: dict[str, Any]) -> list[Turn]:
    """The thread's messages before this one: people's as questions, the bot's as answers."""
    replies = client.conversations_replies(
        channel=channel, ts=event["thread_ts"], limit=THREAD_MESSAGES
    )
    turns = []
    for message in replies.get("messages", []):
        text = _MENTION.sub("", message.get("text", "")).strip()
        if message.get("ts") == event["ts"] or not text:
            continue
        role = "assistant" if message.get("bot_id") else "user"
        turns.append(Turn(role=role, content=text[:4000]))
    return turns


#: The first line of an answer that asserts nothing: the passages below it are the answer.
PASSAGES_ONLY_LINE = "_The documents don't state this directly. The closest passages:_"


def slack_answer(response: AskResponse, chat_url: str) -> str:
    """The lead in bold, then each source apart: a link to the chat page's preview and, quoted
    below it, what the source says, the sentences the answer rests on in bold. When no lead
    is asserted, the first line says so, in italics rather than in bold, and the passages
    follow it. When the documents do not answer, the nearest sources follow as related."""
    passages = response.answerable and not response.asserted
    lines = [PASSAGES_ONLY_LINE if passages else f"*{_escape(response.answer)}*"]
    excerpts = {excerpt.number: excerpt for excerpt in response.excerpts}
    if response.citations:
        # The first line already introduces the passages-only answer's sources.
        lines += [""] if passages else ["", "*Sources*"]
    for citation in response.citations:
        lines.append(f"[{citation.number}] {_source_link(citation, chat_url)}")
        if excerpt := excerpts.get(citation.number):
            said = " ".join(
                f"*{_escape(s.text)}*" if s.supports else _escape(s.text) for s in excerpt.sentences
            )
            lines.append(f"> {said}")
    if response.related:
        lines += ["", "*Nearest sources*"]
        lines += [f"• {_source_link(citation, chat_url)}" for citation in response.related]
    return "\n".join(lines)


def _source_link(citation: Citation, chat_url: str) -> str:
    title = _escape(citation.title or citation.rel_path).replace("|", "/")
    section = " › ".join(
        citation.heading_path[1:]
        if citation.heading_path[:1] == [citation.title]
        else citation.heading_path
    )
    page = (
        f", p. {citation.page_start}"
        if citation.page_start and citation.rel_path.lower().endswith((".pdf", ".pptx", ".xlsx"))
        else ""
    )
    where = _escape(f"{citation.rel_path}{' › ' + section if section else ''}{page}")
    # Pinned to the index version the answer was read from; Slack takes & in a link escaped.
    pinned = f"&amp;version={citation.index_version}" if citation.index_version else ""
    return f"<{chat_url}#chunk={citation.chunk_id}{pinned}|{title}> {where}"


def _escape(text: str) -> str:
    """Text Slack shows as written: its three control characters escaped."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
