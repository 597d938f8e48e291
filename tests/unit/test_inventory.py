"""Inventory: stable ids, content hashes, access groups from sidecar and folder files, and a
run that holds a batch, not the corpus."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from lorehouse.errors import SourceError
from lorehouse.inventory import document_id
from lorehouse.models import PUBLIC_GROUP, FileType
from lorehouse.sources import LocalFolderSource
from lorehouse.sources.base import SourceFile
from lorehouse.stages.inventory import InventoryReport, run_inventory
from lorehouse.stores.duckdb_store import DuckDBStore


def _write(root: Path, rel_path: str, content: bytes | str) -> None:
    path = root / rel_path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content.encode() if isinstance(content, str) else content)


def _inventory(
    source: LocalFolderSource, store: DuckDBStore, **batches: int
) -> tuple[InventoryReport, dict[str, dict]]:
    """Runs the stage and returns its report and the inventory by path."""
    report = run_inventory(source, store, max_file_bytes=1 << 20, **batches)
    rows = store.table("documents_raw").to_dict("records")
    return report, {row["rel_path"]: row for row in rows}


@pytest.fixture
def store(tmp_path: Path) -> DuckDBStore:
    return DuckDBStore(tmp_path / "store" / "lorehouse.duckdb")


def test_acl_comes_from_sidecar_then_nearest_folder_rule_else_public(
    tmp_path: Path, store: DuckDBStore
) -> None:
    root = tmp_path / "docs"
    _write(root, "public/guide.md", "# Guide")
    _write(root, "security/_access.json", json.dumps({"groups": ["security"]}))
    _write(root, "security/plans/ir.md", "# Incident response")
    _write(root, "security/open.md", "# Open")
    _write(root, "security/open.md.meta.json", json.dumps({"groups": ["all-staff", "hr"]}))
    _write(root, "security/orphan.md.meta.json", "{not json")  # describes no document
    report, documents = _inventory(LocalFolderSource(root), store)
    assert set(documents) == {"public/guide.md", "security/plans/ir.md", "security/open.md"}
    assert list(documents["public/guide.md"]["acl_groups"]) == []
    assert list(documents["security/plans/ir.md"]["acl_groups"]) == ["security"]
    assert list(documents["security/open.md"]["acl_groups"]) == ["all-staff", "hr"]
    assert (report.documents, report.restricted, report.warnings) == (3, 2, [])


def test_a_malformed_acl_file_hides_its_documents_and_says_why_once(
    tmp_path: Path, store: DuckDBStore
) -> None:
    root = tmp_path / "docs"
    _write(root, "secret/_access.json", "{not json")
    for name in ("plan", "budget", "roadmap"):
        _write(root, f"secret/{name}.md", f"# {name}")
    report, documents = _inventory(LocalFolderSource(root), store, batch_documents=1)
    assert all(d["acl_groups"] is not None and len(d["acl_groups"]) for d in documents.values())
    assert all("security" not in d["acl_groups"] for d in documents.values())
    assert len([w for w in report.warnings if "unreadable access file" in w]) == 1


def test_an_acl_file_naming_the_public_group_hides_its_documents(
    tmp_path: Path, store: DuckDBStore
) -> None:
    # Every caller holds the public group, so a document "restricted" to it would be public.
    root = tmp_path / "docs"
    _write(root, "hr/_access.json", json.dumps({"groups": ["hr", PUBLIC_GROUP]}))
    _write(root, "hr/salaries.md", "# Salaries")
    report, documents = _inventory(LocalFolderSource(root), store)
    groups = list(documents["hr/salaries.md"]["acl_groups"])
    assert groups and PUBLIC_GROUP not in groups
    assert any("reserved" in w and "hr/_access.json" in w for w in report.warnings)


def test_ids_are_stable_and_hashes_follow_content(tmp_path: Path, store: DuckDBStore) -> None:
    root = tmp_path / "docs"
    _write(root, "a/b.md", "# One")
    _, first = _inventory(LocalFolderSource(root), store)
    _write(root, "a/b.md", "# Two, longer")
    report, second = _inventory(LocalFolderSource(root), store)
    assert first["a/b.md"]["doc_id"] == second["a/b.md"]["doc_id"] == document_id("a/b.md")
    assert first["a/b.md"]["content_sha256"] != second["a/b.md"]["content_sha256"]
    assert first["a/b.md"]["file_type"] == FileType.MARKDOWN.value
    assert (report.added, report.changed, report.removed) == (0, 1, 0)


class _CountingSource(LocalFolderSource):
    """A folder source that counts which files were read."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.reads: list[str] = []

    def read_bytes(self, rel_path: str) -> bytes:
        self.reads.append(rel_path)
        return super().read_bytes(rel_path)


