"""Inventories a source: one RawDocument per file, with content hash, real type and ACL groups.

Hashing is skipped for files whose size and modification time match the previous inventory,
so an unchanged corpus is re-inventoried from its listing alone.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import ClassVar

from lorehouse.errors import SourceError
from lorehouse.models import PUBLIC_GROUP, RawDocument
from lorehouse.sniffing import detect_file_type, extension_type
from lorehouse.sources.base import (
    FOLDER_ACL_FILE,
    SIDECAR_SUFFIX,
    DocumentSource,
    SourceFile,
    is_sidecar,
)
from lorehouse.stages.progress import ProgressCallback


def document_id(rel_path: str) -> str:
    """A stable id from the source-relative path: the same file keeps its id across runs."""
    return hashlib.sha256(rel_path.encode("utf-8")).hexdigest()[:20]


@dataclass
class Inventory:
    """The result of listing a source."""

    documents: list[RawDocument]
    warnings: list[str] = field(default_factory=list)
    hashed: int = 0
    reused: int = 0


def take_inventory(
    source: DocumentSource,
    previous: Mapping[str, RawDocument] | None = None,
    max_file_bytes: int | None = None,
    on_progress: ProgressCallback | None = None,
) -> Inventory:
    """Lists the source and describes each document; sidecar ACL files are read, not listed."""
    previous = previous or {}
    files = sorted(source.list_files(), key=lambda f: f.rel_path)
    result = Inventory(documents=[])
    acls = _AccessRules(source, {f.rel_path for f in files if is_sidecar(f.rel_path)}, result)
    documents = [f for f in files if not is_sidecar(f.rel_path)]
    for index, file in enumerate(documents, start=1):
        doc_id = document_id(file.rel_path)
        known = previous.get(doc_id)
        if known is not None and is_unchanged(known, file):
            raw = known.model_copy(update={"acl_groups": acls.groups_for(file.rel_path)})
            result.reused += 1
        else:
            raw = _describe(source, file, doc_id, acls.groups_for(file.rel_path), max_file_bytes)
            result.hashed += 1
        result.documents.append(raw)
        if on_progress is not None:
            on_progress(index, len(documents))
    return result


def is_unchanged(known: RawDocument, file: SourceFile) -> bool:
    """Same size and modification time as at the last inventory: trusted without hashing."""
    return known.size_bytes == file.size_bytes and known.modified_at == file.modified_at


def _describe(
    source: DocumentSource,
    file: SourceFile,
    doc_id: str,
    groups: list[str],
    max_file_bytes: int | None,
) -> RawDocument:
    """The document record; one that is too large or unreadable keeps its claimed type.

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
        file_type = extension_type(file.rel_path)
        digest = f"size-{file.size_bytes}-mtime-{file.modified_at.timestamp():.0f}"
        sha = hashlib.sha256(digest.encode()).hexdigest()
    else:
        file_type = detect_file_type(data, file.rel_path)
        sha = hashlib.sha256(data).hexdigest()
    return RawDocument(
        doc_id=doc_id,
        source_uri=source.file_uri(file.rel_path),
        rel_path=file.rel_path,
        file_type=file_type,
        size_bytes=file.size_bytes,
        content_sha256=sha,
        modified_at=file.modified_at,
        acl_groups=groups,
    )


class _AccessRules:
    """ACL groups per document: its own sidecar, else the nearest folder's `_access.json`.

    A document with neither is public. A malformed ACL file makes its documents visible to no
    group rather than to everyone: failing closed is the safe side of a typo.
    """

    _NOBODY: ClassVar[list[str]] = ["__unreadable_acl__"]

    def __init__(self, source: DocumentSource, sidecars: set[str], inventory: Inventory) -> None:
        self._source = source
        self._sidecars = sidecars
        self._inventory = inventory
        self._cache: dict[str, list[str] | None] = {}

    def groups_for(self, rel_path: str) -> list[str]:
        own = self._read(rel_path + SIDECAR_SUFFIX)
        if own is not None:
            return own
        folder = PurePosixPath(rel_path).parent
        while True:
            rule_path = (folder / FOLDER_ACL_FILE).as_posix().removeprefix("./")
            groups = self._read(rule_path)
            if groups is not None:
                return groups
            if folder == folder.parent or str(folder) in {"", "."}:
                return []
            folder = folder.parent

    def _read(self, rel_path: str) -> list[str] | None:
        if rel_path not in self._sidecars:
            return None
        if rel_path not in self._cache:
            self._cache[rel_path] = self._parse(rel_path)
        return self._cache[rel_path]

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
            self._inventory.warnings.append(
                f"{rel_path}: unreadable access file ({error}); its documents are hidden"
            )
            return list(self._NOBODY)
