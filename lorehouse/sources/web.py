"""A web site as a source: its sitemaps plus a same-origin crawl, as robots.txt allows.

The crawl starts at the configured URL and at every page the site's sitemaps list, and
follows links that stay on the same origin and under the start URL's path. Every URL is
normalised first (dot segments resolved, `%2e%2e` included), and redirects are followed one
hop at a time, each hop checked against that scope (at most `MAX_REDIRECTS`), so neither a
link nor a redirect takes the crawl elsewhere. Connections go only to public addresses and
to the networks LOREHOUSE_WEB_ALLOWED_NETWORKS names (`lorehouse.sources.addresses`). Each page is
asked for with the validators it answered last time (If-None-Match, If-Modified-Since), so a
nightly crawl of an unchanged site downloads almost nothing: a 304 keeps the page as it was,
and the links it had are followed again from the saved state.

A page that cannot be had (429 or 5xx after retries, 404 of a page a sitemap lists, over the
size cap) is still listed, with the reason, and the parse stage records it against that page:
nothing is skipped silently, and one bad page never fails the crawl. Only robots.txt itself
answering 5xx stops the crawl (RFC 9309 reads that as "disallow everything"), with an error
that keeps the last inventory as it was rather than dropping the whole site.

Longer than most modules because a safe crawl is several rules that must agree on every
URL: its scope, redirects one hop at a time, robots.txt, the sitemaps and the validators.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import zlib
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote, unquote, urldefrag, urljoin, urlsplit

import httpx
from lxml import etree
from lxml import html as lxml_html
from protego import Protego

from lorehouse.errors import SourceError
from lorehouse.sources.addresses import AddressPolicy, GuardedTransport, parse_networks
from lorehouse.sources.connectors import (
    ChangeSet,
    ConnectorItem,
    Principal,
    RetryPolicy,
    forget_bodies_except,
    send,
    store_body,
)

log = logging.getLogger(__name__)

USER_AGENT = "LorehouseBot/1.0 (+https://github.com/lorehouse)"
_SITEMAP_NS = "{http://www.sitemaps.org/schemas/sitemap/0.9}"
#: Content types a page is indexed as, by the extension its path gets when it has none.
_EXTENSIONS = {
    "text/html": ".html",
    "application/xhtml+xml": ".html",
    "text/markdown": ".md",
    "text/plain": ".txt",
    "application/pdf": ".pdf",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": ".docx",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": ".pptx",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": ".xlsx",
}
#: Sitemap files and sitemap indexes followed at most, so a loop of indexes ends.
_MAX_SITEMAPS = 1000
#: The longest Crawl-delay honoured between two pages: a site asking for more is crawled at
#: this pace (a nightly crawl of 10,000 pages at 10 s takes a day).
MAX_CRAWL_DELAY_SECONDS = 10.0
#: Redirects one request follows at most (each hop checked against the scope first).
MAX_REDIRECTS = 5
#: robots.txt is read up to this size; RFC 9309 asks a crawler to parse at least 500 KiB.
ROBOTS_MAX_BYTES = 500 * 1024
_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
_DEFAULT_PORTS = {"http": 80, "https": 443}
#: The encodings a crawl accepts, and inflates itself within its caps (`_read`).
_ACCEPT_ENCODING = "gzip, deflate"
_INFLATED = frozenset({"gzip", "x-gzip", "deflate"})


@dataclass
class _Page:
    """What the crawl keeps of a page between runs."""

    etag: str | None = None
    last_modified: str | None = None
    digest: str = ""
    size: int = 0
    content_type: str = ""
    seen_at: str = ""
    #: False for a page that asks not to be indexed (meta robots or X-Robots-Tag "noindex"):
    #: crawled for its links, never listed.
    indexable: bool = True
    #: False for a page whose links are not to be followed ("nofollow"). The links
    #: themselves are read again from the stored body when the page answers 304, rather
    #: than kept in the state, which stays a few hundred bytes a page however many links.
    follow: bool = True

    @classmethod
    def from_state(cls, saved: dict) -> _Page:
        known = {f.name for f in fields(cls)}
        return cls(**{name: value for name, value in saved.items() if name in known})


class WebSiteConnector:
    """The pages of one site below a start URL."""

    kind = "web"
    #: Page bodies are kept by their digest (the item's version): reads are served from
    #: them, so what is parsed is what the crawl hashed.
    keeps_bodies = True

    def __init__(
        self,
        start_url: str,
        cache_dir: Path,
        client: httpx.Client | None = None,
        max_pages: int = 10_000,
        max_bytes: int = 50 * 2**20,
        retry: RetryPolicy | None = None,
        user_agent: str = USER_AGENT,
        sleep: Callable[[float], None] = time.sleep,
        allowed_networks: str = "",
        page_seconds: float = 60.0,
    ) -> None:
        normal = normalise_url(start_url)
        if normal is None:
            raise SourceError(f"not a web site URL: {start_url!r}")
        parts = urlsplit(normal)
        path = parts.path if parts.path.endswith("/") else parts.path.rsplit("/", 1)[0] + "/"
        self.start_url = start_url
        self.origin = f"{parts.scheme}://{parts.netloc}"
        self.scope = self.origin + path
        self._scope_path = path
        #: The origins the scope covers: the start URL's, and its https form (a site that
        #: moves its http pages to https stays the same site; the start URL is normalised,
        #: so a port in it is one of its own, kept).
        self._origins = {self.origin, f"https://{parts.netloc}"}
        self.cache_dir = cache_dir
        try:
            policy = AddressPolicy(parse_networks(allowed_networks))
        except ValueError as error:
            raise SourceError(f"LOREHOUSE_WEB_ALLOWED_NETWORKS: {error}") from error
        # Redirects are followed by `_get`, never by the client, so every hop is checked.
        self.client = client or httpx.Client(
            timeout=30.0,
            headers={"User-Agent": user_agent, "Accept-Encoding": _ACCEPT_ENCODING},
            follow_redirects=False,
            transport=GuardedTransport(policy),
        )
        self.max_pages = max_pages
        self.max_bytes = max_bytes
        self.page_seconds = page_seconds
        #: Whoever can reach the site may read its pages; the permission map's `anyone`
        #: narrows that to a group (an intranet's staff).
        self.principals = (Principal("anyone"),)
        self.retry = retry or RetryPolicy()
        self.user_agent = user_agent
        self.sleep = sleep

    @property
    def uri(self) -> str:
        return self.start_url

    # -- listing ---------------------------------------------------------------------------

    def changes(self, checkpoint: str | None) -> ChangeSet:
        """Crawls the site; every page found is listed (`complete`), changed or not."""
        known: dict[str, _Page] = {
            url: _Page.from_state(page) for url, page in json.loads(checkpoint or "{}").items()
        }
        robots = self._robots()
        delay = min(robots.crawl_delay(self.user_agent) or 0.0, MAX_CRAWL_DELAY_SECONDS)
        queue: deque[str] = deque([self.start_url, *self._sitemap_urls(robots)])
        seen: set[str] = set()
        pages: dict[str, _Page] = {}
        items: list[ConnectorItem] = []
        while queue and len(seen) < self.max_pages:
            url = normalise_url(queue.popleft())
            if url is None or url in seen or not self._in_scope(url):
                continue
            seen.add(url)
            if not robots.can_fetch(url, self.user_agent):
                continue
            if delay and pages:
                self.sleep(delay)  # the site's Crawl-delay between two of its pages
            final, page, failure, links = self._visit(url, known)
            if final != url:
                if final in seen or not robots.can_fetch(final, self.user_agent):
                    continue  # redirected to a page crawled already, or one robots forbids
                seen.add(final)
            if page is None and failure is None:
                continue  # not a document (an image, a stylesheet), or not for this crawl
            if page is not None:
                pages[final] = page
                queue.extend(links)
                if not page.indexable:
                    continue
            items.append(self._item(final, page, failure))
        # Only the current bodies are read again (by the parse stage, after this listing).
        forget_bodies_except(self.cache_dir, {page.digest for page in pages.values()})
        state = {url: page.__dict__ for url, page in pages.items()}
        return ChangeSet(items, [], json.dumps(state, sort_keys=True), complete=True)

    def _robots(self) -> Protego:
        """The site's robots.txt, read up to `ROBOTS_MAX_BYTES` (the rest is ignored, as
        RFC 9309 allows). A redirect off the site reads as no robots.txt; the pages are
        still held to the scope."""
        url = self.origin + "/robots.txt"
        try:
            _, response = self._get(url, self._same_site)
        except _NotFollowed as error:
            log.warning("robots.txt not read: %s", error)
            return Protego.parse("")
        try:
            if response.status_code >= 500:
                raise SourceError(
                    f"{url} answered {response.status_code}; the site was not crawled"
                )
            if response.status_code != 200:
                return Protego.parse("")
            body = _read(response, ROBOTS_MAX_BYTES, url, truncate=True)
        finally:
            response.close()
        return Protego.parse(body.decode(response.encoding or "utf-8", errors="replace"))

    def _sitemap_urls(self, robots: Protego) -> list[str]:
        """Page URLs of the site's sitemaps (robots.txt's, else /sitemap.xml), indexes
        followed; a sitemap that cannot be read is logged and left."""
        pending = [urljoin(self.origin + "/", s) for s in robots.sitemaps] or [
            self.origin + "/sitemap.xml"
        ]
        found: list[str] = []
        read = 0
        while pending and read < _MAX_SITEMAPS:
            url = normalise_url(pending.pop(0)) or ""
            if not self._same_site(url):
                continue
            read += 1
            try:
                _, response = self._get(url, self._same_site)
                try:
                    if response.status_code != 200:
                        continue
                    content = _read(response, self.max_bytes, url)
                finally:
                    response.close()
                root = etree.fromstring(
                    content, etree.XMLParser(resolve_entities=False, no_network=True)
                )
            except (SourceError, etree.XMLSyntaxError) as error:
                log.warning("sitemap %s left unread: %s", url, error)
                continue
            locations = [loc.text.strip() for loc in root.iter(f"{_SITEMAP_NS}loc") if loc.text]
            if root.tag == f"{_SITEMAP_NS}sitemapindex":
                pending.extend(locations)
            else:
                found.extend(locations)
        return found

    def _in_scope(self, url: str) -> bool:
        """Whether a normalised URL is on the site and under the start URL's path."""
        parts = urlsplit(url)
        if f"{parts.scheme}://{parts.netloc}" not in self._origins:
            return False
        return parts.path.startswith(self._scope_path) or parts.path == self._scope_path[:-1]

    def _same_site(self, url: str) -> bool:
        """Whether a normalised URL is on the site at all (robots.txt, sitemaps)."""
        parts = urlsplit(url)
        return f"{parts.scheme}://{parts.netloc}" in self._origins

    def _get(
        self,
        url: str,
        allowed: Callable[[str], bool],
        headers: dict[str, str] | None = None,
    ) -> tuple[str, httpx.Response]:
        """The final URL and its response (streamed, unread: the caller closes it), with
        redirects followed here, one hop at a time: each target normalised and checked by
        `allowed` before it is asked for, at most `MAX_REDIRECTS` of them."""
        first = url
        for _ in range(MAX_REDIRECTS + 1):
            response = send(self.client, "GET", url, self.retry, stream=True, headers=headers)
            if response.status_code not in _REDIRECT_STATUSES:
                return url, response
            response.close()
            location = response.headers.get("Location", "")
            try:
                target = normalise_url(urljoin(url, location)) if location else None
            except ValueError:
                target = None
            if target is None:
                raise _NotFollowed(f"{url} redirects to {location!r}, which is not a URL")
            if not allowed(target):
                raise _NotFollowed(f"{url} redirects to {target}, outside {self.scope}")
            url, headers = target, None  # validators belong to the URL first asked
        raise _NotFollowed(f"{first} redirects more than {MAX_REDIRECTS} times")

    def _visit(
        self, url: str, known: dict[str, _Page]
    ) -> tuple[str, _Page | None, str | None, list[str]]:
        """The URL the page answered at (after redirects) and (the page now, None, its
        links), (None, why it cannot be had, []), or (None, None, []) for a resource that
        is not a document or a redirect out of scope. The body is read as it streams in,
        so a page over the cap, or slower than `page_seconds`, is given up then, not
        downloaded whole."""
        before = known.get(url)
        headers = {}
        if before is not None and before.etag:
            headers["If-None-Match"] = before.etag
        if before is not None and before.last_modified:
            headers["If-Modified-Since"] = before.last_modified
        deadline = time.monotonic() + self.page_seconds
        try:
            final, response = self._get(url, self._in_scope, headers)
        except _NotFollowed as error:
            log.info("page left out: %s", error)
            return url, None, None, []
        except SourceError as error:
            return url, None, str(error), []
        try:
            before = known.get(final) if final != url else before
            if response.status_code == 304 and before is not None:
                return final, before, None, self._stored_links(final, before)
            if response.status_code != 200:
                return final, None, f"{final} answered {response.status_code}", []
            content_type = response.headers.get("Content-Type", "").split(";")[0].strip()
            if content_type not in _EXTENSIONS:
                return final, None, None, []
            declared = int(response.headers.get("Content-Length") or 0)
            if declared > self.max_bytes:
                return (
                    final,
                    None,
                    f"{final} is {declared} bytes, over the cap of {self.max_bytes}",
                    [],
                )
            body = _read(response, self.max_bytes, final, deadline=deadline)
        except SourceError as error:
            return final, None, str(error), []
        except (httpx.HTTPError, ValueError) as error:
            return final, None, f"{final}: {type(error).__name__}: {error}", []
        finally:
            response.close()
        page, links = self._keep(final, body, content_type, response.headers, before)
        return final, page, None, links

    def _stored_links(self, url: str, page: _Page) -> list[str]:
        """The links of an unchanged page, from its stored body."""
        if not page.follow or _EXTENSIONS.get(page.content_type) != ".html":
            return []
        try:
            return _read_html(url, (self.cache_dir / page.digest).read_bytes())[0]
        except FileNotFoundError:
            log.warning("stored body of %s is gone; its links wait for its next change", url)
            return []

    def _keep(
        self,
        url: str,
        body: bytes,
        content_type: str,
        headers: httpx.Headers,
        before: _Page | None,
    ) -> tuple[_Page, list[str]]:
        """Stores the body by its digest and returns the page with its links and whether it
        may be indexed: noindex and nofollow from X-Robots-Tag and, on an HTML page, its
        `<meta name="robots">` (or one for this crawler, `lorehousebot`)."""
        directives = _directives(headers.get("X-Robots-Tag", ""))
        links: list[str] = []
        if _EXTENSIONS[content_type] == ".html":
            links, meta = _read_html(url, body)
            directives |= meta
        digest = hashlib.sha256(body).hexdigest()
        cached = self.cache_dir / digest
        if not cached.exists():
            store_body(cached, body)
        same = before is not None and before.digest == digest
        follow = not directives & {"nofollow", "none"}
        page = _Page(
            etag=headers.get("ETag"),
            last_modified=headers.get("Last-Modified"),
            digest=digest,
            size=len(body),
            content_type=content_type,
            seen_at=before.seen_at if same and before else datetime.now(UTC).isoformat(),
            indexable=not directives & {"noindex", "none"},
            follow=follow,
        )
        return page, links if follow else []

    def _item(self, url: str, page: _Page | None, failure: str | None) -> ConnectorItem:
        path = self._path(url, page.content_type if page else "")
        if page is None:
            return ConnectorItem(
                item_id=url,
                path=path,
                version=f"failed:{hashlib.sha256((failure or '').encode()).hexdigest()[:16]}",
                size_bytes=0,
                modified_at=datetime.now(UTC).replace(microsecond=0),
                principals=self.principals,
                url=url,
                failure=failure,
            )
        return ConnectorItem(
            item_id=url,
            path=path,
            version=page.digest,
            size_bytes=page.size,
            modified_at=_modified(page),
            principals=self.principals,
            url=url,
        )

    def _path(self, url: str, content_type: str) -> str:
        """The page's path below the start URL, with the extension of what it holds."""
        parts = urlsplit(url)
        relative = unquote(parts.path)[len(urlsplit(self.scope).path) :] or "index"
        if relative.endswith("/"):
            relative += "index"
        if parts.query:
            relative += "_" + hashlib.sha256(parts.query.encode()).hexdigest()[:8]
        extension = _EXTENSIONS.get(content_type, ".html")
        if PurePosixPath(relative).suffix.lower() != extension:
            relative += extension
        return relative

    # -- reading ---------------------------------------------------------------------------

    def fetch(self, item: ConnectorItem) -> bytes:
        """The body the crawl stored (its digest is the item's version); fetched again,
        through the same checks, if the store lost it, and then only if it is the same."""
        cached = self.cache_dir / item.version
        if cached.exists():
            return cached.read_bytes()
        try:
            final, response = self._get(item.url, self._in_scope)
        except _NotFollowed as error:
            raise SourceError(str(error)) from error
        try:
            if response.status_code != 200:
                raise SourceError(f"{final} answered {response.status_code} since it was listed")
            body = _read(
                response, self.max_bytes, final, deadline=time.monotonic() + self.page_seconds
            )
        finally:
            response.close()
        if hashlib.sha256(body).hexdigest() != item.version:
            raise SourceError(f"{final} changed since it was crawled; the next crawl reads it")
        return body


