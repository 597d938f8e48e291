"""A local server on 127.0.0.1 speaking Confluence's REST API, Cloud (under /wiki: v2 spaces,
pages and space permissions, v1 restrictions) or Data Center (under /confluence: v1
throughout), over in-memory spaces, for the Confluence connector's tests.

Shapes follow Atlassian's references: v2 lists with `_links.next` relative to the site, v1
lists with `start`/`limit` and `_links.next` relative to `_links.base`, ContentRestriction
bodies, DC 9.1's bare array of space permissions. Faults on request: 429 with Retry-After.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from tests.local_http import local_server, send_json


@dataclass
class Wiki:
    cloud: bool
    #: page id -> {"space", "title", "parent", "version", "when", "body"}
    pages: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: page id -> (users, groups) of its read restriction
    restrictions: dict[str, tuple[list[str], list[str]]] = field(default_factory=dict)
    #: space key -> groups with read permission
    space_groups: dict[str, list[str]] = field(default_factory=dict)
    #: Pages whose restrictions answer 403 (the indexing account may not see them).
    unreadable: set[str] = field(default_factory=set)
    #: Pages whose restrictions answer 200 with an HTML sign-in page instead of JSON.
    html_restrictions: set[str] = field(default_factory=set)
    #: An origin the lists' next links point at instead of this server's.
    next_origin: str = ""
    #: Lists whose cursors never end: each page links a new one.
    endless: bool = False
    page_size: int = 2
    throttle: int = 0
    token: str = "secret-token"
    requests: list[str] = field(default_factory=list)
    base_url: str = ""

    @property
    def root(self) -> str:
        return "/wiki" if self.cloud else "/confluence"

    def add(
        self, page_id: str, space: str, title: str, body: str, parent: str | None = None
    ) -> None:
        self.pages[page_id] = {
            "space": space, "title": title, "parent": parent, "version": 1,
            "when": "2026-01-05T10:00:00.000Z", "body": body,
        }  # fmt: skip

    def edit(self, page_id: str, body: str) -> None:
        page = self.pages[page_id]
        page.update(body=body, version=page["version"] + 1, when="2026-02-01T09:00:00.000Z")

    def restrict(self, page_id: str, users: list[str] = (), groups: list[str] = ()) -> None:  # type: ignore[assignment]
        self.restrictions[page_id] = (list(users), list(groups))


@contextmanager
def serve(wiki: Wiki) -> Iterator[Wiki]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            return

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            query = {k: v[0] for k, v in parse_qs(parts.query).items()}
            wiki.requests.append(parts.path)
            if wiki.throttle > 0:
                wiki.throttle -= 1
                return self._json(429, {"message": "Rate limit exceeded"}, {"Retry-After": "0"})
            expected = "Basic " if wiki.cloud else f"Bearer {wiki.token}"
            if not self.headers.get("Authorization", "").startswith(expected):
                return self._json(401, {"message": "Unauthorized"})
            path = parts.path.removeprefix(wiki.root)
            self._route(path, query)

        def _route(self, path: str, query: dict[str, str]) -> None:
            if wiki.cloud and path == "/api/v2/spaces":
                spaces = [{"id": f"id-{query['keys']}", "key": query["keys"]}]
                return self._v2(path, query, [s for s in spaces if s["key"] in wiki.space_groups])
            match = re.fullmatch(r"/api/v2/spaces/id-([^/]+)/(pages|permissions)", path)
            if wiki.cloud and match:
                space, what = match.groups()
                if what == "permissions":
                    entries = [
                        {"principal": {"type": "group", "id": g},
                         "operation": {"key": "read", "targetType": "space"}}
                        for g in wiki.space_groups[space]
                    ]  # fmt: skip
                    return self._v2(path, query, entries)
                return self._v2(path, query, [self._v2_page(i) for i in self._space(space)])
            match = re.fullmatch(r"/api/v2/pages/([^/]+)", path)
            if wiki.cloud and match:
                if match.group(1) not in wiki.pages:
                    return self._json(404, {"message": "Page not found"})
                page = self._v2_page(match.group(1))
                page["body"] = {"storage": {"value": wiki.pages[match.group(1)]["body"]}}
                return self._json(200, page)
            if not wiki.cloud and path == "/rest/api/content":
                pages = [self._v1_page(i) for i in self._space(query["spaceKey"])]
                return self._v1(path, query, pages)
            match = re.fullmatch(r"/rest/api/content/([^/]+)(/restriction/byOperation/read)?", path)
            if match:
                page_id, restriction = match.groups()
                if page_id not in wiki.pages:
                    return self._json(404, {"message": "No content found with id"})
                if restriction and page_id in wiki.html_restrictions:
                    body = b"<html><body>Log in to Atlassian</body></html>"
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html;charset=UTF-8")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return None
                if restriction and page_id in wiki.unreadable:
                    return self._json(403, {"message": "Not permitted to view restrictions"})
                if restriction:
                    users, groups = wiki.restrictions.get(page_id, ([], []))
                    return self._json(200, {
                        "operation": "read",
                        "restrictions": {
                            "user": {"results": [{"type": "known", "accountId": u} for u in users]},
                            "group": {"results": [{"type": "group", "name": g} for g in groups]},
                        },
                    })  # fmt: skip
                page = self._v1_page(page_id)
                page["body"] = {"storage": {"value": wiki.pages[page_id]["body"]}}
                return self._json(200, page)
            match = re.fullmatch(r"/rest/api/space/([^/]+)/permissions", path)
            if not wiki.cloud and match:
                return self._json(200, [
                    {"operation": {"targetType": "space", "operationKey": "read"},
                     "subject": {"type": "group", "name": g}, "spaceKey": match.group(1)}
                    for g in wiki.space_groups[match.group(1)]
                ])  # fmt: skip
            return self._json(404, {"message": f"no route {path}"})

        def _space(self, space: str) -> list[str]:
            return sorted(i for i, p in wiki.pages.items() if p["space"] == space)

        def _v2_page(self, page_id: str) -> dict[str, Any]:
            page = wiki.pages[page_id]
            return {
                "id": page_id, "status": "current", "title": page["title"],
                "parentId": page["parent"],
                "version": {"number": page["version"], "createdAt": page["when"]},
                "_links": {"webui": f"/spaces/{page['space']}/pages/{page_id}"},
            }  # fmt: skip

        def _v1_page(self, page_id: str) -> dict[str, Any]:
            page = wiki.pages[page_id]
            ancestors, parent = [], page["parent"]
            while parent:
                ancestors.insert(0, {"id": parent, "type": "page"})
                parent = wiki.pages[parent]["parent"]
            return {
                "id": page_id, "type": "page", "status": "current", "title": page["title"],
                "version": {"number": page["version"], "when": page["when"]},
                "ancestors": ancestors,
                "_links": {"webui": f"/display/{page['space']}/{page_id}"},
            }  # fmt: skip

        def _v2(self, path: str, query: dict[str, str], entries: list[Any]) -> None:
            start = int(query.pop("cursor", 0))
            body: dict[str, Any] = {"results": entries[start : start + wiki.page_size]}
            if start + wiki.page_size < len(entries) or wiki.endless:
                following = urlencode({**query, "cursor": start + wiki.page_size})
                body["_links"] = {"next": f"{wiki.next_origin}{wiki.root}{path}?{following}"}
            self._json(200, body)

        def _v1(self, path: str, query: dict[str, str], entries: list[Any]) -> None:
            start = int(query.pop("start", 0))
            page = entries[start : start + wiki.page_size]
            base = (wiki.next_origin or wiki.base_url) + wiki.root
            links = {"base": base, "context": wiki.root}
            if start + wiki.page_size < len(entries) or wiki.endless:
                links["next"] = f"{path}?{urlencode({**query, 'start': start + wiki.page_size})}"
            self._json(200, {"results": page, "start": start, "size": len(page), "_links": links})

        def _json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
            send_json(self, status, body, headers)

    with local_server(Handler) as base_url:
        wiki.base_url = base_url
        yield wiki
