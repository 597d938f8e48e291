"""Several sources as one: each under its name in the paths, read and addressed through it,
with each source's own access rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lorehouse.errors import SourceError
from lorehouse.settings import Settings
from lorehouse.sources.composite import CompositeSource, named_sources
from lorehouse.stages.inventory import InventoryReport, run_inventory
from lorehouse.stores.duckdb_store import DuckDBStore
from lorehouse.wiring import Lorehouse
from tests.web_site import Site, html, serve


def test_a_source_setting_names_one_source_or_several() -> None:
    assert named_sources("/data/docs") is None
    assert named_sources("https://example.com/wiki?spaces=ENG") is None
    assert named_sources("wiki=confluence+https://x.net/wiki?spaces=ENG,HR files=s3://b/p") == {
        "wiki": "confluence+https://x.net/wiki?spaces=ENG,HR",
        "files": "s3://b/p",
    }
    with pytest.raises(SourceError, match="NAME=URI"):
        named_sources("wiki=https://x.net /data/docs")
    with pytest.raises(SourceError, match="two sources are named 'a'"):
        named_sources("a=/x a=/y")


def test_two_sources_share_one_inventory_each_under_its_name(tmp_path: Path) -> None:
    share = tmp_path / "share"
    (share / "hr").mkdir(parents=True)
    (share / "hr" / "bands.md").write_text("# Bands\nLevel 5 earns EUR 98,000.")
    (share / "hr" / "_access.json").write_text(json.dumps({"groups": ["hr"]}))
    site = Site()
    site.page("/handbook/", html("Handbook", "Hotels up to CAD 240 a night."))
    with serve(site):
        settings = Settings(
            source_uri=f"files={share} site={site.base_url}/handbook/", data_dir=tmp_path / "data"
        )
        source = Lorehouse(settings).document_source()
        assert isinstance(source, CompositeSource)
        store = DuckDBStore(tmp_path / "store.duckdb")
        run_inventory(source, store, max_file_bytes=1 << 20)
        rows = {r["rel_path"]: r for r in store.table("documents_raw").to_dict("records")}
        assert source.read_bytes("site/index.html").count(b"CAD 240") == 1
    assert set(rows) == {"files/hr/bands.md", "site/index.html"}
    assert list(rows["files/hr/bands.md"]["acl_groups"]) == ["hr"]  # the folder's access file
    assert list(rows["site/index.html"]["acl_groups"]) == []  # a public site
    assert rows["site/index.html"]["source_uri"] == f"{site.base_url}/handbook/"
    with pytest.raises(SourceError, match="in none of the sources"):
        source.read_bytes("elsewhere/x.md")


def test_each_source_syncs_at_its_own_pace_and_one_down_keeps_its_listing(tmp_path: Path) -> None:
    wiki, blog = Site(), Site()
    wiki.page("/w/", html("Wiki", "Expenses over EUR 5,000 need the CFO."))
    blog.page("/b/", html("Blog", "Hotels up to CAD 240 a night."))
    with serve(wiki), serve(blog):
        settings = Settings(
            source_uri=f"wiki={wiki.base_url}/w/ blog={blog.base_url}/b/",
            data_dir=tmp_path / "data",
            source_sync_minutes="blog=60",
        )
        store = DuckDBStore(tmp_path / "store.duckdb")

        def inventory() -> InventoryReport:
            source = Lorehouse(settings).document_source()
            return run_inventory(source, store, max_file_bytes=1 << 20)

        first = inventory()
        blog.requests.clear()
        wiki.robots_status = 503  # the wiki's server is down
        wiki.page("/w/new.html", html("New", "Never listed while the wiki is down."))
        second = inventory()
        listed = set(store.table("documents_raw")["rel_path"])
        wiki.robots_status = 200
        third = inventory()
    assert {name: sync.outcome for name, sync in first.syncs.items()} == {
        "wiki": "synced",
        "blog": "synced",
    }
    # The blog synced less than its hour ago: not asked at all.
    assert second.syncs["blog"].outcome == "not due" and blog.requests == []
    assert second.syncs["blog"].items == 1
    # The wiki kept what it listed last: nothing left the index, and the failure is named.
    assert second.syncs["wiki"].outcome == "failed"
    assert "robots.txt" in (second.syncs["wiki"].error or "")
    assert second.removed == 0 and listed == {"wiki/index.html", "blog/index.html"}
    # Once it answers again, its failure is cleared; the blog is still not due.
    assert third.syncs["wiki"].outcome == "synced" and third.syncs["wiki"].error is None
    assert third.syncs["blog"].outcome == "not due"


def test_a_service_answering_nonsense_fails_alone_and_a_local_restriction_still_applies(
    tmp_path: Path,
) -> None:
    from lorehouse.sources.connectors import ConnectorSource, PermissionMap, RetryPolicy
    from lorehouse.sources.local import LocalFolderSource
    from lorehouse.sources.sharepoint import SharePointConnector
    from tests.graph_server import Tenant
    from tests.graph_server import serve as serve_graph

    share = tmp_path / "share"
    share.mkdir()
    (share / "india.md").write_text("# India\nThe office opens at nine.")
    tenant = Tenant(drives={"d-docs": "Documents"})
    tenant.add("i-a", "d-docs", "a.md", "", b"# A\nShared with the organisation.")
    tenant.share("i-a", {"roles": ["read"], "link": {"scope": "organization", "type": "view"}})
    store = DuckDBStore(tmp_path / "store.duckdb")
    with serve_graph(tenant):
        connector = SharePointConnector(
            "site-1", "t", "app", tenant.secret, tenant.base_url, tenant.base_url,
            retry=RetryPolicy(attempts=2, backoff_seconds=0.01),
        )  # fmt: skip
        permissions = PermissionMap(domains={"organization": "staff"})
        sp = ConnectorSource(connector, tmp_path / "sp.json", permissions)
        source = CompositeSource({"files": LocalFolderSource(share), "sp": sp})
        run_inventory(source, store, max_file_bytes=1 << 20)
        tenant.tokenless = True  # a sign-in answer without its token: not the API's promise
        connector._token = ""
        (share / "india.md.meta.json").write_text(json.dumps({"groups": ["india"]}))
        run_inventory(source, store, max_file_bytes=1 << 20)
    rows = {r["rel_path"]: r for r in store.table("documents_raw").to_dict("records")}
    assert list(rows["files/india.md"]["acl_groups"]) == ["india"]
    assert list(rows["sp/Documents/a.md"]["acl_groups"]) == ["staff"]  # as last known
    assert sp.last_sync is not None and sp.last_sync.outcome == "failed"
    assert "access_token" in (sp.last_sync.error or "")
