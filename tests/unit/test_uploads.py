"""The upload folder: what an upload is stored as, for whom, and what is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lorehouse.errors import SourceError
from lorehouse.inventory import AccessRules
from lorehouse.models import NOBODY_GROUP
from lorehouse.settings import Settings
from lorehouse.sources.local import LocalFolderSource
from lorehouse.sources.uploads import (
    MAX_NAME_CHARS,
    Refusal,
    UploadFolder,
    UploadRefused,
    chosen_groups,
    kept_name,
)
from lorehouse.wiring import Lorehouse


@pytest.mark.parametrize(
    ("sent", "kept"),
    [
        ("Lab safety.docx", "Lab safety.docx"),
        ("../../etc/passwd.md", "passwd.md"),
        ("C:\\Users\\mia\\Report Q3.pdf", "Report Q3.pdf"),
        (".bashrc.txt", "bashrc.txt"),
        ("notes\x00\x1b.md", "notes__.md"),
        ("Cafe\u0301.md", "Caf\u00e9.md"),
        ("a:b*c?.txt", "a_b_c_.txt"),
    ],
)
def test_a_sent_name_becomes_one_plain_file_name(sent: str, kept: str) -> None:
    assert kept_name(sent) == kept


def test_a_long_name_keeps_its_start_and_its_type() -> None:
    kept = kept_name("q" * 300 + ".xlsx")
    assert len(kept) == MAX_NAME_CHARS
    assert kept.endswith(".xlsx")


@pytest.mark.parametrize("sent", ["", "...", "a/", "_access.json", "report.pdf.meta.json"])
def test_names_that_are_no_document_are_refused(sent: str) -> None:
    with pytest.raises(UploadRefused) as refused:
        kept_name(sent)
    assert refused.value.refusal is Refusal.BAD_NAME


def test_an_upload_is_for_some_of_the_uploaders_own_groups_and_never_public() -> None:
    assert chosen_groups([" lab ", "research", "lab"], ["research", "lab"]) == ("lab", "research")
    cases = {
        Refusal.NO_GROUPS: ([], []),
        Refusal.BAD_GROUPS: ([" "], ["lab"]),
    }
    for refusal, (chosen, own) in cases.items():
        with pytest.raises(UploadRefused) as refused:
            chosen_groups(chosen, own)
        assert refused.value.refusal is refusal
    with pytest.raises(UploadRefused, match="you are not in hr"):
        chosen_groups(["lab", "hr"], ["lab"])


def test_stored_uploads_are_their_owners_with_their_sidecar_and_a_hiding_folder_rule(
    tmp_path: Path,
) -> None:
    folder = UploadFolder(tmp_path / "uploads", "uploads", max_bytes=1000)
    upload = folder.store("mia", "notes.md", b"# Notes\n", ["lab"], ["lab", "research"])
    assert upload.path == f"uploads/{upload.path.split('/')[1]}/{upload.id}/notes.md"
    stored = folder.root / upload.path.removeprefix("uploads/")
    assert stored.read_bytes() == b"# Notes\n"
    assert json.loads(Path(f"{stored}.meta.json").read_text())["groups"] == ["lab"]
    # No temporary file is left for the inventory to list.
    assert not [p for p in folder.root.rglob(".*")]

    # The access rules the inventory applies: the sidecar's groups; a file that lost its
    # sidecar falls back to the folder's rule, which no caller holds.
    source = LocalFolderSource(folder.root)
    rel_path = upload.path.removeprefix("uploads/")
    rules = AccessRules(source, {"_access.json"}, [])
    assert rules.groups_for(rel_path, has_own_sidecar=True) == ["lab"]
    assert rules.groups_for(rel_path, has_own_sidecar=False) == [NOBODY_GROUP]

    assert folder.uploads("mia") == [upload]
    assert folder.uploads("otto") == []
    assert folder.find("otto", upload.id) is None
    assert folder.find("mia", "../" + upload.id) is None
    assert not folder.delete("otto", upload.id)
    assert folder.delete("mia", upload.id)
    assert not stored.exists()
    assert folder.uploads("mia") == []


def test_a_type_no_parser_reads_or_a_file_past_the_cap_is_refused(tmp_path: Path) -> None:
    folder = UploadFolder(tmp_path / "uploads", "uploads", max_bytes=10)
    for name, data, refusal in [
        ("setup.exe", b"MZ", Refusal.UNREADABLE_TYPE),
        ("archive.zip", b"PK", Refusal.UNREADABLE_TYPE),
        ("big.md", b"x" * 11, Refusal.TOO_LARGE),
    ]:
        with pytest.raises(UploadRefused) as refused:
            folder.store("mia", name, data, ["lab"], ["lab"])
        assert refused.value.refusal is refusal, name
    assert not (tmp_path / "uploads").exists() or folder.uploads("mia") == []


def test_the_upload_folder_is_a_local_folder_the_source_holds(tmp_path: Path) -> None:
    docs, drop = tmp_path / "docs", tmp_path / "drop"

    def folder(source_uri: str, upload_folder: str) -> UploadFolder | None:
        settings = Settings(source_uri=source_uri, upload_folder=upload_folder)
        return Lorehouse(settings).upload_folder()

    lone = folder(str(docs), "uploads/chat")
    assert lone is not None
    assert (lone.root, lone.prefix) == (docs.resolve() / "uploads" / "chat", "uploads/chat")
    named = folder(f"docs={docs} uploads={drop}", "uploads")
    assert named is not None
    assert (named.root, named.prefix) == (drop.resolve(), "uploads")
    assert Lorehouse(Settings(source_uri=str(docs))).upload_folder() is None
    with pytest.raises(SourceError, match="must start with the name of one of the sources"):
        folder(f"docs={docs}", "uploads")
    with pytest.raises(SourceError, match="not a local folder"):
        folder("s3://bucket/docs", "uploads")
    for bad in ["../up", ".uploads", "a//b"]:
        with pytest.raises(ValueError, match="plain folder names"):
            Settings(upload_folder=bad)
