"""The Google Drive connector against a local server speaking Drive v3: the first walk, the
change feed after it, sharing as groups, and the faults it records per file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lorehouse.errors import SourceError
from lorehouse.models import NOBODY_GROUP
from lorehouse.sources.connectors import ConnectorSource, PermissionMap, RetryPolicy
from lorehouse.sources.gdrive import FOLDER, GoogleDriveConnector
from tests.drive_server import Drive, serve

FAST = RetryPolicy(attempts=3, backoff_seconds=0.01, max_wait_seconds=1.0)
GOOGLE_DOC = "application/vnd.google-apps.document"


def _drive() -> Drive:
    drive = Drive()
    drive.add("policies", "Policies", "root", mime=FOLDER)
    drive.add("travel", "Travel", "policies", mime=FOLDER)
    drive.add("f-hotels", "hotels.md", "travel", b"# Hotels\nCAD 240 a night.")
    drive.add("f-leave", "Leave", "policies", b"DOCX bytes", mime=GOOGLE_DOC)
    drive.add("f-pay", "pay.md", "policies", b"# Pay\nBands by level.")
    drive.add("f-elsewhere", "other.md", "root", b"# Not in the folder")
    drive.share("f-hotels", type="domain", domain="example.com")
    drive.share("f-leave", type="anyone")
    drive.share("f-pay", type="group", emailAddress="hr@example.com")
    return drive


def _source(drive: Drive, tmp_path: Path, **map_: object) -> ConnectorSource:
    key = drive.service_account(tmp_path / "key.json")
    connector = GoogleDriveConnector("policies", key, api_url=drive.base_url, retry=FAST)
    (tmp_path / "map.json").write_text(json.dumps(map_))
    permissions = PermissionMap.load(tmp_path / "map.json")
    return ConnectorSource(connector, tmp_path / "state.json", permissions)


def test_the_first_sync_walks_the_folder_and_maps_sharing_to_groups(tmp_path: Path) -> None:
    with serve(_drive()) as drive:
        source = _source(
            drive, tmp_path, domains={"example.com": "staff"}, groups={"hr@example.com": "hr"}
        )
        listed = {f.rel_path: f for f in source.list_files()}
        assert source.read_bytes("Leave.docx") == b"DOCX bytes"  # a Google Doc, exported
        assert source.read_bytes("Travel/hotels.md").startswith(b"# Hotels")
    assert set(listed) == {"Travel/hotels.md", "Leave.docx", "pay.md"}
    assert listed["Travel/hotels.md"].acl_groups == ("staff",)
    assert listed["pay.md"].acl_groups == ("hr",)
    # "Anyone with the link" is not mapped, so nobody: never the whole company by default.
    assert listed["Leave.docx"].acl_groups == (NOBODY_GROUP,)
    assert "/drive/v3/changes/startPageToken" in drive.requests


def test_later_syncs_read_only_the_change_feed(tmp_path: Path) -> None:
    with serve(_drive()) as drive:
        source = _source(drive, tmp_path, groups={"hr@example.com": "hr", "all@example.com": "all"})
        first = {f.rel_path: f for f in source.list_files()}
        drive.requests.clear()
        drive.edit("f-hotels", b"# Hotels\nCAD 260 a night.")
        drive.delete("f-leave")
        drive.move("f-pay", "root")  # out of the folder: gone from the source
        drive.add("f-new", "visas.md", "travel", b"# Visas")
        drive.share("f-new", type="group", emailAddress="all@example.com")
        second = {f.rel_path: f for f in source.list_files()}
        assert source.read_bytes("Travel/hotels.md").endswith(b"CAD 260 a night.")
    assert set(second) == {"Travel/hotels.md", "Travel/visas.md"}
    assert second["Travel/hotels.md"].version != first["Travel/hotels.md"].version
    assert second["Travel/visas.md"].acl_groups == ("all",)
    assert "/drive/v3/files" not in drive.requests  # no second walk
    assert drive.requests.count("/drive/v3/changes") >= 3  # the feed, page by page


def test_a_sharing_change_moves_only_the_groups_not_the_content(tmp_path: Path) -> None:
    with serve(_drive()) as drive:
        source = _source(drive, tmp_path, groups={"hr@example.com": "hr", "eng@example.com": "eng"})
        before = {f.rel_path: f for f in source.list_files()}["pay.md"]
        drive.share("f-pay", type="group", emailAddress="eng@example.com")
        after = {f.rel_path: f for f in source.list_files()}["pay.md"]
    assert (after.size_bytes, after.modified_at) == (before.size_bytes, before.modified_at)
    assert (before.acl_groups, after.acl_groups) == (("hr",), ("eng", "hr"))


def test_faults_are_waited_out_or_recorded_against_their_file(tmp_path: Path) -> None:
    with serve(_drive()) as drive:
        drive.unreadable_permissions.add("f-pay")
        source = _source(drive, tmp_path, domains={"example.com": "staff"})
        drive.throttle = 2  # 429 with Retry-After, twice
        listed = {f.rel_path: f for f in source.list_files()}
        assert listed["pay.md"].acl_groups == (NOBODY_GROUP,)  # fail closed
        drive.expire_tokens()  # the next call gets 401, renews the token, and goes on
        assert source.read_bytes("Travel/hotels.md").startswith(b"# Hotels")
        issued = drive.issued
        del drive.files["f-hotels"]  # gone from the service: read once, its bytes are kept
        assert source.read_bytes("Travel/hotels.md").startswith(b"# Hotels")
        unread = next(path for path in listed if path.endswith(".md") and "hotels" not in path)
        drive.files.clear()  # vanishes between listing and fetching
        with pytest.raises(SourceError, match=rf"{unread}: .*404 notFound"):
            source.read_bytes(unread)
    assert issued == 2
