"""Several sources as one: each under its name in the paths, read and addressed through it,
with each source's own access rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lorehouse.errors import SourceError
from lorehouse.settings import Settings
from lorehouse.sources.composite import CompositeSource, named_sources
from lorehouse.stages.inventory import run_inventory
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
