"""A web site as a source: its sitemaps plus a same-origin crawl, as robots.txt allows.

The crawl starts at the configured URL and at every page the site's sitemaps list, and
follows links that stay on the same origin and under the start URL's path. Each page is
asked for with the validators it answered last time (If-None-Match, If-Modified-Since), so a
nightly crawl of an unchanged site downloads almost nothing: a 304 keeps the page as it was,
and the links it had are followed again from the saved state.

A page that cannot be had (429 or 5xx after retries, 404 of a page a sitemap lists, over the
size cap) is still listed, with the reason, and the parse stage records it against that page:
nothing is skipped silently, and one bad page never fails the crawl. Only robots.txt itself
answering 5xx stops the crawl (RFC 9309 reads that as "disallow everything"), with an error
that keeps the last inventory as it was rather than dropping the whole site.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urldefrag, urljoin, urlsplit

import httpx
from lxml import etree
from lxml import html as lxml_html
from protego import Protego

from lorehouse.errors import SourceError
from lorehouse.sources.connectors import (
    ChangeSet,
    ConnectorItem,
    Principal,
    RetryPolicy,
    send,
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


@dataclass
class _Page:
    """What the crawl keeps of a page between runs."""

    etag: str | None = None
    last_modified: str | None = None
    digest: str = ""
    size: int = 0
    content_type: str = ""
    seen_at: str = ""
    links: list[str] = field(default_factory=list)
    #: False for a page that asks not to be indexed (meta robots or X-Robots-Tag "noindex"):
    #: crawled for its links, never listed.
    indexable: bool = True


class WebSiteConnector:
    """The pages of one site below a start URL."""

    kind = "web"

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
    ) -> None:
        parts = urlsplit(start_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise SourceError(f"not a web site URL: {start_url!r}")
        path = parts.path if parts.path.endswith("/") else parts.path.rsplit("/", 1)[0] + "/"
        self.start_url = start_url
        self.origin = f"{parts.scheme}://{parts.netloc}"
        self.scope = self.origin + path
        self.cache_dir = cache_dir
        self.client = client or httpx.Client(
            timeout=30.0, headers={"User-Agent": user_agent}, follow_redirects=True
        )
        self.max_pages = max_pages
        self.max_bytes = max_bytes
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
            url: _Page(**page) for url, page in json.loads(checkpoint or "{}").items()
        }
        robots = self._robots()
        delay = min(robots.crawl_delay(self.user_agent) or 0.0, MAX_CRAWL_DELAY_SECONDS)
        queue: deque[str] = deque([self.start_url, *self._sitemap_urls(robots)])
        seen: set[str] = set()
        pages: dict[str, _Page] = {}
        items: list[ConnectorItem] = []
        while queue and len(seen) < self.max_pages:
            url = urldefrag(queue.popleft())[0]
            if url in seen or not self._in_scope(url):
                continue
            seen.add(url)
            if not robots.can_fetch(url, self.user_agent):
                continue
            if delay and pages:
                self.sleep(delay)  # the site's Crawl-delay between two of its pages
            page, failure = self._visit(url, known.get(url))
            if page is None and failure is None:
                continue  # not a document (an image, a stylesheet)
            if page is not None:
                pages[url] = page
                queue.extend(page.links)
                if not page.indexable:
                    continue
            items.append(self._item(url, page, failure))
        self._forget_bodies_except({page.digest for page in pages.values()})
        state = {url: page.__dict__ for url, page in pages.items()}
        return ChangeSet(items, [], json.dumps(state, sort_keys=True), complete=True)

    def _forget_bodies_except(self, digests: set[str]) -> None:
        """Drops stored bodies of pages that changed or left: only the current ones are
        read (by the parse stage, after this listing)."""
        if self.cache_dir.is_dir():
            for stored in self.cache_dir.iterdir():
                if stored.name not in digests:
                    stored.unlink(missing_ok=True)

    def _robots(self) -> Protego:
        url = self.origin + "/robots.txt"
        response = send(self.client, "GET", url, self.retry)
        if response.status_code >= 500:
            raise SourceError(f"{url} answered {response.status_code}; the site was not crawled")
        return Protego.parse(response.text if response.status_code == 200 else "")

    def _sitemap_urls(self, robots: Protego) -> list[str]:
        """Page URLs of the site's sitemaps (robots.txt's, else /sitemap.xml), indexes
        followed; a sitemap that cannot be read is logged and left."""
        pending = [urljoin(self.origin + "/", s) for s in robots.sitemaps] or [
            self.origin + "/sitemap.xml"
        ]
        found: list[str] = []
        read = 0
        while pending and read < _MAX_SITEMAPS:
            url = pending.pop(0)
            if not url.startswith(self.origin + "/"):
                continue
            read += 1
            try:
                response = send(self.client, "GET", url, self.retry)
                if response.status_code != 200:
                    continue
                root = etree.fromstring(response.content, etree.XMLParser(resolve_entities=False))
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
        return url.startswith(self.scope) or url == self.scope.rstrip("/")

    def _visit(self, url: str, before: _Page | None) -> tuple[_Page | None, str | None]:
        """(the page now, None), (None, why it cannot be had), or (None, None) for a
        resource that is not a document. The body is read as it streams in, so a page over
        the cap is given up at the cap, not downloaded whole."""
        headers = {}
        if before is not None and before.etag:
            headers["If-None-Match"] = before.etag
        if before is not None and before.last_modified:
            headers["If-Modified-Since"] = before.last_modified
        try:
            response = send(self.client, "GET", url, self.retry, stream=True, headers=headers)
        except SourceError as error:
            return None, str(error)
        try:
            if response.status_code == 304 and before is not None:
                return before, None
            if response.status_code != 200:
                return None, f"{url} answered {response.status_code}"
            content_type = response.headers.get("Content-Type", "").split(";")[0].strip()
            if content_type not in _EXTENSIONS:
                return None, None
            declared = int(response.headers.get("Content-Length") or 0)
            if declared > self.max_bytes:
                return None, f"{url} is {declared} bytes, over the cap of {self.max_bytes}"
            body = bytearray()
            for block in response.iter_bytes():
                body += block
                if len(body) > self.max_bytes:
                    return None, f"{url} is over the cap of {self.max_bytes} bytes"
        except httpx.HTTPError as error:
            return None, f"{url}: {type(error).__name__}: {error}"
        finally:
            response.close()
        return self._keep(url, bytes(body), content_type, response.headers, before), None

    def _keep(
        self,
        url: str,
        body: bytes,
        content_type: str,
        headers: httpx.Headers,
        before: _Page | None,
    ) -> _Page:
        """Stores the body by its digest and returns the page with its links and whether it
        may be indexed: noindex and nofollow from X-Robots-Tag and, on an HTML page, its
        `<meta name="robots">` (or one for this crawler, `lorehousebot`)."""
        directives = _directives(headers.get("X-Robots-Tag", ""))
        links: list[str] = []
        if _EXTENSIONS[content_type] == ".html":
            links, meta = _read_html(url, body)
            directives |= meta
        digest = hashlib.sha256(body).hexdigest()
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        cached = self.cache_dir / digest
        if not cached.exists():
            temporary = cached.with_suffix(".tmp")
            temporary.write_bytes(body)
            temporary.replace(cached)
        same = before is not None and before.digest == digest
        return _Page(
            etag=headers.get("ETag"),
            last_modified=headers.get("Last-Modified"),
            digest=digest,
            size=len(body),
            content_type=content_type,
            seen_at=before.seen_at if same and before else datetime.now(UTC).isoformat(),
            links=[] if directives & {"nofollow", "none"} else links,
            indexable=not directives & {"noindex", "none"},
        )

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
        """The body the crawl stored; fetched again if the cache lost it."""
        cached = self.cache_dir / item.version
        if cached.exists():
            return cached.read_bytes()
        response = send(self.client, "GET", item.url, self.retry)
        if response.status_code != 200:
            raise SourceError(f"{item.url} answered {response.status_code} since it was listed")
        return response.content


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
            links.append(urldefrag(urljoin(url, href))[0])
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