class _NotFollowed(SourceError):
    """A redirect the crawl does not follow (out of scope, too many, not a URL)."""


def normalise_url(url: str) -> str | None:
    """An http(s) URL in one spelling, or None when it is not one: scheme and host in
    lower case, the default port and any user info dropped, the fragment dropped, and the
    path's dot segments resolved after decoding (`/hb/%2e%2e/x` is `/x`), so a scope check
    on the result is a check on what a server would serve."""
    if any(ord(c) < 32 or ord(c) == 127 for c in url):
        return None
    try:
        parts = urlsplit(url.strip())
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not host:
        return None
    netloc = f"[{host}]" if ":" in host else host
    if port is not None and port != _DEFAULT_PORTS[scheme]:
        netloc += f":{port}"
    path = quote(_without_dot_segments(unquote(parts.path)), safe="/!$&'()*+,;=:@-._~")
    query = f"?{parts.query}" if parts.query else ""
    return f"{scheme}://{netloc}{path}{query}"


def _without_dot_segments(path: str) -> str:
    """RFC 3986's remove_dot_segments, for an absolute path."""
    segments = path.split("/")
    kept: list[str] = []
    for segment in segments[1:]:
        if segment == "..":
            if kept:
                kept.pop()
        elif segment != ".":
            kept.append(segment)
    trailing = "/" if segments[-1] in (".", "..") and kept else ""
    return "/" + "/".join(kept) + trailing


