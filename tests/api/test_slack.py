"""The Slack bot end to end: requests signed as Slack signs them reach /slack/events, and the
answers go to a local server on 127.0.0.1 that speaks Slack's Web API and records each call
(`slack_sdk` pointed at it with LOREHOUSE_SLACK_API_URL)."""

from __future__ import annotations

import hashlib
import hmac
import json
import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from fastapi.testclient import TestClient

from api.main import create_app
from lorehouse.settings import Settings

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
CHAT_URL = "http://lorehouse.example"
LEAVE = "How many weeks of parental leave do primary caregivers get?"
INCIDENTS = "How are security incident severities classified in the response plan?"


@dataclass
class SlackWebAPI:
    """Slack's Web API as far as the bot uses it, recording every call."""

    url: str
    calls: list[tuple[str, dict]] = field(default_factory=list)
    #: conversations.replies answers with these messages.
    thread: list[dict] = field(default_factory=list)

    def posted(self, wait_for: int = 1, timeout: float = 30.0) -> list[dict]:
        """The chat.postMessage calls, once there are `wait_for` of them (or the timeout)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            posts = [args for method, args in self.calls if method == "chat.postMessage"]
            if len(posts) >= wait_for:
                return posts
            time.sleep(0.05)
        return [args for method, args in self.calls if method == "chat.postMessage"]


@pytest.fixture
def slack_api() -> Iterator[SlackWebAPI]:
    state = SlackWebAPI(url="")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _answer(self, arguments: dict) -> None:
            method = urlparse(self.path).path.rsplit("/", 1)[-1]
            state.calls.append((method, arguments))
            body: dict = {"ok": True}
            if method == "chat.postMessage":
                body["ts"] = f"{time.time():.6f}"
            elif method == "conversations.replies":
                body["messages"] = state.thread
            payload = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self) -> None:
            query = parse_qs(urlparse(self.path).query)
            self._answer({key: values[0] for key, values in query.items()})

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
            if self.headers.get("Content-Type", "").startswith("application/json"):
                self._answer(json.loads(raw or "{}"))
            else:
                self._answer({key: values[0] for key, values in parse_qs(raw).items()})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}/api/"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state
    server.shutdown()


@pytest.fixture
def bot(materialized_sample: Path, tmp_path: Path, slack_api: SlackWebAPI) -> Iterator[TestClient]:
    yield from _bot(materialized_sample, tmp_path, slack_api)


@pytest.fixture
def passages_bot(
    materialized_sample: Path, tmp_path: Path, slack_api: SlackWebAPI
) -> Iterator[TestClient]:
    """A bot that asserts no lead: what the documents answer, it answers with the passages."""
    yield from _bot(materialized_sample, tmp_path, slack_api, answer_assert_threshold=1.0)


def _bot(
    materialized_sample: Path, tmp_path: Path, slack_api: SlackWebAPI, **overrides: object
) -> Iterator[TestClient]:
    data_dir = Path(shutil.copytree(materialized_sample, tmp_path / "data"))
    access = tmp_path / "slack-access.yaml"
    access.write_text("users:\n  USECURITY: [security]\nchannels:\n  CSECURITY: [security]\n")
    settings = Settings(
        data_dir=data_dir,
        slack_bot_token="xoxb-test-token",
        slack_signing_secret=SECRET,
        slack_api_url=slack_api.url,
        slack_access_file=access,
        public_url=CHAT_URL,
        **overrides,
    )
    # Errors reach the test as the HTTP answers Slack (or anyone) would get, 500s included.
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        yield client


def _signed(
    body: dict | bytes,
    timestamp: int | None = None,
    secret: str = SECRET,
    content_type: str = "application/json",
) -> dict:
    """A request as Slack signs it: an HMAC of the timestamp and the raw body."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    stamp = str(int(time.time()) if timestamp is None else timestamp)
    digest = hmac.new(secret.encode(), f"v0:{stamp}:".encode() + raw, hashlib.sha256).hexdigest()
    return {
        "content": raw,
        "headers": {
            "Content-Type": content_type,
            "X-Slack-Request-Timestamp": stamp,
            "X-Slack-Signature": f"v0={digest}",
        },
    }


def _event(kind: str, text: str, channel: str, user: str, event_id: str, **extra: str) -> dict:
    ts = f"{time.time():.6f}"
    return {
        "type": "event_callback",
        "team_id": "T1",
        "api_app_id": "A1",
        "event_id": event_id,
        "event_time": int(time.time()),
        "event": {"type": kind, "text": text, "channel": channel, "user": user, "ts": ts, **extra},
    }


