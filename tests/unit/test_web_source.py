"""The web site connector against a real local HTTP server: what a crawl lists, what a second
crawl downloads, the faults it records per page, and access through the permission map."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lorehouse.errors import SourceError
from lorehouse.models import NOBODY_GROUP
from lorehouse.sources.connectors import (
    ConnectorSource,
    PermissionMap,
    Principal,
    RetryPolicy,
)
from lorehouse.sources.web import WebSiteConnector
from lorehouse.stages.inventory import run_inventory
from lorehouse.stores.duckdb_store import DuckDBStore
from tests.web_site import Site, html, serve

FAST = RetryPolicy(attempts=3, backoff_seconds=0.01, max_wait_seconds=1.0)


def _site() -> Site:
    site = Site()
    site.page("/docs/", html("Handbook", "Start here.", ["guide.html", "private/pay.html"]))
    site.page("/docs/guide.html", html("Guide", "Expenses over EUR 5,000 need the CFO.", ["../x"]))
    site.page("/docs/private/pay.html", html("Pay", "Salaries by level."))
    site.page("/docs/sitemapped.html", html("Only in the sitemap", "Linked from nowhere."))
    site.page("/docs/logo.png", "binary", content_type="image/png")
    site.page("/blog/post.html", html("Blog", "Outside the start URL's path."))
    return site


def _source(site: Site, tmp_path: Path, **options: object) -> ConnectorSource:
    connector = WebSiteConnector(
        f"{site.base_url}/docs/", tmp_path / "pages", retry=FAST, **options
    )
    return ConnectorSource(connector, tmp_path / "state.json", anyone_default="public")


def test_a_crawl_lists_linked_and_sitemapped_pages_that_robots_allows(tmp_path: Path) -> None:
    with serve(_site()) as site:
        listed = {f.rel_path: f for f in _source(site, tmp_path).list_files()}
    assert set(listed) == {"index.html", "guide.html", "sitemapped.html"}
    assert "/docs/private/pay.html" not in {path for _, path, _ in site.requests}
    assert all(f.acl_groups == () for f in listed.values())  # a public site


def test_a_second_crawl_downloads_only_what_changed_and_drops_what_left(tmp_path: Path) -> None:
    with serve(_site()) as site:
        source = _source(site, tmp_path)
        first = {f.rel_path: f.version for f in source.list_files()}
        site.requests.clear()
        site.page("/docs/guide.html", html("Guide", "Expenses over EUR 6,000 need the CFO."))
        del site.pages["/docs/sitemapped.html"]
        second = {f.rel_path: f.version for f in source.list_files()}
        downloaded = site.statuses(200)
        assert sorted(site.statuses(304)) == ["/docs/"]
        assert source.read_bytes("guide.html").count(b"EUR 6,000") == 1
    assert set(second) == {"index.html", "guide.html"}
    assert second["index.html"] == first["index.html"]
    assert second["guide.html"] != first["guide.html"]
    assert [p for p in downloaded if p.startswith("/docs/") and p != "/docs/"] == [
        "/docs/guide.html"
    ]


def test_faults_are_recorded_per_page_and_the_crawl_goes_on(tmp_path: Path) -> None:
    site = _site()
    site.throttled["/docs/guide.html"] = 2  # 429 twice, then the page
    site.failing.add("/docs/sitemapped.html")
    site.page("/docs/big.html", html("Big", "x" * 5000))
    site.pages["/docs/"] = ("text/html", html("Home", "", ["guide.html", "big.html"]).encode())
    with serve(site):
        source = _source(site, tmp_path, max_bytes=4000)
        listed = {f.rel_path: f for f in source.list_files()}
        assert b"EUR 5,000" in source.read_bytes("guide.html")
        with pytest.raises(SourceError, match="503 after 3 attempts"):
            source.read_bytes("sitemapped.html")
        with pytest.raises(SourceError, match="over the cap of 4000"):
            source.read_bytes("big.html")
    assert {"index.html", "guide.html", "sitemapped.html", "big.html"} == set(listed)


def test_robots_answering_5xx_stops_the_crawl_and_keeps_the_last_listing(tmp_path: Path) -> None:
    with serve(_site()) as site:
        source = _source(site, tmp_path)
        before = {f.rel_path for f in source.list_files()}
        site.robots_status = 503
        with pytest.raises(SourceError, match=r"robots\.txt"):
            list(source.list_files())
        site.robots_status = 200
        assert {f.rel_path for f in source.list_files()} == before


def test_the_permission_map_decides_who_reads_a_site_and_fails_closed(tmp_path: Path) -> None:
    mapping = tmp_path / "permissions.json"
    mapping.write_text(
        json.dumps(
            {
                "anyone": "staff",
                "users": {"Ana@Example.com": ["finance"]},
                "groups": {"eng@example.com": "engineering"},
                "domains": {"example.com": "employees"},
            }
        )
    )
    permissions = PermissionMap.load(mapping)
    assert permissions.groups_for([Principal("anyone")]) == ("staff",)
    assert permissions.groups_for(
        [Principal("user", "ana@example.com"), Principal("group", "ENG@example.com")]
    ) == ("engineering", "finance")
    assert permissions.groups_for([Principal("domain", "example.com")]) == ("employees",)
    # Unreadable permissions, or none that maps: nobody, never everyone.
    assert permissions.groups_for(None) == (NOBODY_GROUP,)
    assert permissions.groups_for([Principal("user", "stranger@else.org")]) == (NOBODY_GROUP,)
    assert PermissionMap().groups_for([Principal("anyone")]) == (NOBODY_GROUP,)
    assert PermissionMap().groups_for([Principal("anyone")], anyone_default="public") == ()

    store = DuckDBStore(tmp_path / "store.duckdb")
    with serve(_site()) as site:
        connector = WebSiteConnector(f"{site.base_url}/docs/", tmp_path / "pages", retry=FAST)
        source = ConnectorSource(connector, tmp_path / "state.json", permissions, "public")
        report = run_inventory(source, store, max_file_bytes=1 << 20)
    rows = store.table("documents_raw")
    assert report.documents == 3 and report.restricted == 3
    assert {tuple(groups) for groups in rows["acl_groups"]} == {("staff",)}
    assert all(uri.startswith(site.base_url + "/docs/") for uri in rows["source_uri"])


def test_a_crawl_keeps_the_sites_pace_and_its_noindex_and_nofollow(tmp_path: Path) -> None:
    site = Site(robots="User-agent: *\nCrawl-delay: 2\n", sitemap=False)
    site.page("/docs/", html("Home", "Start.", ["hidden.html", "closed.html"]))
    site.page(
        "/docs/hidden.html",
        '<html><head><meta name="robots" content="noindex"></head>'
        '<body><p>Draft.</p><a href="reached.html">on</a></body></html>',
    )
    site.page("/docs/reached.html", html("Reached", "Linked from a noindex page only."))
    site.page("/docs/closed.html", html("Closed", "Its links are not to be followed.", ["x.html"]))
    site.page("/docs/x.html", html("X", "Linked from a nofollow page only."))
    site.headers["/docs/closed.html"] = {"X-Robots-Tag": "nofollow"}
    waits: list[float] = []
    with serve(site):
        connector = WebSiteConnector(
            f"{site.base_url}/docs/", tmp_path / "pages", retry=FAST, sleep=waits.append
        )
        source = ConnectorSource(connector, tmp_path / "state.json", anyone_default="public")
        listed = {f.rel_path for f in source.list_files()}
        again = {f.rel_path for f in source.list_files()}  # from 304s and the saved state
    assert listed == again == {"index.html", "reached.html", "closed.html"}
    assert "/docs/x.html" not in {path for _, path, _ in site.requests}
    assert waits and set(waits) == {2.0}