def _read(
    response: httpx.Response,
    limit: int,
    url: str,
    truncate: bool = False,
    deadline: float | None = None,
) -> bytes:
    """A streamed body, decompressed, read up to `limit` bytes: past it the read stops,
    keeping what came (`truncate`) or failing; past `deadline` (monotonic) it fails, so a
    server dripping a byte at a time cannot hold the crawl.

    A gzip or deflate body is inflated here, never more than the cap allows at a time: a
    few hundred kilobytes of gzip can inflate to gigabytes, and a decoder asked for a whole
    block inflates it whole. The client asks for no other encoding (`_ACCEPT_ENCODING`).
    """
    encoding = response.headers.get("Content-Encoding", "").strip().lower()
    inflater = zlib.decompressobj(zlib.MAX_WBITS | 32) if encoding in _INFLATED else None
    body = bytearray()
    try:
        for block in response.iter_raw() if inflater else response.iter_bytes():
            pending = block
            while pending:
                if inflater is None:
                    body += pending
                    pending = b""
                else:
                    body += inflater.decompress(pending, limit + 1 - len(body))
                    pending = inflater.unconsumed_tail
                if len(body) > limit:
                    if truncate:
                        return bytes(body[:limit])
                    raise SourceError(f"{url} is over the cap of {limit} bytes")
            if deadline is not None and time.monotonic() > deadline:
                raise SourceError(f"{url} did not arrive within its deadline")
    except zlib.error as error:
        raise SourceError(f"{url}: its {encoding} body cannot be inflated: {error}") from error
    return bytes(body)