def test_a_mention_is_answered_in_its_thread_with_linked_citations(
    bot: TestClient, slack_api: SlackWebAPI
) -> None:
    body = _event("app_mention", f"<@UBOT> {LEAVE}", "CGENERAL", "UANYONE", "Ev1")
    started = time.monotonic()
    assert bot.post("/slack/events", **_signed(body)).status_code == 200
    assert time.monotonic() - started < 3  # acknowledged before the answer is computed

    [post] = slack_api.posted()
    assert post["channel"] == "CGENERAL" and post["thread_ts"] == body["event"]["ts"]
    assert "20 weeks" in post["text"] and "[1]" in post["text"]
    assert f"<{CHAT_URL}/chat#chunk=" in post["text"]
    assert "&amp;version=" in post["text"]  # the link opens the passage as it was cited
    assert "hr/parental-leave-faq.md" in post["text"]


def test_an_answer_asserting_no_lead_says_so_first_then_lists_the_passages(
    passages_bot: TestClient, slack_api: SlackWebAPI
) -> None:
    body = _event("app_mention", f"<@UBOT> {LEAVE}", "CGENERAL", "UANYONE", "Ev11")
    assert passages_bot.post("/slack/events", **_signed(body)).status_code == 200
    [post] = slack_api.posted()
    first, *rest = post["text"].splitlines()
    # The first line asserts nothing, in italics rather than the bold of a lead.
    assert first == "_The documents don't state this directly. The closest passages:_"
    # Then the passages: each linked to its preview, what it says quoted, the nearest
    # sentences in bold.
    sources = [line for line in rest if line.startswith("[")]
    assert len(sources) >= 2 and sources[0].startswith(f"[1] <{CHAT_URL}/chat#chunk=")
    assert "hr/parental-leave-faq.md" in post["text"]
    quoted = [line for line in rest if line.startswith("> ")]
    assert len(quoted) == len(sources)
    assert "*The primary caregiver receives 20 weeks" in quoted[0]


def test_a_direct_message_is_answered_and_the_thread_is_the_conversation(
    bot: TestClient, slack_api: SlackWebAPI
) -> None:
    dm = _event("message", LEAVE, "DUSER", "UANYONE", "Ev2", channel_type="im")
    assert bot.post("/slack/events", **_signed(dm)).status_code == 200
    [post] = slack_api.posted()
    assert post["channel"] == "DUSER" and "20 weeks" in post["text"]

    hotel = "What is the hotel limit per night for business trips?"
    slack_api.thread = [
        {"user": "UANYONE", "text": hotel, "ts": "1.1"},
        {"bot_id": "BBOT", "text": "It depends on the city [1]", "ts": "1.2"},
    ]
    follow_up = _event(
        "message", "And in Toronto?", "DUSER", "UANYONE", "Ev3", channel_type="im", thread_ts="1.1"
    )
    assert bot.post("/slack/events", **_signed(follow_up)).status_code == 200
    posts = slack_api.posted(wait_for=2)
    assert posts[1]["thread_ts"] == "1.1" and "CAD 275" in posts[1]["text"]
    assert any(method == "conversations.replies" for method, _ in slack_api.calls)


def test_a_bad_or_old_signature_is_refused_and_nothing_is_posted(
    bot: TestClient, slack_api: SlackWebAPI
) -> None:
    body = _event("app_mention", f"<@UBOT> {LEAVE}", "CGENERAL", "UANYONE", "Ev4")
    forged = bot.post("/slack/events", **_signed(body, secret="not-the-secret"))
    stale = bot.post("/slack/events", **_signed(body, timestamp=int(time.time()) - 600))
    assert (forged.status_code, stale.status_code) == (401, 401)
    time.sleep(0.5)
    assert slack_api.posted(timeout=0.5) == []


#: Bodies no Slack event has: what an outsider sends to find a parser that breaks.
MALFORMED_BODIES = {
    "malformed JSON": b'{"type": "event_callback", ',
    "a JSON array": b'[{"type": "event_callback"}]',
    "a JSON string": b'"event_callback"',
    "nesting 100,000 deep": b"[" * 100_000 + b"]" * 100_000,
    "an object nested 100,000 deep": b'{"a": ' * 100_000 + b"1" + b"}" * 100_000,
    "not UTF-8": b'{"type": "\xff\xfe"}',
    "an event whose fields are the wrong types": b'{"type": "event_callback", '
    b'"enterprise": 7, "team_id": [], "event": "app_mention"}',
}


