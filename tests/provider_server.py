"""A local OpenAI-compatible embeddings endpoint on 127.0.0.1, for provider-path tests.

litellm talks to it over real HTTP exactly as it would to a hosted provider, so the code under
test is the production path; only the far end is small.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def hashed_vector(text: str, dimension: int) -> list[float]:
    """A deterministic vector per text: equal texts embed equally, different ones differ."""
    digest = hashlib.sha256(text.encode()).digest() * (dimension // 32 + 1)
    return [(byte - 127.5) / 127.5 for byte in digest[:dimension]]


@dataclass
class EmbeddingServer:
    base_url: str
    dimension: int
    texts_embedded: list[str] = field(default_factory=list)


@contextmanager
def embedding_server(dimension: int = 16) -> Iterator[EmbeddingServer]:
    """Serves POST /v1/embeddings until the block exits."""
    state = EmbeddingServer(base_url="", dimension=dimension)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
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
            encoded = json.dumps(payload).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(encoded)))
            self.end_headers()
            self.wfile.write(encoded)

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