def _directives(value: str) -> set[str]:
    """The robots directives of a header or meta value ("noindex, nofollow")."""
    return {d.strip().lower() for d in value.split(",") if d.strip()}


def _read_html(url: str, body: bytes) -> tuple[list[str], set[str]]:
    """An HTML page's links (absolute, fragments dropped) and its meta robots directives,
    from one parse."""
    try:
        document = lxml_html.fromstring(body, base_url=url)
    except (etree.ParserError, ValueError):
        return [], set()
    links = []
    for element in document.iter("a"):
        href = element.get("href")
        if href and not href.startswith(("mailto:", "javascript:", "tel:")):
            try:
                link = normalise_url(urldefrag(urljoin(url, href.strip()))[0])
            except ValueError:
                link = None  # "http://[::1": not a URL, not a reason to stop reading
            if link is not None:
                links.append(link)
    directives: set[str] = set()
    for meta in document.iter("meta"):
        if (meta.get("name") or "").lower() in ("robots", "lorehousebot"):
            directives |= _directives(meta.get("content") or "")
    return list(dict.fromkeys(links)), directives


def _modified(page: _Page) -> datetime:
    """When the page last changed: its Last-Modified, else when this content was first seen."""
    if page.last_modified:
        try:
            return parsedate_to_datetime(page.last_modified).astimezone(UTC)
        except (TypeError, ValueError):
            pass
    return datetime.fromisoformat(page.seen_at)


#: The deployment settings this connector reads (`lorehouse.sources.registry`).
SETTINGS = ("web_max_pages", "max_file_bytes", "web_allowed_networks", "web_page_seconds")
#: A page anyone on the network may read is public.
ANYONE_DEFAULT: str | None = "public"


def connector_for(uri: str, options: Mapping[str, Any], folder: Path) -> WebSiteConnector:
    """The crawler of a start URL, keeping the page bodies it fetched under `folder`."""
    return WebSiteConnector(
        uri,
        cache_dir=folder / "pages",
        max_pages=options["web_max_pages"],
        max_bytes=options["max_file_bytes"],
        allowed_networks=options["web_allowed_networks"],
        page_seconds=options["web_page_seconds"],
    )