def test_a_request_without_a_valid_signature_is_refused_before_its_body_is_parsed(
    bot: TestClient, slack_api: SlackWebAPI
) -> None:
    """Whatever the body, an unsigned request is a 401: nothing of it is parsed first."""
    stamp = str(int(time.time()))
    unsigned = {
        "no signature headers": {},
        "a timestamp that is not a number": {
            "X-Slack-Request-Timestamp": "soon",
            "X-Slack-Signature": "v0=" + "0" * 64,
        },
        "a timestamp of superscript digits": {
            # Latin-1 as headers are: str.isdigit() takes them, int() does not.
            "X-Slack-Request-Timestamp": "\u00b9\u00b2\u00b3".encode("latin-1"),
            "X-Slack-Signature": "v0=" + "0" * 64,
        },
        "a signature that is not Slack's": {
            "X-Slack-Request-Timestamp": stamp,
            "X-Slack-Signature": "v0=" + "0" * 64,
        },
    }
    event = _event("app_mention", f"<@UBOT> {LEAVE}", "CGENERAL", "UANYONE", "Ev9")
    for body_name, body in {**MALFORMED_BODIES, "an event": json.dumps(event).encode()}.items():
        for headers_name, headers in unsigned.items():
            response = bot.post(
                "/slack/events",
                content=body,
                headers={"Content-Type": "application/json", **headers},
            )
            assert response.status_code == 401, (body_name, headers_name, response.text[:300])
            assert "signature" in response.json()["detail"], (body_name, headers_name)
    forged = bot.post("/slack/events", **_signed(MALFORMED_BODIES["a JSON array"], secret="x"))
    assert forged.status_code == 401, forged.text[:300]
    assert slack_api.posted(timeout=0.5) == []


def test_a_signed_body_that_is_no_slack_payload_is_a_400(
    bot: TestClient, slack_api: SlackWebAPI
) -> None:
    """Signed with the app's secret, but not an event Slack would send: a 400 saying so."""
    for name, body in MALFORMED_BODIES.items():
        response = bot.post("/slack/events", **_signed(body))
        assert response.status_code == 400, (name, response.text[:300])
        assert "Slack" in response.json()["detail"], name
    form = _signed(b"payload=%7Bnot%20json", content_type="application/x-www-form-urlencoded")
    response = bot.post("/slack/events", **form)
    assert response.status_code == 400, response.text[:300]
    assert slack_api.posted(timeout=0.5) == []
    # The same app still answers what Slack does send.
    event = _event("app_mention", f"<@UBOT> {LEAVE}", "CGENERAL", "UANYONE", "Ev10")
    assert bot.post("/slack/events", **_signed(event)).status_code == 200
    assert "20 weeks" in slack_api.posted()[0]["text"]


def test_a_retried_event_is_answered_once(bot: TestClient, slack_api: SlackWebAPI) -> None:
    body = _event("app_mention", f"<@UBOT> {LEAVE}", "CGENERAL", "UANYONE", "Ev5")
    assert bot.post("/slack/events", **_signed(body)).status_code == 200
    retry = _signed(body)
    retry["headers"] |= {"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"}
    assert bot.post("/slack/events", **retry).status_code == 200
    slack_api.posted()
    time.sleep(1.0)
    assert len(slack_api.posted(timeout=0)) == 1


def test_restricted_documents_reach_only_channels_and_users_of_their_group(
    bot: TestClient, slack_api: SlackWebAPI
) -> None:
    # A member of the security group asking in an open channel: the channel's readers decide.
    open_channel = _event("app_mention", f"<@UBOT> {INCIDENTS}", "CGENERAL", "USECURITY", "Ev6")
    assert bot.post("/slack/events", **_signed(open_channel)).status_code == 200
    [post] = slack_api.posted()
    assert "security/" not in post["text"]

    # The security channel, and the member's direct messages, may draw on the plan.
    own_channel = _event("app_mention", f"<@UBOT> {INCIDENTS}", "CSECURITY", "UANYONE", "Ev7")
    direct = _event("message", INCIDENTS, "DSEC", "USECURITY", "Ev8", channel_type="im")
    for event in (own_channel, direct):
        assert bot.post("/slack/events", **_signed(event)).status_code == 200
    posts = slack_api.posted(wait_for=3)
    assert all("security/" in p["text"] for p in posts[1:]), [p["text"] for p in posts]


def test_without_a_token_the_bot_is_off(materialized_sample: Path) -> None:
    with TestClient(create_app(Settings(data_dir=materialized_sample))) as client:
        off = client.post("/slack/events", content="{}")
    assert off.status_code == 404 and "LOREHOUSE_SLACK_BOT_TOKEN" in off.json()["detail"]
