"""The SharePoint connector against a local server speaking Microsoft Graph: libraries read
by delta, sharing as groups, the download redirect, and faults."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lorehouse.errors import SourceError
from lorehouse.models import NOBODY_GROUP
from lorehouse.sources.connectors import ConnectorSource, PermissionMap, RetryPolicy
from lorehouse.sources.sharepoint import SharePointConnector
from tests.graph_server import Tenant, serve

FAST = RetryPolicy(attempts=3, backoff_seconds=0.01, max_wait_seconds=1.0)
MAP = {
    "users": {"ana@contoso.com": ["finance"]},
    "groups": {"g-eng": "engineering", "Team Site Members": "staff"},
    "domains": {"organization": "staff"},
}


def _tenant() -> Tenant:
    tenant = Tenant(drives={"d-docs": "Documents", "d-hr": "HR"})
    tenant.add("f-policies", "d-docs", "Policies", "")
    tenant.add("i-travel", "d-docs", "travel.md", "f-policies", b"# Travel\nCAD 240 a night.")
    tenant.add("i-deploy", "d-docs", "deploy.md", "", b"# Deploys\nFridays are frozen.")
    tenant.add("i-bands", "d-hr", "bands.md", "", b"# Bands\nLevel 5: EUR 98,000.")
    tenant.share("i-travel", {"roles": ["read"], "link": {"scope": "organization", "type": "view"}})
    tenant.share("i-deploy", {"roles": ["read"], "grantedToV2": {"group": {"id": "g-eng"}}})
    tenant.share(
        "i-bands",
        {"roles": ["write"], "grantedToV2": {"user": {"id": "u1", "email": "ana@contoso.com"}}},
    )
    return tenant


def _source(tenant: Tenant, tmp_path: Path, secret: str | None = None) -> ConnectorSource:
    connector = SharePointConnector(
        "contoso.sharepoint.com,site-guid,web-guid",
        tenant_id="contoso-tenant",
        client_id="app",
        client_secret=secret or tenant.secret,
        api_url=tenant.base_url,
        login_url=tenant.base_url,
        retry=FAST,
    )
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "map.json").write_text(json.dumps(MAP))
    permissions = PermissionMap.load(tmp_path / "map.json")
    return ConnectorSource(connector, tmp_path / "state.json", permissions)


def test_libraries_are_enumerated_with_their_sharing_as_groups(tmp_path: Path) -> None:
    with serve(_tenant()) as tenant:
        source = _source(tenant, tmp_path)
        listed = {f.rel_path: f.acl_groups for f in source.list_files()}
        # Content comes by the download redirect, read without the token.
        assert source.read_bytes("Documents/Policies/travel.md").startswith(b"# Travel")
    assert listed == {
        "Documents/Policies/travel.md": ("staff",),
        "Documents/deploy.md": ("engineering",),
        "HR/bands.md": ("finance",),
    }


def test_the_next_sync_reads_the_delta_link_only(tmp_path: Path) -> None:
    with serve(_tenant()) as tenant:
        source = _source(tenant, tmp_path)
        first = {f.rel_path: f for f in source.list_files()}
        tenant.requests.clear()
        tenant.edit("i-deploy", b"# Deploys\nFridays are frozen after noon.")
        tenant.delete("i-bands")
        tenant.share("i-travel", {"roles": ["read"], "link": {"scope": "anonymous"}})
        second = {f.rel_path: f for f in source.list_files()}
        delta_calls = [p for p in tenant.requests if p.endswith("/delta")]
    assert set(second) == {"Documents/Policies/travel.md", "Documents/deploy.md"}
    assert second["Documents/deploy.md"].version != first["Documents/deploy.md"].version
    # Anyone with the link is mapped to no group here: the organisation keeps the file.
    assert second["Documents/Policies/travel.md"].acl_groups == ("staff",)
    assert len(delta_calls) == 2  # one page per library since the last sync


def test_a_library_added_after_the_first_sync_is_read_and_a_removed_one_leaves(
    tmp_path: Path,
) -> None:
    with serve(_tenant()) as tenant:
        source = _source(tenant, tmp_path)
        assert len(list(source.list_files())) == 3
        tenant.drives["d-legal"] = "Legal"
        tenant.add("i-nda", "d-legal", "nda.md", "", b"# NDA\nTwo years.")
        tenant.share("i-nda", {"roles": ["read"], "grantedToV2": {"group": {"id": "g-eng"}}})
        tenant.requests.clear()
        added = {f.rel_path: f.acl_groups for f in source.list_files()}
        # The new library is enumerated; the others are read from their delta links.
        enumerations = [p for p in tenant.requests if p.endswith("/delta")]
        assert source.read_bytes("Legal/nda.md") == b"# NDA\nTwo years."
        del tenant.drives["d-hr"]
        removed = {f.rel_path for f in source.list_files()}
    assert added["Legal/nda.md"] == ("engineering",)
    assert set(added) == {
        "Documents/Policies/travel.md", "Documents/deploy.md", "HR/bands.md", "Legal/nda.md"
    }  # fmt: skip
    assert len(enumerations) == 3
    assert removed == {"Documents/Policies/travel.md", "Documents/deploy.md", "Legal/nda.md"}


def test_faults_are_waited_out_resynced_or_recorded(tmp_path: Path) -> None:
    with serve(_tenant()) as tenant:
        source = _source(tenant, tmp_path)
        tenant.throttle = 2  # 429 with Retry-After, twice
        assert len(list(source.list_files())) == 3
        tenant.tokens.clear()  # expired: renewed once on the 401
        tenant.edit("i-travel", b"# Travel\nCAD 260 a night.")
        tenant.oldest_token = len(tenant.log) + 1  # the saved delta link is too old: 410
        assert len(list(source.list_files())) == 3
        assert source.read_bytes("Documents/Policies/travel.md").endswith(b"CAD 260 a night.")
        del tenant.items["i-deploy"]  # gone between listing and fetching
        with pytest.raises(SourceError, match=r"deploy.md: HTTP 404 itemNotFound"):
            source.read_bytes("Documents/deploy.md")
    assert tenant.issued == 2


def test_a_wrong_secret_stops_the_sync_and_unreadable_sharing_reads_as_nobody(
    tmp_path: Path,
) -> None:
    with serve(_tenant()) as tenant:
        with pytest.raises(SourceError, match="AADSTS7000215"):
            list(_source(tenant, tmp_path / "a", secret="wrong").list_files())
        tenant.forbidden.add("i-bands")
        listed = {f.rel_path: f.acl_groups for f in _source(tenant, tmp_path / "b").list_files()}
    assert listed["HR/bands.md"] == (NOBODY_GROUP,)
    assert listed["Documents/deploy.md"] == ("engineering",)


def test_two_items_of_one_name_in_a_folder_serve_their_own_bytes(tmp_path: Path) -> None:
    tenant = _tenant()
    tenant.add("i-dup-public", "d-docs", "dup.md", "f-policies", b"# Dup\nThe public text.")
    tenant.add("i-dup-finance", "d-docs", "dup.md", "f-policies", b"# Dup\nFinance only: 7%.")
    link = {"roles": ["read"], "link": {"scope": "organization", "type": "view"}}
    tenant.share("i-dup-public", link)
    ana = {"user": {"id": "u1", "email": "ana@contoso.com"}}
    tenant.share("i-dup-finance", {"roles": ["read"], "grantedToV2": ana})
    with serve(tenant):
        listed = {f.rel_path: f.acl_groups for f in _source(tenant, tmp_path).list_files()}
        fresh = _source(tenant, tmp_path)  # as the parse stage opens it
        dups = {p: fresh.read_bytes(p) for p in listed if p.startswith("Documents/Policies/dup")}
    assert len(dups) == 2
    for path, text in dups.items():
        assert (b"Finance only" in text) == (listed[path] == ("finance",))


def test_an_item_is_downloaded_once_and_read_as_listed(tmp_path: Path) -> None:
    with serve(_tenant()) as tenant:
        tenant.later_content["i-travel"] = b"# Travel\nSomething else entirely."
        source = _source(tenant, tmp_path)
        list(source.list_files())
        first = source.read_bytes("Documents/Policies/travel.md")  # the inventory's read
        again = _source(tenant, tmp_path).read_bytes("Documents/Policies/travel.md")
    assert first == again == b"# Travel\nCAD 240 a night."
    assert tenant.downloads["i-travel"] == 1


def test_names_with_dot_segments_stay_inside_the_source(tmp_path: Path) -> None:
    tenant = _tenant()
    tenant.add("f-up", "d-docs", "..", "")
    tenant.items["f-up"]["folder"] = True
    tenant.add("i-escape", "d-docs", "escape.md", "f-up", b"# Escape\nStays inside.")
    with serve(tenant):
        listed = {f.rel_path for f in _source(tenant, tmp_path).list_files()}
    escape = next(path for path in listed if path.endswith("escape.md"))
    assert ".." not in escape.split("/") and escape.startswith("Documents/")


def test_a_token_answer_without_a_token_or_a_next_link_elsewhere_fails_the_sync(
    tmp_path: Path,
) -> None:
    with serve(Tenant()) as elsewhere, serve(_tenant()) as tenant:
        tenant.tokenless = True
        with pytest.raises(SourceError, match="without an access_token"):
            list(_source(tenant, tmp_path / "a").list_files())
        tenant.tokenless = False
        tenant.next_origin = elsewhere.base_url
        with pytest.raises(SourceError, match="leads off"):
            list(_source(tenant, tmp_path / "b").list_files())
    assert elsewhere.requests == []
