"""The Confluence connector against a local server speaking Confluence's REST API, Cloud and
Data Center: pages with their paths, restrictions and space permissions as groups, edits,
deletions and restriction changes at the next sync, and faults."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lorehouse.errors import SourceError
from lorehouse.models import NOBODY_GROUP
from lorehouse.sources.confluence import ConfluenceConnector
from lorehouse.sources.connectors import ConnectorSource, PermissionMap, RetryPolicy
from tests.confluence_server import Wiki, serve

FAST = RetryPolicy(attempts=3, backoff_seconds=0.01, max_wait_seconds=1.0)
MAP = {
    "groups": {"confluence-users": "staff", "hr-team": "hr", "legal": "legal"},
    "users": {"5b10-sara": ["sara"]},
}


def _wiki(cloud: bool) -> Wiki:
    wiki = Wiki(cloud=cloud)
    wiki.space_groups = {"ENG": ["confluence-users"], "HR": ["confluence-users"]}
    wiki.add("1", "ENG", "Runbooks", "<p>How we run things.</p>")
    wiki.add("2", "ENG", "On-call", "<p>Page the on-call engineer.</p>", parent="1")
    wiki.add("3", "HR", "Salaries", "<p>Bands by level.</p>")
    wiki.add("4", "HR", "Level 5", "<p>EUR 98,000.</p>", parent="3")
    wiki.add("5", "HR", "Offers", "<p>Offer letters.</p>", parent="3")
    wiki.restrict("3", groups=["hr-team", "legal"])
    wiki.restrict("4", groups=["hr-team"], users=["5b10-sara"])
    return wiki


def _source(wiki: Wiki, tmp_path: Path) -> ConnectorSource:
    connector = ConfluenceConnector(
        wiki.base_url + wiki.root,
        ["ENG", "HR"],
        cloud=wiki.cloud,
        token=wiki.token,
        email="indexer@example.com" if wiki.cloud else None,
        retry=FAST,
    )
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "map.json").write_text(json.dumps(MAP))
    return ConnectorSource(
        connector, tmp_path / "state.json", PermissionMap.load(tmp_path / "map.json")
    )


@pytest.mark.parametrize("cloud", [True, False], ids=["cloud", "data-center"])
def test_pages_are_listed_with_paths_and_the_groups_every_level_allows(
    tmp_path: Path, cloud: bool
) -> None:
    with serve(_wiki(cloud)) as wiki:
        source = _source(wiki, tmp_path)
        listed = {f.rel_path: f.acl_groups for f in source.list_files()}
        page = source.read_bytes("ENG/Runbooks/On-call.html").decode()
    assert listed == {
        "ENG/Runbooks.html": ("staff",),
        "ENG/Runbooks/On-call.html": ("staff",),
        "HR/Salaries.html": ("hr", "legal"),
        # Its own restriction and its parent's both apply: only hr-team passes both.
        "HR/Salaries/Level 5.html": ("hr",),
        "HR/Salaries/Offers.html": ("hr", "legal"),
    }
    assert "<h1>On-call</h1><p>Page the on-call engineer.</p>" in page
    assert len([p for p in wiki.requests if "restriction" in p]) == 5


def test_the_next_sync_sees_edits_deletions_and_restriction_changes(tmp_path: Path) -> None:
    with serve(_wiki(cloud=True)) as wiki:
        source = _source(wiki, tmp_path)
        first = {f.rel_path: f for f in source.list_files()}
        wiki.edit("2", "<p>Page the on-call engineer, then the lead.</p>")
        del wiki.pages["5"]
        wiki.restrict("1", groups=["legal"])  # narrows the whole Runbooks tree
        second = {f.rel_path: f for f in source.list_files()}
        assert b"then the lead" in source.read_bytes("ENG/Runbooks/On-call.html")
    assert "HR/Salaries/Offers.html" not in second
    assert second["ENG/Runbooks/On-call.html"].version != first["ENG/Runbooks/On-call.html"].version
    assert second["ENG/Runbooks/On-call.html"].acl_groups == ("legal",)
    assert second["ENG/Runbooks.html"].modified_at == first["ENG/Runbooks.html"].modified_at


def test_faults_are_waited_out_or_recorded_against_their_page(tmp_path: Path) -> None:
    with serve(_wiki(cloud=False)) as wiki:
        source = _source(wiki, tmp_path)
        wiki.throttle = 2  # 429 with Retry-After, twice
        listed = {f.rel_path: f for f in source.list_files()}
        assert len(listed) == 5
        del wiki.pages["2"]  # gone between listing and fetching
        with pytest.raises(SourceError, match=r"On-call.html: .*404"):
            source.read_bytes("ENG/Runbooks/On-call.html")
        wiki.token = "rotated"  # the configured token no longer works: the sync says so
        with pytest.raises(SourceError, match="401"):
            list(source.list_files())


def test_a_page_whose_restrictions_cannot_be_read_is_readable_by_nobody(tmp_path: Path) -> None:
    wiki = _wiki(cloud=True)
    wiki.unreadable.add("3")
    with serve(wiki):
        listed = {f.rel_path: f.acl_groups for f in _source(wiki, tmp_path).list_files()}
    assert listed["HR/Salaries.html"] == (NOBODY_GROUP,)
    assert listed["HR/Salaries/Level 5.html"] == (NOBODY_GROUP,)  # below it, too
    assert listed["ENG/Runbooks.html"] == ("staff",)


def test_the_source_setting_builds_the_connector_with_its_token_and_map(
    tmp_path: Path,
) -> None:
    """What a deployment configures: the source URI, the token and the permission map, as
    the pipeline's composition root reads them."""
    from lorehouse.settings import Settings
    from lorehouse.stages.inventory import run_inventory
    from lorehouse.stores.duckdb_store import DuckDBStore
    from lorehouse.wiring import Lorehouse

    (tmp_path / "map.json").write_text(json.dumps(MAP))
    with serve(_wiki(cloud=False)) as wiki:
        settings = Settings(
            source_uri=f"confluence+{wiki.base_url}/confluence?spaces=HR",
            confluence_token=wiki.token,
            confluence_cloud=False,
            source_permission_map=tmp_path / "map.json",
            data_dir=tmp_path / "data",
        )
        store = DuckDBStore(tmp_path / "store.duckdb")
        run_inventory(Lorehouse(settings).document_source(), store, max_file_bytes=1 << 20)
    rows = {
        r["rel_path"]: list(r["acl_groups"])
        for r in store.table("documents_raw").to_dict("records")
    }
    assert rows == {
        "HR/Salaries.html": ["hr", "legal"],
        "HR/Salaries/Level 5.html": ["hr"],
        "HR/Salaries/Offers.html": ["hr", "legal"],
    }
    assert (tmp_path / "data" / "connectors").is_dir()


