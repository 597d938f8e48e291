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
#: The test site's address, named as an intranet's network would be.
LOCAL = "127.0.0.1"


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
        f"{site.base_url}/docs/", tmp_path / "pages", retry=FAST, allowed_networks=LOCAL, **options
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
        connector = WebSiteConnector(
            f"{site.base_url}/docs/", tmp_path / "pages", retry=FAST, allowed_networks=LOCAL
        )
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
            f"{site.base_url}/docs/",
            tmp_path / "pages",
            retry=FAST,
            sleep=waits.append,
            allowed_networks=LOCAL,
        )
        source = ConnectorSource(connector, tmp_path / "state.json", anyone_default="public")
        listed = {f.rel_path for f in source.list_files()}
        again = {f.rel_path for f in source.list_files()}  # from 304s and the saved state
    assert listed == again == {"index.html", "reached.html", "closed.html"}
    assert "/docs/x.html" not in {path for _, path, _ in site.requests}
    assert waits and set(waits) == {2.0}


# -- what a page can make the crawl do: redirects, odd links, bombs, slow pages ----------------


def _internal() -> Site:
    """Another server on the machine, holding what no crawl of the site may read."""
    internal = Site(robots=None, sitemap=False)
    internal.page("/secret/creds.txt", "aws_secret_access_key=INTERNAL", "text/plain")
    internal.page("/sitemap.xml", "<urlset/>", "application/xml")
    return internal


def _bodies(tmp_path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in (tmp_path / "pages").iterdir())


def test_redirects_are_followed_only_within_the_scope_hop_by_hop(tmp_path: Path) -> None:
    crawled = _site()
    crawled.sitemap = False  # reached by links and redirects only
    with serve(_internal()) as internal, serve(crawled) as site:
        secret = f"{internal.base_url}/secret/creds.txt"
        site.page("/docs/", html("Handbook", "Start.", ["off.html", "out.html", "moved.html"]))
        site.redirects["/docs/off.html"] = secret  # another origin on the same host
        site.redirects["/docs/out.html"] = "/blog/post.html"  # the site, outside /docs/
        site.redirects["/docs/moved.html"] = "/docs/guide.html"  # inside: followed
        chain = {f"/docs/hop{i}.html": f"/docs/hop{i + 1}.html" for i in range(10)}
        site.redirects.update(chain)
        site.page("/docs/hop10.html", html("End", "Ten redirects away."))
        site.page("/docs/chain.html", html("Chain", "start", ["hop0.html"]))
        site.pages["/docs/"] = (
            "text/html",
            html(
                "Handbook", "Start.", ["off.html", "out.html", "moved.html", "chain.html"]
            ).encode(),
        )
        listed = {f.rel_path for f in _source(site, tmp_path).list_files()}
    assert internal.requests == []  # not a byte asked of the other server
    assert "/blog/post.html" not in {path for _, path, _ in site.requests}
    assert "/docs/hop6.html" not in {path for _, path, _ in site.requests}  # five hops at most
    assert "hop10.html" not in listed
    assert "guide.html" in listed and "moved.html" not in listed  # under its own address
    assert b"INTERNAL" not in _bodies(tmp_path)


def test_robots_and_sitemaps_redirecting_off_the_site_are_not_followed(tmp_path: Path) -> None:
    with serve(_internal()) as internal, serve(_site()) as site:
        site.redirects["/robots.txt"] = f"{internal.base_url}/secret/creds.txt"
        site.redirects["/sitemap.xml"] = f"{internal.base_url}/sitemap.xml"
        listed = {f.rel_path for f in _source(site, tmp_path).list_files()}
    assert internal.requests == []
    assert "index.html" in listed and "guide.html" in listed


def test_dot_segments_and_encoded_ones_cannot_leave_the_start_path(tmp_path: Path) -> None:
    with serve(_site()) as site:
        site.page("/outside/dotdot.html", html("Outside", "Not under /docs/."))
        links = [
            f"{site.base_url}/docs/../outside/dotdot.html",
            "%2e%2e/outside/dotdot.html",
            "./%2E%2E/%2e%2e/outside/dotdot.html",
            "guide.html/../guide.html",
        ]
        site.page("/docs/", html("Handbook", "Start.", links))
        listed = {f.rel_path for f in _source(site, tmp_path).list_files()}
    assert "/outside/dotdot.html" not in {path for _, path, _ in site.requests}
    assert not any(".." in path for path in listed)
    assert "guide.html" in listed


