"""Confluence spaces as a source: pages in storage format, restrictions as groups, Cloud and
Data Center.

Each sync lists every current page of the configured spaces (metadata only, 250 a request on
Cloud), reads each page's read restrictions and its space's read permissions, and lists the
pages for the inventory; a page's body is fetched only when its version moved, so a nightly
run downloads what changed. Confluence reports no restriction change and no deletion in its
search, so listing every page is how a narrowed restriction or a deleted page is seen at the
next sync at all.

Who may read a page:

* a page with no read restriction on it or on any ancestor: its space's read permissions;
* otherwise the principals every restricted level names (the page's own restriction and
  each restricted ancestor's must all let a reader through, so only a principal named at
  every level is certain to pass). That can leave out a reader who passes each level through
  a different group; it never lets in one who does not.

Paths: Cloud uses the v2 API for spaces, pages and space permissions and v1 for restrictions
(the only API for them); Data Center uses v1 throughout (`space/KEY/permissions` needs 9.1).
Plain HTTP rather than atlassian-python-api: its 5.x Cloud class calls paths that do not
exist (`/wiki/content`) and lacks the restriction and permission calls.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx

from lorehouse.errors import SourceError
from lorehouse.sources.connectors import (
    BearerAuth,
    ChangeSet,
    ConnectorItem,
    Principal,
    RetryPolicy,
    next_link,
    send,
)

_PAGE_LIMIT = 250


def parse_confluence_uri(uri: str) -> tuple[str, list[str]]:
    """(site URL, space keys) of `confluence+https://example.atlassian.net/wiki?spaces=ENG,HR`."""
    parts = urlsplit(uri.removeprefix("confluence+"))
    spaces = [
        key.strip()
        for value in parse_qs(parts.query).get("spaces", [])
        for key in value.split(",")
        if key.strip()
    ]
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise SourceError(f"not a Confluence site: {uri!r} (confluence+https://SITE?spaces=KEY)")
    return f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}", spaces


class ConfluenceConnector:
    """The current pages of some spaces of one Confluence site."""

    kind = "confluence"

    def __init__(
        self,
        base_url: str,
        spaces: list[str],
        cloud: bool,
        token: str | None,
        email: str | None = None,
        client: httpx.Client | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        if not spaces:
            raise SourceError(
                "a Confluence source names its spaces: confluence+https://...?spaces=ENG,HR"
            )
        if not token:
            raise SourceError("a Confluence source needs a token (LOREHOUSE_CONFLUENCE_TOKEN)")
        if cloud and not email:
            raise SourceError("Confluence Cloud signs in with an e-mail and an API token")
        self.base = base_url.rstrip("/")
        self.spaces = spaces
        self.cloud = cloud
        auth: httpx.Auth = (
            httpx.BasicAuth(email or "", token) if cloud else BearerAuth(lambda: token)
        )
        self.client = client or httpx.Client(timeout=60.0)
        self.auth = auth
        self.retry = retry or RetryPolicy()

    @property
    def uri(self) -> str:
        return f"confluence+{self.base}?spaces={','.join(self.spaces)}"

    # -- HTTP --------------------------------------------------------------------------------

    def _get(self, url: str, **params: Any) -> Any:
        absolute = url if url.startswith("http") else self.base + url
        # No `params` at all for a next link: httpx replaces a URL's query with them, even
        # with an empty dict, which would ask for the first page again.
        extra = {"params": params} if params else {}
        response = send(self.client, "GET", absolute, self.retry, auth=self.auth, **extra)
        if response.status_code != 200:
            raise SourceError(f"Confluence {url}: {_error_message(response)}")
        try:
            return response.json()
        except ValueError as error:
            # A sign-in or proxy page answering 200 instead of the API's JSON.
            kind = response.headers.get("Content-Type", "no content type")
            raise SourceError(f"Confluence {url}: answered {kind}, not JSON") from error

    def _v2_pages(self, url: str, **params: Any) -> Iterator[dict[str, Any]]:
        """Every result of a v2 list, following `_links.next` (relative to the site)."""
        body = self._get(url, **params)
        seen: set[str] = set()
        while True:
            yield from body.get("results", [])
            following = body.get("_links", {}).get("next")
            if not following:
                return
            absolute = urljoin(self.base + "/", following.removeprefix("/wiki/"))
            body = self._get(next_link(self.base, absolute, seen))

    def _v1_pages(self, url: str, **params: Any) -> Iterator[dict[str, Any]]:
        """Every result of a v1 list, following `_links.next` (relative to `_links.base`)."""
        body = self._get(url, **params)
        seen: set[str] = set()
        while True:
            yield from body.get("results", [])
            links = body.get("_links", {})
            if not links.get("next"):
                return
            absolute = str(links.get("base") or self.base).rstrip("/") + links["next"]
            body = self._get(next_link(self.base, absolute, seen))

    # -- listing -------------------------------------------------------------------------------

    def changes(self, checkpoint: str | None) -> ChangeSet:
        items: list[ConnectorItem] = []
        for space in self.spaces:
            items.extend(self._space_items(space))
        synced = json.dumps({"synced_at": datetime.now(UTC).isoformat()})
        return ChangeSet(items, [], synced, complete=True)

    def _space_items(self, space: str) -> list[ConnectorItem]:
        if self.cloud:
            found = list(self._v2_pages("/api/v2/spaces", keys=space))
            if not found:
                raise SourceError(f"Confluence space {space} not found")
            space_id = found[0]["id"]
            pages = [
                {
                    "id": p["id"],
                    "title": p["title"],
                    "version": p["version"]["number"],
                    "when": p["version"]["createdAt"],
                    "parent": p.get("parentId"),
                    "webui": p.get("_links", {}).get("webui", ""),
                }
                for p in self._v2_pages(
                    f"/api/v2/spaces/{space_id}/pages", limit=_PAGE_LIMIT, status="current"
                )
            ]
            readers = self._cloud_space_readers(space_id)
        else:
            pages = [
                {
                    "id": p["id"],
                    "title": p["title"],
                    "version": p["version"]["number"],
                    "when": p["version"]["when"],
                    "parent": (p.get("ancestors") or [{}])[-1].get("id"),
                    "webui": p.get("_links", {}).get("webui", ""),
                }
                for p in self._v1_pages(
                    "/rest/api/content",
                    spaceKey=space,
                    type="page",
                    status="current",
                    expand="version,ancestors",
                    limit=_PAGE_LIMIT,
                )
            ]
            readers = self._dc_space_readers(space)
        by_id = {page["id"]: page for page in pages}
        restrictions = {page["id"]: self._read_restriction(page["id"]) for page in pages}
        items = []
        for page in pages:
            chain = _ancestry(page["id"], by_id)
            titles = [by_id[a]["title"].replace("/", "_") for a in reversed(chain)]
            principals = _page_principals(chain, restrictions, readers)
            items.append(
                ConnectorItem(
                    item_id=page["id"],
                    path="/".join([space, *titles]) + ".html",
                    version=str(page["version"]),
                    size_bytes=0,
                    modified_at=datetime.fromisoformat(page["when"].replace("Z", "+00:00")),
                    principals=principals,
                    url=self.base + page["webui"] if page["webui"] else self.base,
                    media_type="confluence/page",
                )
            )
        return items

    def _read_restriction(self, page_id: str) -> tuple[Principal, ...] | None:
        """Who a page's own read restriction names: () for none; None when unreadable (then
        nobody may read the page)."""
        try:
            body = self._get(
                f"/rest/api/content/{page_id}/restriction/byOperation/read",
                expand="restrictions.user,restrictions.group",
                limit=1000,
            )
        except SourceError:
            return None
        restrictions = body.get("restrictions", {})
        users = restrictions.get("user", {}).get("results", [])
        groups = restrictions.get("group", {}).get("results", [])
        return tuple(
            [Principal("user", _user_id(u)) for u in users]
            + [Principal("group", g.get("name") or g.get("id", "")) for g in groups]
        )

    def _cloud_space_readers(self, space_id: str) -> tuple[Principal, ...] | None:
        try:
            entries = list(self._v2_pages(f"/api/v2/spaces/{space_id}/permissions", limit=250))
        except SourceError:
            return None
        return tuple(
            Principal(e["principal"]["type"], e["principal"]["id"])
            for e in entries
            if e.get("operation", {}).get("key") == "read"
            and e.get("operation", {}).get("targetType") == "space"
            and e["principal"]["type"] in ("user", "group")
        )

    def _dc_space_readers(self, space: str) -> tuple[Principal, ...] | None:
        try:
            entries = self._get(f"/rest/api/space/{space}/permissions")
        except SourceError:
            return None
        found = []
        for entry in entries:
            operation, subject = entry.get("operation", {}), entry.get("subject", {})
            if operation.get("operationKey") != "read" or operation.get("targetType") != "space":
                continue
            if subject.get("type") == "group":
                found.append(Principal("group", subject.get("name", "")))
            elif subject.get("type") == "user":
                found.append(Principal("user", _user_id(subject)))
        return tuple(found)

    # -- reading -------------------------------------------------------------------------------

    def fetch(self, item: ConnectorItem) -> bytes:
        """The page as an HTML document: its title as the heading, its storage-format body
        (Confluence's XHTML, macros included) below."""
        try:
            if self.cloud:
                page = self._get(f"/api/v2/pages/{item.item_id}", **{"body-format": "storage"})
            else:
                page = self._get(f"/rest/api/content/{item.item_id}", expand="body.storage")
        except SourceError as error:
            raise SourceError(f"{item.path}: {error}") from error
        title = html.escape(page.get("title", ""))
        body = page.get("body", {}).get("storage", {}).get("value", "")
        document = (
            f"<html><head><title>{title}</title></head><body><h1>{title}</h1>{body}</body></html>"
        )
        return document.encode("utf-8")


def _ancestry(page_id: str, by_id: dict[str, dict[str, Any]]) -> list[str]:
    """The page and its ancestors within the listing, the page first."""
    chain, seen = [page_id], {page_id}
    parent = by_id[page_id]["parent"]
    while parent in by_id and parent not in seen:
        chain.append(parent)
        seen.add(parent)
        parent = by_id[parent]["parent"]
    return chain


def _page_principals(
    chain: list[str],
    restrictions: dict[str, tuple[Principal, ...] | None],
    space_readers: tuple[Principal, ...] | None,
) -> tuple[Principal, ...] | None:
    """Who may read a page: see the module's docstring. None (nobody) when a restriction on
    the way or the space's permissions could not be read."""
    levels = [restrictions[page] for page in chain]
    if any(level is None for level in levels):
        return None
    restricted = [set(level) for level in levels if level]
    if not restricted:
        return space_readers
    common = set.intersection(*restricted)
    return tuple(sorted(common, key=lambda p: (p.kind, p.value)))


def _user_id(user: dict[str, Any]) -> str:
    """A user as the permission map names them: e-mail where Confluence gives one, else the
    account id (Cloud) or user name (Data Center)."""
    return user.get("email") or user.get("accountId") or user.get("username") or ""


def _error_message(response: httpx.Response) -> str:
    try:
        body = response.json()
        message = body.get("message") or "; ".join(body.get("errorMessages", []))
    except (ValueError, AttributeError):
        message = ""
    return f"HTTP {response.status_code} {message}".strip()


#: The deployment settings this connector reads (`lorehouse.sources.registry`).
SETTINGS = ("confluence_cloud", "confluence_token", "confluence_email")
#: Confluence has no "anyone" of its own beyond its users.
ANYONE_DEFAULT: str | None = None


def connector_for(uri: str, options: Mapping[str, Any], folder: Path) -> ConfluenceConnector:
    """The connector of `confluence+https://SITE?spaces=...`; a site on atlassian.net is
    Cloud unless `confluence_cloud` says otherwise."""
    site, spaces = parse_confluence_uri(uri)
    cloud = options["confluence_cloud"]
    if cloud is None:
        cloud = (urlsplit(site).hostname or "").endswith(".atlassian.net")
    return ConfluenceConnector(
        site, spaces, cloud, options["confluence_token"], options["confluence_email"]
    )