def test_two_pages_one_path_apart_keep_their_own_text_and_access(tmp_path: Path) -> None:
    wiki = _wiki(cloud=True)
    wiki.add("6", "HR", "Budget/2027", "<p>HR-only budget: EUR 4.1m.</p>")
    wiki.add("7", "HR", "Budget_2027", "<p>The public budget summary.</p>")
    wiki.restrict("6", groups=["hr-team"])
    with serve(wiki):
        source = _source(wiki, tmp_path)
        listed = {f.rel_path: f.acl_groups for f in source.list_files()}
        # A fresh source, as the parse stage opens, reads by the same assignment.
        fresh = _source(wiki, tmp_path)
        texts = {path: fresh.read_bytes(path) for path in listed if "Budget" in path}
    budget = {p: g for p, g in listed.items() if "Budget" in p}
    assert len(budget) == 2
    for path, groups in budget.items():
        assert (b"HR-only" in texts[path]) == (groups == ("hr",))


def test_a_restriction_answering_a_sign_in_page_fails_closed_and_the_sync_goes_on(
    tmp_path: Path,
) -> None:
    wiki = _wiki(cloud=True)
    wiki.html_restrictions.add("2")
    with serve(wiki):
        listed = {f.rel_path: f.acl_groups for f in _source(wiki, tmp_path).list_files()}
    assert listed["ENG/Runbooks/On-call.html"] == (NOBODY_GROUP,)
    assert listed["ENG/Runbooks.html"] == ("staff",)


@pytest.mark.parametrize("cloud", [True, False], ids=["cloud", "data-center"])
def test_next_links_to_another_origin_get_no_token_and_endless_ones_end(
    tmp_path: Path, cloud: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lorehouse.sources import connectors

    with serve(Wiki(cloud=cloud)) as elsewhere, serve(_wiki(cloud)) as wiki:
        wiki.next_origin = elsewhere.base_url
        with pytest.raises(SourceError, match="leads off"):
            list(_source(wiki, tmp_path / "a").list_files())
        assert elsewhere.requests == []
        wiki.next_origin = ""
        wiki.endless = True
        monkeypatch.setattr(connectors, "MAX_LIST_PAGES", 20)
        with pytest.raises(SourceError, match="runs past 20 pages"):
            list(_source(wiki, tmp_path / "b").list_files())
    assert len(wiki.requests) < 30