def test_two_addresses_of_one_path_are_both_listed_under_paths_of_their_own(
    tmp_path: Path,
) -> None:
    with serve(_site()) as site:
        site.page("/docs/about", html("About", "Without an extension."))
        site.page("/docs/about.html", html("About", "With one."))
        site.page("/docs/team/", html("Team", "A folder's page."))
        site.page("/docs/team/index.html", html("Team", "Its index."))
        links = ["about", "about.html", "team/", "team/index.html"]
        site.page("/docs/", html("Handbook", "Start.", links))
        source = _source(site, tmp_path)
        listed = {f.rel_path for f in source.list_files()}
        texts = {path: source.read_bytes(path) for path in listed}
    about = sorted(path for path in listed if path.startswith("about"))
    assert len(about) == 2 and "about.html" in about
    assert {b"Without an extension." in texts[p] for p in about} == {True, False}
    assert len([path for path in listed if path.startswith("team/index")]) == 2


def test_links_that_are_not_urls_are_left_and_the_crawl_goes_on(tmp_path: Path) -> None:
    with serve(_site()) as site:
        site.page(
            "/docs/",
            '<html><body><a href="http://[::1">broken</a><a href="guide\x01.html">ctl</a>'
            '<a href="guide.html">fine</a></body></html>',
        )
        listed = {f.rel_path for f in _source(site, tmp_path).list_files()}
    assert "guide.html" in listed


def test_compressed_robots_and_sitemaps_are_read_only_up_to_their_caps(tmp_path: Path) -> None:
    import tracemalloc

    site = _site()
    site.robots = None
    site.bomb("/robots.txt", 256)
    site.bomb("/sitemap.xml", 256)
    with serve(site):
        tracemalloc.start()
        try:
            listed = {f.rel_path for f in _source(site, tmp_path, max_bytes=2**20).list_files()}
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert "guide.html" in listed
    assert peak < 128 * 2**20  # 256 MiB each, decompressed whole


def test_a_page_that_drips_is_given_up_at_its_deadline(tmp_path: Path) -> None:
    import time

    with serve(_site()) as site:
        site.page("/docs/", html("Handbook", "Start.", ["slow.html", "guide.html"]))
        site.page("/docs/slow.html", "x" * 40)
        site.drip["/docs/slow.html"] = 0.1
        started = time.monotonic()
        source = _source(site, tmp_path, page_seconds=0.5)
        listed = {f.rel_path: f for f in source.list_files()}
        took = time.monotonic() - started
        with pytest.raises(SourceError, match="deadline"):
            source.read_bytes("slow.html")
    assert took < 3.5  # the drip alone would take 4 s
    assert "guide.html" in listed


def test_the_saved_crawl_state_keeps_no_links(tmp_path: Path) -> None:
    with serve(_site()) as site:
        many = [f"page{i}.html" for i in range(300)]
        site.page("/docs/", html("Handbook", "Start.", ["guide.html", *many]))
        source = _source(site, tmp_path, max_pages=20)
        first = {f.rel_path for f in source.list_files()}
        again = {f.rel_path for f in source.list_files()}  # index answers 304: links re-read
    state = (tmp_path / "state.json").read_text()
    assert "page299.html" not in state
    assert "guide.html" in first and first == again


def test_a_crawl_connects_to_no_loopback_or_private_address_a_setting_does_not_name(
    tmp_path: Path,
) -> None:
    with serve(_site()) as site:
        port = site.base_url.rsplit(":", 1)[1]
        for start in (f"{site.base_url}/docs/", f"http://localhost:{port}/docs/"):
            connector = WebSiteConnector(start, tmp_path / "pages", retry=FAST)
            source = ConnectorSource(connector, tmp_path / "state.json", anyone_default="public")
            with pytest.raises(SourceError, match="LOREHOUSE_WEB_ALLOWED_NETWORKS"):
                list(source.list_files())
        assert site.requests == []
        named = WebSiteConnector(
            f"http://localhost:{port}/docs/",
            tmp_path / "p2",
            retry=FAST,
            allowed_networks="127.0.0.0/8",
        )
        listed = ConnectorSource(named, tmp_path / "s2.json", anyone_default="public")
        assert "guide.html" in {f.rel_path for f in listed.list_files()}
