"""A real HTTP server on 127.0.0.1 serving a generated web site, for the web connector's tests.

It answers as a web server does: robots.txt, a sitemap, ETag and Last-Modified on every page
and 304 to a request whose If-None-Match matches; and, on request, the faults a crawl meets
(429 with Retry-After, 503, a page larger than the cap). Every request is recorded.
"""

from __future__ import annotations

import hashlib
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler

from tests.local_http import local_server


@dataclass
class Site:
    """Pages by path ("/docs/a.html" -> (content type, body)) and the faults to answer with."""

    pages: dict[str, tuple[str, bytes]] = field(default_factory=dict)
    robots: str | None = "User-agent: *\nDisallow: /docs/private/\n"
    robots_status: int = 200
    #: Whether /sitemap.xml lists the site's pages (else it answers 404).
    sitemap: bool = True
    #: Path -> how many times it answers 429 (Retry-After: 0) before it answers.
    throttled: dict[str, int] = field(default_factory=dict)
    #: Paths that always answer 503.
    failing: set[str] = field(default_factory=set)
    #: Path -> extra response headers (X-Robots-Tag...).
    headers: dict[str, dict[str, str]] = field(default_factory=dict)
    #: Path -> where it redirects (302 with that Location, taken as written).
    redirects: dict[str, str] = field(default_factory=dict)
    #: Path -> a gzip body, answered with Content-Encoding: gzip (`bomb`).
    gzipped: dict[str, bytes] = field(default_factory=dict)
    #: Path -> seconds between the bytes of its body, sent one at a time.
    drip: dict[str, float] = field(default_factory=dict)
    #: (method, path, status) of every request answered.
    requests: list[tuple[str, str, int]] = field(default_factory=list)
    base_url: str = ""

    def page(self, path: str, body: str, content_type: str = "text/html") -> None:
        self.pages[path] = (content_type, body.encode())

    def bomb(self, path: str, mebibytes: int) -> None:
        """`path` answers a small gzip body that decompresses to `mebibytes` of spaces,
        compressed a mebibyte at a time so that the server never holds it whole."""
        packer = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: the gzip container
        block = b" " * 2**20
        self.gzipped[path] = (
            b"".join(packer.compress(block) for _ in range(mebibytes)) + packer.flush()
        )

    def statuses(self, status: int) -> list[str]:
        return [path for _, path, answered in self.requests if answered == status]


def html(title: str, text: str, links: list[str] = ()) -> str:  # type: ignore[assignment]
    anchors = "".join(f'<li><a href="{link}">{link}</a></li>' for link in links)
    return (
        f"<html><head><title>{title}</title></head><body><h1>{title}</h1>"
        f"<p>{text}</p><ul>{anchors}</ul></body></html>"
    )


@contextmanager
def serve(site: Site) -> Iterator[Site]:
    """Serves `site` until the block ends; `site.base_url` is set meanwhile."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # quiet
            return

        def do_GET(self) -> None:
            path = self.path.split("?")[0]
            status, headers, body = self._answer(path)
            site.requests.append(("GET", path, status))
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if path in site.drip:
                for byte in body:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(site.drip[path])
                return
            self.wfile.write(body)

        def _answer(self, path: str) -> tuple[int, dict[str, str], bytes]:
            if path in site.redirects:
                return 302, {"Location": site.redirects[path]}, b""
            if path in site.gzipped:
                kind = "text/plain" if path.endswith(".txt") else "application/xml"
                headers = {"Content-Type": kind, "Content-Encoding": "gzip"}
                return 200, headers, site.gzipped[path]
            if path == "/robots.txt":
                if site.robots is None:
                    return 404, {}, b""
                return site.robots_status, {"Content-Type": "text/plain"}, site.robots.encode()
            if path == "/sitemap.xml" and not site.sitemap:
                return 404, {}, b""
            if path == "/sitemap.xml":
                locations = "".join(
                    f"<url><loc>{site.base_url}{p}</loc></url>"
                    for p in sorted(site.pages)
                    if p.endswith(".html")
                )
                body = (
                    '<?xml version="1.0" encoding="UTF-8"?>'
                    f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{locations}'
                    "</urlset>"
                ).encode()
                return 200, {"Content-Type": "application/xml"}, body
            if path in site.failing:
                return 503, {}, b"unavailable"
            if site.throttled.get(path, 0) > 0:
                site.throttled[path] -= 1
                return 429, {"Retry-After": "0"}, b"slow down"
            if path not in site.pages:
                return 404, {"Content-Type": "text/plain"}, b"not found"
            content_type, body = site.pages[path]
            etag = '"' + hashlib.sha256(body).hexdigest()[:16] + '"'
            headers = {"Content-Type": f"{content_type}; charset=utf-8", "ETag": etag}
            headers.update(site.headers.get(path, {}))
            if self.headers.get("If-None-Match") == etag:
                return 304, {"ETag": etag}, b""
            return 200, headers, body

    with local_server(Handler) as base_url:
        site.base_url = base_url
        yield site
