"""A local server on 127.0.0.1 speaking Microsoft Graph's drive API and the Microsoft identity
platform's token endpoint, over in-memory document libraries, for the SharePoint connector.

Shapes follow Graph v1.0's reference: `sites/{id}/drives`, `drives/{id}/root/delta` with
`@odata.nextLink` and `@odata.deltaLink`, `deleted` facets, `items/{id}/permissions` with
grantedToV2 and sharing links, `items/{id}/content` answering 302 to a download URL on
another path that refuses a bearer token, errors as {"error": {"code", "message"}}, 410
for an expired delta token. Faults on request: 429 with Retry-After, expired tokens.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.local_http import local_server, send_json


@dataclass
class Tenant:
    #: drive id -> library name
    drives: dict[str, str] = field(default_factory=dict)
    #: item id -> {"drive", "name", "parent", "folder", "content", "ctag", "modified"}
    items: dict[str, dict[str, Any]] = field(default_factory=dict)
    permissions: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: The change log: (drive id, item id, deleted); a delta token is a position in it.
    log: list[tuple[str, str, bool]] = field(default_factory=list)
    page_size: int = 2
    tokens: set[str] = field(default_factory=set)
    issued: int = 0
    throttle: int = 0
    #: Items whose permissions answer 403.
    forbidden: set[str] = field(default_factory=set)
    #: Delta tokens older than this answer 410 (resync).
    oldest_token: int = 0
    secret: str = "app-secret"
    #: The token endpoint answers 200 without an access_token.
    tokenless: bool = False
    #: An origin the delta's next links point at instead of this server's.
    next_origin: str = ""
    #: Item id -> the bytes its second and later downloads answer.
    later_content: dict[str, bytes] = field(default_factory=dict)
    downloads: dict[str, int] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)
    base_url: str = ""

    def add(self, item_id: str, drive: str, name: str, parent: str, content: bytes = b"") -> None:
        folder = not name.count(".")
        self.items[item_id] = {
            "drive": drive, "name": name, "parent": parent, "folder": folder,
            "content": content, "ctag": 1, "modified": "2026-01-05T10:00:00Z",
        }  # fmt: skip
        self.permissions.setdefault(item_id, [])
        self.log.append((drive, item_id, False))

    def edit(self, item_id: str, content: bytes) -> None:
        item = self.items[item_id]
        item.update(content=content, ctag=item["ctag"] + 1, modified="2026-02-01T09:00:00Z")
        self.log.append((item["drive"], item_id, False))

    def share(self, item_id: str, permission: dict[str, Any]) -> None:
        """A sharing change, reported by the delta as a change of the item."""
        self.permissions[item_id].append(permission)
        self.log.append((self.items[item_id]["drive"], item_id, False))

    def delete(self, item_id: str) -> None:
        drive = self.items.pop(item_id)["drive"]
        self.log.append((drive, item_id, True))


@contextmanager
def serve(tenant: Tenant) -> Iterator[Tenant]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            return

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
            if not re.fullmatch(r"/[^/]+/oauth2/v2.0/token", self.path):
                return send_json(self, 404, {"error": "not_found"})
            if form.get("client_secret") != tenant.secret or form.get("grant_type") != (
                "client_credentials"
            ):
                return send_json(
                    self,
                    401,
                    {
                        "error": "invalid_client",
                        "error_description": "AADSTS7000215: Invalid client secret provided.",
                    },
                )
            if tenant.tokenless:
                return send_json(self, 200, {"token_type": "Bearer", "expires_in": 3599})
            tenant.issued += 1
            token = f"eyJ.local-{tenant.issued}"
            tenant.tokens.add(token)
            send_json(
                self, 200, {"token_type": "Bearer", "expires_in": 3599, "access_token": token}
            )

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            query = {k: v[0] for k, v in parse_qs(parts.query).items()}
            tenant.requests.append(parts.path)
            if parts.path.startswith("/download/"):
                if "Authorization" in self.headers:  # pre-authenticated: a token is refused
                    return send_json(self, 401, {"error": {"code": "unexpectedToken"}})
                item_id = parts.path.removeprefix("/download/")
                item = tenant.items.get(item_id)
                if item is None:
                    return send_json(self, 404, {"error": {"code": "itemNotFound"}})
                tenant.downloads[item_id] = tenant.downloads.get(item_id, 0) + 1
                content = item["content"]
                if tenant.downloads[item_id] > 1:
                    content = tenant.later_content.get(item_id, content)
                self.send_response(200)
                self.send_header("Content-Length", str(len(content)))
                self.end_headers()
                self.wfile.write(content)
                return None
            if tenant.throttle > 0:
                tenant.throttle -= 1
                body = {
                    "error": {"code": "TooManyRequests", "message": "Please retry again later."}
                }
                return send_json(self, 429, body, {"Retry-After": "0"})
            if self.headers.get("Authorization", "").removeprefix("Bearer ") not in tenant.tokens:
                error = {
                    "code": "InvalidAuthenticationToken",
                    "message": "Access token has expired.",
                }
                return send_json(self, 401, {"error": error})
            self._route(parts.path.removeprefix("/v1.0"), query)

        def _route(self, path: str, query: dict[str, str]) -> None:
            if re.fullmatch(r"/sites/[^/]+/drives", path):
                drives = [
                    {"id": d, "name": n, "driveType": "documentLibrary"}
                    for d, n in tenant.drives.items()
                ]
                return send_json(self, 200, {"value": drives})
            match = re.fullmatch(r"/drives/([^/]+)/root/delta", path)
            if match:
                token, skip = int(query.get("token", 0)), int(query.get("skip", 0))
                return self._delta(match.group(1), token, skip)
            match = re.fullmatch(r"/drives/([^/]+)/items/([^/]+)/(permissions|content)", path)
            if not match or match.group(2) not in tenant.items:
                return send_json(
                    self, 404, {"error": {"code": "itemNotFound", "message": "Item not found"}}
                )
            _, item_id, what = match.groups()
            if what == "permissions" and item_id in tenant.forbidden:
                error = {"code": "accessDenied", "message": "Access denied"}
                return send_json(self, 403, {"error": error})
            if what == "permissions":
                return send_json(self, 200, {"value": tenant.permissions[item_id]})
            self.send_response(302)
            self.send_header("Location", f"{tenant.base_url}/download/{item_id}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None

        def _delta(self, drive: str, token: int, skip: int) -> None:
            if 0 < token < tenant.oldest_token:
                error = {"code": "resyncChangesApplyDifferences", "message": "Resync required."}
                return send_json(self, 410, {"error": error})
            if token == 0:  # a full enumeration: every current item, the root first
                entries = [{"id": f"root-{drive}", "root": {}, "folder": {}}]
                entries += [
                    self._entry(i) for i, it in tenant.items.items() if it["drive"] == drive
                ]
                end = len(tenant.log)
            else:
                latest: dict[str, bool] = {}
                for d, item_id, removed in tenant.log[token:]:
                    if d == drive:
                        latest[item_id] = removed
                entries = [
                    {"id": i, "deleted": {"state": "deleted"}} if gone or i not in tenant.items
                    else self._entry(i)
                    for i, gone in latest.items()
                ]  # fmt: skip
                end = len(tenant.log)
            base = f"{tenant.next_origin or tenant.base_url}/v1.0/drives/{drive}/root/delta"
            body: dict[str, Any] = {"value": entries[skip : skip + tenant.page_size]}
            if skip + tenant.page_size < len(entries):
                body["@odata.nextLink"] = f"{base}?token={token}&skip={skip + tenant.page_size}"
            else:
                body["@odata.deltaLink"] = f"{base}?token={end}"
            return send_json(self, 200, body)

        def _entry(self, item_id: str) -> dict[str, Any]:
            item = tenant.items[item_id]
            parent = item["parent"] if item["parent"] in tenant.items else f"root-{item['drive']}"
            entry: dict[str, Any] = {
                "id": item_id, "name": item["name"],
                "parentReference": {"driveId": item["drive"], "id": parent},
                "cTag": f'"c:{{{item_id}}},{item["ctag"]}"',
                "lastModifiedDateTime": item["modified"],
                "webUrl": f"https://contoso.sharepoint.com/{item['name']}",
            }  # fmt: skip
            if item["folder"]:
                entry["folder"] = {"childCount": 0}
            else:
                entry.update(size=len(item["content"]), file={"mimeType": "text/markdown"})
            return entry

    with local_server(Handler) as base_url:
        tenant.base_url = base_url
        yield tenant