def test_unchanged_files_are_not_read_again(tmp_path: Path, store: DuckDBStore) -> None:
    root = tmp_path / "docs"
    _write(root, "a.md", "# A")
    _write(root, "b.md", "# B")
    source = _CountingSource(root)
    first, _ = _inventory(source, store)
    source.reads.clear()
    os.utime(root / "b.md", (1_700_000_000, 1_700_000_000))
    second, _ = _inventory(source, store)
    assert (first.hashed, second.hashed, second.reused) == (2, 1, 1)
    assert source.reads == ["b.md"]
    # Touched with the same bytes: read again, but not a change.
    assert (second.added, second.changed, second.removed) == (0, 0, 0)


def test_folder_loops_are_not_followed_and_broken_file_links_are_listed(
    tmp_path: Path, store: DuckDBStore
) -> None:
    root = tmp_path / "docs"
    _write(root, "docs/a.md", "# A")
    _write(root, ".git/config", "x")
    (root / "docs" / "loop").symlink_to(root / "docs", target_is_directory=True)
    (root / "dangling.md").symlink_to(root / "missing.md")
    (root / "self.md").symlink_to(root / "self.md")
    source = LocalFolderSource(root)
    progress: list[tuple[int, int]] = []
    run_inventory(
        source, store, 1 << 20, on_progress=lambda done, total: progress.append((done, total))
    )
    # Links, to files or folders, are listed so that parsing records why they were left;
    # none is followed, so the folder loop is walked once.
    assert store.table("documents_raw", ["rel_path"])["rel_path"].tolist() == [
        "dangling.md",
        "docs/a.md",
        "docs/loop",
        "self.md",
    ]
    assert progress == [(1, 4), (2, 4), (3, 4), (4, 4)]
    for link in ("self.md", "dangling.md", "docs/loop", "docs/loop/a.md"):
        with pytest.raises(SourceError, match="symbolic link"):
            source.read_bytes(link)


def _tree(root: Path) -> None:
    """Nested folder rules, own sidecars, an orphan sidecar, a malformed rule shared by many
    documents, and names whose order differs between bytes and case or accents."""
    _write(root, "_access.json", json.dumps({"groups": ["staff"]}))
    _write(root, "hr/_access.json", json.dumps({"groups": ["hr"]}))
    _write(root, "hr/pay/_access.json", "{broken")
    for index in range(7):
        _write(root, f"hr/pay/slip-{index}.md", f"# Slip {index}")
    _write(root, "hr/leave.md", "# Leave")
    _write(root, "hr/leave.md.meta.json", json.dumps({"groups": ["hr", "leads"]}))
    _write(root, "hr/gone.md.meta.json", json.dumps({"groups": ["x"]}))
    for name in ("B.md", "a.md", "a-b/x.md", "a/b.md", "é.md", "e\u0301.md", "z9.md", "z10.md"):
        _write(root, name, f"# {name}")


