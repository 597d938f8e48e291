"""Inventories a source: one row per file, with content hash, real type and ACL groups.

Hashing is skipped for files whose size and modification time match the previous inventory,
so an unchanged corpus is re-inventoried from its listing alone. The listing is cut into
Arrow batches and each batch of documents is described on its own (`describe_batch`), so
what a run holds in memory is a batch and the folder rules, not the corpus: the store keeps
the rest (`DuckDBStore.inventory_staging`).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import ClassVar

import pyarrow as pa

from lorehouse.errors import SourceError
from lorehouse.models import NOBODY_GROUP, PUBLIC_GROUP, FileType
from lorehouse.sniffing import detect_file_type, extension_type
from lorehouse.sources.base import (
    FOLDER_ACL_FILE,
    SIDECAR_SUFFIX,
    DocumentSource,
    SourceFile,
)
from lorehouse.stages.progress import ProgressCallback

#: A file of the listing as the inventory stages it. Per-document sidecars are staged too
#: (`sidecar`, no id), so whether a document has its own ACL file is a join, not a set of
#: every path held in Python; folder rules (`_access.json`) are few and stay in `Listing`.
LISTING_SCHEMA = pa.schema(
    [
        ("doc_id", pa.string()),
        ("rel_path", pa.string()),
        ("size_bytes", pa.int64()),
        ("modified_at", pa.timestamp("us", "UTC")),
        ("sidecar", pa.bool_()),
        ("acl_groups", pa.list_(pa.string())),
    ]
)

#: A described document, as it goes into the new inventory (the `documents_raw` columns).
INVENTORY_SCHEMA = pa.schema(
    [
        ("doc_id", pa.string()),
        ("source_uri", pa.string()),
        ("rel_path", pa.string()),
        ("file_type", pa.string()),
        ("size_bytes", pa.int64()),
        ("content_sha256", pa.string()),
        ("modified_at", pa.timestamp("us", "UTC")),
        ("acl_groups", pa.list_(pa.string())),
    ]
)


def document_id(rel_path: str) -> str:
    """A stable id from the source-relative path: the same file keeps its id across runs."""
    return hashlib.sha256(rel_path.encode("utf-8")).hexdigest()[:20]


@dataclass
class Listing:
    """What one pass over the source keeps in memory: a count and the folder rules (at most
    one per folder, so a few where documents are a million)."""

    documents: int = 0
    folder_rules: set[str] = field(default_factory=set)


@dataclass
class InventoryTally:
    """Counts kept while documents are described, batch by batch."""

    documents: int = 0
    added: int = 0
    changed: int = 0
    hashed: int = 0
    reused: int = 0
    restricted: int = 0
    by_type: Counter[str] = field(default_factory=Counter)
    warnings: list[str] = field(default_factory=list)


def listing_batches(
    source: DocumentSource, listing: Listing, rows: int = 50_000
) -> Iterator[pa.Table]:
    """The source's files as Arrow tables of at most `rows` rows (`LISTING_SCHEMA`), in
    listing order; folder rules are collected in `listing` instead of being staged."""
    columns: dict[str, list] = {name: [] for name in LISTING_SCHEMA.names}
    for file in source.list_files():
        name = PurePosixPath(file.rel_path).name
        if name == FOLDER_ACL_FILE:
            listing.folder_rules.add(file.rel_path)
            continue
        sidecar = name.endswith(SIDECAR_SUFFIX)
        columns["doc_id"].append(None if sidecar else document_id(file.rel_path))
        columns["rel_path"].append(file.rel_path)
        columns["size_bytes"].append(file.size_bytes)
        columns["modified_at"].append(file.modified_at)
        columns["sidecar"].append(sidecar)
        columns["acl_groups"].append(None if file.acl_groups is None else list(file.acl_groups))
        listing.documents += not sidecar
        if len(columns["rel_path"]) >= rows:
            yield pa.table(columns, schema=LISTING_SCHEMA)
            columns = {name: [] for name in LISTING_SCHEMA.names}
    if columns["rel_path"]:
        yield pa.table(columns, schema=LISTING_SCHEMA)


def describe_batch(
    source: DocumentSource,
    plan: pa.Table,
    acls: AccessRules,
    max_file_bytes: int | None,
    tally: InventoryTally,
    on_progress: ProgressCallback | None = None,
    total: int = 0,
) -> pa.Table:
    """The inventory rows (`INVENTORY_SCHEMA`) of a batch of planned documents, in order.

    `plan` holds the listing's columns and, from the last inventory, whether each document
    was `known`, is `unchanged` (same size and time: trusted without reading) and its
    `prev_file_type` and `prev_content_sha256`. ACL groups are worked out for every
    document, reused ones too, so an access change needs no re-hash: the source's own
    (`acl_groups`, a connector's) where it gave them, else the access files'.
    """
    out: dict[str, list] = {name: [] for name in INVENTORY_SCHEMA.names}
    for row in plan.to_pylist():
        rel_path = row["rel_path"]
        if row["acl_groups"] is not None:
            groups = sorted(set(row["acl_groups"]))
        else:
            groups = acls.groups_for(rel_path, has_own_sidecar=row["has_sidecar"])
        if row["unchanged"]:
            file_type, sha = row["prev_file_type"], row["prev_content_sha256"]
            tally.reused += 1
        else:
            file = SourceFile(rel_path, row["size_bytes"], row["modified_at"])
            kind, sha = _describe(source, file, max_file_bytes)
            file_type = kind.value
            tally.hashed += 1
        tally.documents += 1
        tally.added += not row["known"]
        tally.changed += bool(row["known"]) and sha != row["prev_content_sha256"]
        tally.restricted += bool(groups)
        tally.by_type[file_type] += 1
        out["doc_id"].append(row["doc_id"])
        out["source_uri"].append(source.file_uri(rel_path))
        out["rel_path"].append(rel_path)
        out["file_type"].append(file_type)
        out["size_bytes"].append(row["size_bytes"])
        out["content_sha256"].append(sha)
        out["modified_at"].append(row["modified_at"])
        out["acl_groups"].append(groups)
        if on_progress is not None:
            on_progress(tally.documents, total)
    return pa.table(out, schema=INVENTORY_SCHEMA)


def _describe(
    source: DocumentSource, file: SourceFile, max_file_bytes: int | None
) -> tuple[FileType, str]:
    """The file's type and content hash; one too large or unreadable keeps its claimed type.

    Such a record carries a digest of what the listing says (size, time) instead of the
    content's, and the parse stage, which tries the size and the read again, records why.
    """
    data: bytes | None = None
    if max_file_bytes is None or file.size_bytes <= max_file_bytes:
        try:
            data = source.read_bytes(file.rel_path)
        except SourceError:
            data = None  # a dangling link, no permission, removed since listing
    if data is None:
        digest = f"size-{file.size_bytes}-mtime-{file.modified_at.timestamp():.0f}"
        return extension_type(file.rel_path), hashlib.sha256(digest.encode()).hexdigest()
    return detect_file_type(data, file.rel_path), hashlib.sha256(data).hexdigest()


class AccessRules:
    """ACL groups per document: its own sidecar, else the nearest folder's `_access.json`.

    A document with neither is public. A malformed ACL file makes its documents visible to no
    group rather than to everyone: failing closed is the safe side of a typo. Folder rules
    are read once each, when a document first needs them (one warning per bad file); a
    document's own sidecar is read at its turn and not kept, as it serves no other document.
    """

    _NOBODY: ClassVar[list[str]] = [NOBODY_GROUP]

    def __init__(self, source: DocumentSource, folder_rules: set[str], warnings: list[str]) -> None:
        self._source = source
        self._folder_rules = folder_rules
        self._warnings = warnings
        self._cache: dict[str, list[str]] = {}

    def groups_for(self, rel_path: str, has_own_sidecar: bool) -> list[str]:
        if has_own_sidecar:
            return self._parse(rel_path + SIDECAR_SUFFIX)
        folder = PurePosixPath(rel_path).parent
        while True:
            rule_path = (folder / FOLDER_ACL_FILE).as_posix().removeprefix("./")
            if rule_path in self._folder_rules:
                if rule_path not in self._cache:
                    self._cache[rule_path] = self._parse(rule_path)
                return list(self._cache[rule_path])
            if folder == folder.parent or str(folder) in {"", "."}:
                return []
            folder = folder.parent

    def _parse(self, rel_path: str) -> list[str]:
        try:
            payload = json.loads(self._source.read_bytes(rel_path))
            groups = payload["groups"]
            if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
                raise TypeError("'groups' must be a list of strings")
            if PUBLIC_GROUP in groups:
                raise ValueError(f"'{PUBLIC_GROUP}' is reserved for public documents")
            return sorted({g.strip() for g in groups if g.strip()})
        except (SourceError, ValueError, KeyError, TypeError) as error:
            self._warnings.append(
                f"{rel_path}: unreadable access file ({error}); its documents are hidden"
            )
            return list(self._NOBODY)
