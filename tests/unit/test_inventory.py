"""Inventory: stable ids, content hashes, and access groups from sidecar and folder files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from lorehouse.errors import SourceError
from lorehouse.inventory import document_id, take_inventory
from lorehouse.models import PUBLIC_GROUP, FileType
from lorehouse.sources import LocalFolderSource


def _write(root: Path, rel_path: str, content: bytes | str) -> None:
    path = root / rel_path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content.encode() if isinstance(content, str) else content)


def test_acl_comes_from_sidecar_then_nearest_folder_rule_else_public(tmp_path: Path) -> None:
    _write(tmp_path, "public/guide.md", "# Guide")
    _write(tmp_path, "security/_access.json", json.dumps({"groups": ["security"]}))
    _write(tmp_path, "security/plans/ir.md", "# Incident response")
    _write(tmp_path, "security/open.md", "# Open")
    _write(tmp_path, "security/open.md.meta.json", json.dumps({"groups": ["all-staff", "hr"]}))
    documents = {d.rel_path: d for d in take_inventory(LocalFolderSource(tmp_path)).documents}
    assert set(documents) == {"public/guide.md", "security/plans/ir.md", "security/open.md"}
    assert documents["public/guide.md"].acl_groups == []
    assert documents["security/plans/ir.md"].acl_groups == ["security"]
    assert documents["security/open.md"].acl_groups == ["all-staff", "hr"]


def test_a_malformed_acl_file_hides_its_documents_and_says_why(tmp_path: Path) -> None:
    _write(tmp_path, "secret/_access.json", "{not json")
    _write(tmp_path, "secret/plan.md", "# Plan")
    inventory = take_inventory(LocalFolderSource(tmp_path))
    (document,) = inventory.documents
    assert document.acl_groups and "security" not in document.acl_groups
    assert any("unreadable access file" in w for w in inventory.warnings)


def test_an_acl_file_naming_the_public_group_hides_its_documents(tmp_path: Path) -> None:
    # Every caller holds the public group, so a document "restricted" to it would be public.
    _write(tmp_path, "hr/_access.json", json.dumps({"groups": ["hr", PUBLIC_GROUP]}))
    _write(tmp_path, "hr/salaries.md", "# Salaries")
    inventory = take_inventory(LocalFolderSource(tmp_path))
    (document,) = inventory.documents
    assert document.acl_groups and PUBLIC_GROUP not in document.acl_groups
    assert any("reserved" in w and "hr/_access.json" in w for w in inventory.warnings)


def test_ids_are_stable_and_hashes_follow_content(tmp_path: Path) -> None:
    _write(tmp_path, "a/b.md", "# One")
    first = take_inventory(LocalFolderSource(tmp_path)).documents[0]
    _write(tmp_path, "a/b.md", "# Two")
    second = take_inventory(LocalFolderSource(tmp_path)).documents[0]
    assert first.doc_id == second.doc_id == document_id("a/b.md")
    assert first.content_sha256 != second.content_sha256
    assert first.file_type == FileType.MARKDOWN


def test_unchanged_files_are_not_read_again(tmp_path: Path) -> None:
    _write(tmp_path, "a.md", "# A")
    _write(tmp_path, "b.md", "# B")
    source = LocalFolderSource(tmp_path)
    first = take_inventory(source)
    previous = {d.doc_id: d for d in first.documents}
    os.utime(tmp_path / "b.md", (1_700_000_000, 1_700_000_000))
    second = take_inventory(source, previous)
    assert (first.hashed, second.hashed, second.reused) == (2, 1, 1)


def test_folder_loops_are_not_followed_and_broken_file_links_are_listed(tmp_path: Path) -> None:
    _write(tmp_path, "docs/a.md", "# A")
    _write(tmp_path, ".git/config", "x")
    (tmp_path / "docs" / "loop").symlink_to(tmp_path / "docs", target_is_directory=True)
    (tmp_path / "dangling.md").symlink_to(tmp_path / "missing.md")
    (tmp_path / "self.md").symlink_to(tmp_path / "self.md")
    source = LocalFolderSource(tmp_path)
    documents = take_inventory(source).documents
    # The broken links are documents the owner expects indexed: listed, so that parsing can
    # record them as unreadable; the folder loop is walked once.
    assert [d.rel_path for d in documents] == ["dangling.md", "docs/a.md", "self.md"]
    with pytest.raises(SourceError, match="symbolic links"):
        source.read_bytes("self.md")
