"""Local provider endpoints on 127.0.0.1 for provider-path tests: OpenAI-compatible
embeddings, a Cohere-compatible reranker and an OpenAI-compatible chat model that judges
answers and enriches chunks.

litellm talks to it over real HTTP exactly as it would to a hosted provider, so the code under
test is the production path; only the far end is small.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def hashed_vector(text: str, dimension: int) -> list[float]:
    """A deterministic vector per text: equal texts embed equally, different ones differ."""
    digest = hashlib.sha256(text.encode()).digest() * (dimension // 32 + 1)
    return [(byte - 127.5) / 127.5 for byte in digest[:dimension]]


@dataclass
class ProviderServer:
    base_url: str
    dimension: int
    texts_embedded: list[str] = field(default_factory=list)
    rerank_calls: int = 0
    rerank_status: int = 200
    rerank_inverted: bool = False
    judge_prompts: list[str] = field(default_factory=list)
    #: The judge replies with broken JSON when a prompt contains one of these strings.
    judge_breaks_on: tuple[str, ...] = ()
    chat_calls: int = 0
    #: Every chat prompt received (the last message of each call), in arrival order.
    chat_prompts: list[str] = field(default_factory=list)
    #: (model, max_tokens, prompt) of every chat call, in arrival order: what a client asked.
    chat_requests: list[tuple[str, int | None, str]] = field(default_factory=list)
    #: When set, the chat model's reply to every prompt: a test scripts the model with it.
    chat_answer: Callable[[str], str] | None = None
    embedding_calls: int = 0
    #: Calls beyond these counts wait for `release` (set `holding` first): a provider that
    #: stops answering, so a test can kill its client at a known point of a run.
    hold_chat_after: int | None = None
    hold_embedding_after: int | None = None
    holding: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    #: A failure mode per call kind ("chat", "embedding"), applied to calls beyond
    #: `fault_after[kind]` (default: every call): "timeout" (no answer for 30 s), "429",
    #: "500", or "malformed" (a 200 whose body is not JSON).
    faults: dict[str, str] = field(default_factory=dict)
    fault_after: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def fault_for(self, kind: str) -> str | None:
        """The failure to serve for the call just counted, if one is set for its kind."""
        calls = getattr(self, f"{kind}_calls")
        if kind in self.faults and calls > self.fault_after.get(kind, 0):
            return self.faults[kind]
        return None

    def count_call(self, kind: str) -> None:
        """Counts a chat or embedding call, and holds it if its kind is being held."""
        with self._lock:
            calls = getattr(self, f"{kind}_calls") + 1
            setattr(self, f"{kind}_calls", calls)
            limit = getattr(self, f"hold_{kind}_after")
        if limit is not None and calls > limit:
            self.holding.set()
            self.release.wait(timeout=300)


_SECTION = '\n"""\n(.*?)\n"""'
_REFUSALS = ("do not answer", "not in the documents", "NOT_IN_DOCUMENTS")


def judge_verdict(prompt: str) -> dict[str, object]:
    """Grades like a strict reader: the share of the reference's words the answer repeats.

    A deterministic stand-in for a judge model behind a real HTTP endpoint: good answers
    score high, wrong or empty ones low, refusals are flagged.
    """
    reference = re.search("Reference answer written by an expert:" + _SECTION, prompt, re.S)
    answer = re.search("The assistant's answer:" + _SECTION, prompt, re.S)
    assert reference and answer, "the judge prompt lost its sections"
    words = set(re.findall(r"[a-z0-9]{3,}", reference.group(1).lower()))
    said = set(re.findall(r"[a-z0-9]{3,}", answer.group(1).lower()))
    share = len(words & said) / len(words) if words else 0.0
    refused = any(marker.lower() in answer.group(1).lower() for marker in _REFUSALS)
    unanswerable = "deliberately unanswerable" in prompt
    score = (5 if refused else 0) if unanswerable else (0 if refused else round(5 * share))
    return {
        "reasoning": f"The answer repeats {share:.0%} of the reference's words.",
        "score": score,
        "refused": refused,
    }


def enrichment_answer(prompt: str) -> dict[str, object]:
    """One JSON answer valid for the chunk, table and document prompts, derived from the text.

    Deterministic, so two runs over the same chunks store the same enrichment.
    """
    quoted = re.search(_SECTION, prompt, re.S)
    text = quoted.group(1) if quoted else prompt
    words = list(dict.fromkeys(re.findall(r"[a-z]{5,}", text.lower())))[:6]
    words += ["policy", "process", "document"][: max(0, 3 - len(words))]
    # The instructions number the questions, so an edited prompt yields different ones.
    instructions = prompt.replace(text, "")
    number = int(hashlib.sha256(instructions.encode()).hexdigest()[:8], 16) % 90_000 + 10_000
    return {
        "faqs": [f"Question {number}: what does it say about {w}?" for w in words[:2]],
        "keywords": words[:5],
        "summary": "This part covers " + ", ".join(words) + ".",
        "title": "",
    }


@contextmanager
def provider_server(dimension: int = 16) -> Iterator[ProviderServer]:
    """Serves POST /v1/embeddings, /v1/rerank and /v1/chat/completions until the block exits."""
    state = ProviderServer(base_url="", dimension=dimension)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if self.path.endswith("/rerank"):
                self._rerank(body)
                return
            if self.path.endswith("/chat/completions"):
                self._chat(body)
                return
            state.count_call("embedding")
            if self._fault("embedding"):
                return
            texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
            state.texts_embedded.extend(texts)
            payload = {
                "object": "list",
                "model": body.get("model", "test"),
                "data": [
                    {"object": "embedding", "index": i, "embedding": hashed_vector(t, dimension)}
                    for i, t in enumerate(texts)
                ],
                "usage": {"prompt_tokens": len(texts), "total_tokens": len(texts)},
            }
            self._reply(200, payload)

        def _rerank(self, body: dict) -> None:
            """Scores each document by the share of query words it contains."""
            state.rerank_calls += 1
            if state.rerank_status != 200:
                self._reply(state.rerank_status, {"message": "reranker unavailable"})
                return
            words = set(body["query"].lower().split())
            sign = -1 if state.rerank_inverted else 1  # a deliberately bad reranker
            results = [
                {
                    "index": i,
                    "relevance_score": sign * len(words & set(d.lower().split())) / len(words),
                }
                for i, d in enumerate(body["documents"])
            ]
            results.sort(key=lambda r: -r["relevance_score"])
            self._reply(200, {"id": "local", "results": results, "meta": {}})

        def _chat(self, body: dict) -> None:
            state.count_call("chat")
            prompt = body["messages"][-1]["content"]
            state.chat_prompts.append(prompt)
            limit = body.get("max_tokens", body.get("max_completion_tokens"))
            state.chat_requests.append((body.get("model", ""), limit, prompt))
            if self._fault("chat"):
                return
            if state.chat_answer is not None:
                self._chat_reply(body, state.chat_answer(prompt))
                return
            if "Reference answer written by an expert:" not in prompt:
                self._chat_reply(body, json.dumps(enrichment_answer(prompt)))
                return
            state.judge_prompts.append(prompt)
            broken = any(marker in prompt for marker in state.judge_breaks_on)
            self._chat_reply(body, "score: five" if broken else json.dumps(judge_verdict(prompt)))

        def _chat_reply(self, body: dict, content: str) -> None:
            if body.get("stream"):
                self._chat_stream(body, content)
                return
            self._reply(
                200,
                {
                    "id": "local-chat",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body.get("model", "judge"),
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": content},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
                },
            )

        def _chat_stream(self, body: dict, content: str) -> None:
            """`content` as OpenAI streams a completion: Server-Sent Events of chunks, a few
            words each, then one that finishes it and `[DONE]`."""
            words = re.findall(r"\S+\s*|\s+", content)
            pieces = ["".join(words[i : i + 3]) for i in range(0, len(words), 3)]

            def chunk(delta: dict, finish: str | None) -> bytes:
                payload = {
                    "id": "local-chat",
                    "object": "chat.completion.chunk",
                    "created": 0,
                    "model": body.get("model", "judge"),
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                }
                return f"data: {json.dumps(payload)}\n\n".encode()

            events = [chunk({"role": "assistant", "content": ""}, None)]
            events += [chunk({"content": piece}, None) for piece in pieces]
            events += [chunk({}, "stop"), b"data: [DONE]\n\n"]
            try:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(sum(len(e) for e in events)))
                self.end_headers()
                for event in events:
                    self.wfile.write(event)
            except (BrokenPipeError, ConnectionResetError):  # the client left meanwhile
                return

        def _fault(self, kind: str) -> bool:
            """Serves the configured failure for this call, if any; True when it did."""
            fault = state.fault_for(kind)
            if fault is None:
                return False
            if fault == "timeout":
                state.release.wait(timeout=30)
                return True
            if fault == "malformed":
                self._reply_bytes(200, b'{"id": "broken", "choices": [{"mess')
                return True
            self._reply(int(fault), {"error": {"message": f"injected {fault}", "type": fault}})
            return True

        def _reply(self, status: int, payload: dict) -> None:
            self._reply_bytes(status, json.dumps(payload).encode())

        def _reply_bytes(self, status: int, encoded: bytes) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(encoded)))
                self.end_headers()
                self.wfile.write(encoded)
            except (BrokenPipeError, ConnectionResetError):  # the client was killed meanwhile
                return

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
