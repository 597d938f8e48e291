"""A local server on 127.0.0.1 that speaks the Google Drive v3 REST API and Google's OAuth
token endpoint, over an in-memory drive, for the Drive connector's tests.

Shapes follow the Drive v3 reference: `files.list` (q "'ID' in parents and trashed = false",
pageToken/nextPageToken), `files.get?alt=media`, `files.export`, `permissions.list`,
`changes.getStartPageToken` and `changes.list` (nextPageToken, newStartPageToken, removed),
errors as {"error": {"code", "message", "errors": [{"reason"}]}}. Faults on request: 429
with Retry-After, expired tokens (401), unreadable permissions (403).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.local_http import local_server, send_json

FOLDER = "application/vnd.google-apps.folder"


@dataclass
class Drive:
    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    content: dict[str, bytes] = field(default_factory=dict)
    permissions: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: The change feed: (fileId, removed), the token of entry i being i + 1.
    log: list[tuple[str, bool]] = field(default_factory=list)
    page_size: int = 2
    tokens: set[str] = field(default_factory=set)
    issued: int = 0
    #: Requests still to answer 429 (Retry-After: 0) before answering normally.
    throttle: int = 0
    #: Files whose permissions answer 403.
    unreadable_permissions: set[str] = field(default_factory=set)
    requests: list[str] = field(default_factory=list)
    base_url: str = ""
    clock: int = 0

    def _touch(self) -> str:
        self.clock += 1
        return f"2026-01-{1 + self.clock // 60:02d}T10:{self.clock % 60:02d}:00.000Z"

    def add(
        self, file_id: str, name: str, parent: str, body: bytes = b"", mime: str = "text/markdown"
    ) -> None:
        self.files[file_id] = {
            "id": file_id, "name": name, "mimeType": mime, "parents": [parent],
            "version": "1", "modifiedTime": self._touch(), "trashed": False,
            "webViewLink": f"https://drive.google.com/file/d/{file_id}/view",
        }  # fmt: skip
        if mime != FOLDER:
            self.files[file_id]["size"] = str(len(body))
            self.content[file_id] = body
        self.permissions.setdefault(file_id, [])
        self.log.append((file_id, False))

    def edit(self, file_id: str, body: bytes) -> None:
        file = self.files[file_id]
        file.update(version=str(int(file["version"]) + 1), modifiedTime=self._touch())
        file["size"] = str(len(body))
        self.content[file_id] = body
        self.log.append((file_id, False))

    def share(self, file_id: str, **permission: str) -> None:
        """A sharing change: a new version of the file, its content and time unchanged."""
        self.permissions[file_id].append(
            {"kind": "drive#permission", "role": "reader", **permission}
        )
        file = self.files[file_id]
        file["version"] = str(int(file["version"]) + 1)
        self.log.append((file_id, False))

    def move(self, file_id: str, parent: str) -> None:
        file = self.files[file_id]
        file.update(parents=[parent], version=str(int(file["version"]) + 1))
        self.log.append((file_id, False))

    def delete(self, file_id: str) -> None:
        del self.files[file_id]
        self.log.append((file_id, True))

    def expire_tokens(self) -> None:
        self.tokens.clear()

    def service_account(self, path: Path) -> Path:
        """A service account key whose token endpoint is this server."""
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode()
        path.write_text(
            json.dumps(
                {
                    "type": "service_account",
                    "project_id": "lorehouse-test",
                    "private_key_id": "k1",
                    "private_key": pem,
                    "client_email": "indexer@lorehouse-test.iam.gserviceaccount.com",
                    "client_id": "1",
                    "token_uri": f"{self.base_url}/token",
                }
            )
        )
        return path


def _error(code: int, reason: str, message: str) -> tuple[int, dict[str, Any]]:
    return code, {"error": {"code": code, "message": message, "errors": [{"reason": reason}]}}


@contextmanager
def serve(drive: Drive) -> Iterator[Drive]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            return

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            form = parse_qs(self.rfile.read(length).decode())
            if self.path == "/token" and form.get("assertion"):
                drive.issued += 1
                token = f"ya29.local-{drive.issued}"
                drive.tokens.add(token)
                self._json(200, {"access_token": token, "expires_in": 3599, "token_type": "Bearer"})
            else:
                self._json(400, {"error": "invalid_grant"})

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            query = {k: v[0] for k, v in parse_qs(parts.query).items()}
            drive.requests.append(parts.path)
            if drive.throttle > 0:
                drive.throttle -= 1
                status, body = _error(429, "rateLimitExceeded", "Rate Limit Exceeded")
                return self._json(status, body, {"Retry-After": "0"})
            token = self.headers.get("Authorization", "").removeprefix("Bearer ")
            if token not in drive.tokens:
                return self._json(*_error(401, "authError", "Invalid Credentials"))
            self._route(parts.path.removeprefix("/drive/v3"), query)

        def _route(self, path: str, query: dict[str, str]) -> None:
            if path == "/files":
                match = re.fullmatch(r"'([^']+)' in parents and trashed = false", query["q"])
                assert match, query["q"]
                found = sorted(
                    (f for f in drive.files.values() if match.group(1) in f["parents"]),
                    key=lambda f: f["id"],
                )
                return self._page(query, found, "files")
            if path == "/changes/startPageToken":
                return self._json(200, {"startPageToken": str(len(drive.log) + 1)})
            if path == "/changes":
                start = int(query["pageToken"])
                entries = []
                for token, (file_id, removed) in enumerate(drive.log, start=1):
                    if token >= start:
                        change = {"kind": "drive#change", "fileId": file_id, "removed": removed}
                        if not removed and file_id in drive.files:
                            change["file"] = drive.files[file_id]
                        elif not removed:
                            change["removed"] = True
                        entries.append(change)
                page = entries[: drive.page_size]
                body: dict[str, Any] = {"kind": "drive#changeList", "changes": page}
                if len(entries) > drive.page_size:
                    body["nextPageToken"] = str(start + drive.page_size)
                else:
                    body["newStartPageToken"] = str(len(drive.log) + 1)
                return self._json(200, body)
            match = re.fullmatch(r"/files/([^/]+)(/permissions|/export)?", path)
            if not match or match.group(1) not in drive.files:
                return self._json(*_error(404, "notFound", f"File not found: {path}."))
            file_id, tail = match.groups()
            if tail == "/permissions":
                if file_id in drive.unreadable_permissions:
                    return self._json(*_error(403, "insufficientFilePermissions", "Forbidden"))
                return self._page(query, drive.permissions[file_id], "permissions")
            if tail == "/export" or query.get("alt") == "media":
                data = drive.content[file_id]
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return None
            return self._json(200, drive.files[file_id])

        def _page(self, query: dict[str, str], entries: list[Any], key: str) -> None:
            start = int(query.get("pageToken") or 0)
            body: dict[str, Any] = {key: entries[start : start + drive.page_size]}
            if start + drive.page_size < len(entries):
                body["nextPageToken"] = str(start + drive.page_size)
            self._json(200, body)

        def _json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
            send_json(self, status, body, headers)

    with local_server(Handler) as base_url:
        drive.base_url = base_url
        yield drive