def test_batch_sizes_do_not_change_the_inventory(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    _tree(root)
    runs = []
    for label, batches in (("small", {"batch_documents": 2, "listing_rows": 3}), ("whole", {})):
        store = DuckDBStore(tmp_path / label / "lorehouse.duckdb")
        progress: list[tuple[int, int]] = []
        report = run_inventory(
            LocalFolderSource(root),
            store,
            1 << 20,
            on_progress=lambda done, total, seen=progress: seen.append((done, total)),
            **batches,
        )
        rows = store.table("documents_raw").drop(columns=["inventoried_at"])
        runs.append((report, rows, progress))
    (small, small_rows, small_progress), (whole, whole_rows, whole_progress) = runs
    assert small_rows.astype(str).equals(whole_rows.astype(str))
    paths = small_rows["rel_path"].tolist()
    assert paths == sorted(paths) and len(paths) == 16
    assert small.warnings == whole.warnings
    assert len(small.warnings) == 1 and "hr/pay/_access.json" in small.warnings[0]
    assert small_progress == whole_progress == [(n, 16) for n in range(1, 17)]
    groups = {row.rel_path: list(row.acl_groups) for row in small_rows.itertuples()}
    assert groups["hr/leave.md"] == ["hr", "leads"]
    assert groups["hr/pay/slip-3.md"] == ["__unreadable_acl__"]
    assert groups["a/b.md"] == ["staff"]
    assert (small.documents, small.added, small.restricted) == (16, 16, 16)


def test_removed_documents_leave_with_their_parsed_rows(
    tmp_path: Path, stage_tables_store: DuckDBStore
) -> None:
    store = stage_tables_store
    known = store.table("documents_raw", ["rel_path"])["rel_path"].tolist()
    assert len(known) >= 2 and store.row_count("documents_parsed") >= 2
    root = tmp_path / "empty-source"
    root.mkdir()
    _write(root, "new.md", "# New")
    report = run_inventory(LocalFolderSource(root), store, 1 << 20)
    assert (report.documents, report.added, report.removed) == (1, 1, len(known))
    assert store.table("documents_raw", ["rel_path"])["rel_path"].tolist() == ["new.md"]
    assert store.row_count("documents_parsed") == 0


class _FailingSource(LocalFolderSource):
    """Lists part of the tree, then fails, as a network share that drops out does."""

    def list_files(self) -> Iterator[SourceFile]:
        for index, file in enumerate(super().list_files()):
            if index == 3:
                raise SourceError("the share went away")
            yield file


def test_a_run_that_fails_half_way_keeps_the_last_inventory(
    tmp_path: Path, store: DuckDBStore
) -> None:
    root = tmp_path / "docs"
    _tree(root)
    run_inventory(LocalFolderSource(root), store, 1 << 20)
    before = store.table("documents_raw")
    with pytest.raises(SourceError, match="went away"):
        run_inventory(_FailingSource(root), store, 1 << 20, listing_rows=2)
    assert store.table("documents_raw").equals(before)
    with store.connect() as connection:
        staged = connection.execute(
            "SELECT count(*) FROM duckdb_tables() WHERE table_name LIKE 'inventory_staging_%'"
        ).fetchall()[0][0]
    assert staged == 0


def test_tables_left_by_a_killed_run_are_dropped(tmp_path: Path, store: DuckDBStore) -> None:
    with store.connect() as connection:
        connection.execute("CREATE TABLE inventory_staging_deadbeef0000_plan (n BIGINT)")
    root = tmp_path / "docs"
    _write(root, "a.md", "# A")
    report, documents = _inventory(LocalFolderSource(root), store)
    assert report.documents == 1 and set(documents) == {"a.md"}
    with store.connect() as connection:
        names = connection.execute("SELECT table_name FROM duckdb_tables()").fetchall()
    assert not [name for (name,) in names if name.startswith("inventory_staging_")]


def test_a_file_name_that_is_not_utf8_is_listed_and_read_back(
    tmp_path: Path, store: DuckDBStore
) -> None:
    root = tmp_path / "docs"
    _write(root, "a.md", "# A")
    (Path(os.fsdecode(os.fsencode(root) + b"/caf\xe9.md"))).write_text("# Cafe")
    source = LocalFolderSource(root)
    report = run_inventory(source, store, 1 << 20)
    assert report.documents == 2
    names = store.table("documents_raw", ["rel_path"])["rel_path"].tolist()
    assert names == ["a.md", "caf\\xe9.md"]
    assert source.read_bytes("caf\\xe9.md") == b"# Cafe"


def test_an_access_file_edited_relabels_the_chunks_without_chunking_again(
    tmp_path: Path, store: DuckDBStore
) -> None:
    """Who may read a document follows its access file at the next run, however its text
    stands: lost access takes effect without parsing or chunking anything again."""
    from lorehouse.chunking import Chunker
    from lorehouse.embedding.minilm import default_token_counter
    from lorehouse.stages.chunk import run_chunking
    from lorehouse.stages.parse import ParseLimits, run_parse

    root = tmp_path / "docs"
    _write(root, "hr/bands.md", "# Salary bands\n\nLevel 5 earns EUR 98,000 a year.")
    _write(root, "hr/_access.json", json.dumps({"groups": ["all-staff"]}))
    source = LocalFolderSource(root)
    limits = ParseLimits(workers=1, timeout_seconds=60, max_file_bytes=1 << 20)
    chunker = Chunker(256, default_token_counter().count)
    run_inventory(source, store, 1 << 20)
    run_parse(source, store, limits)
    run_chunking(store, chunker)
    _write(root, "hr/_access.json", json.dumps({"groups": ["hr"]}))
    run_inventory(source, store, 1 << 20)
    run_parse(source, store, limits)
    report = run_chunking(store, chunker)
    assert (report.documents_relabeled, report.documents_chunked) == (1, 0)
    assert {tuple(acl) for acl in store.table("chunks")["acl"]} == {("hr",)}
    assert run_chunking(store, chunker).documents_relabeled == 0
