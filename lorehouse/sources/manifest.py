"""What a source holds right now: path -> size, change token and content digest.

The change sensor keeps the last manifest as its cursor and compares it with a fresh one, so
a run is requested exactly when a file was added, changed or removed. S3 listings carry a
content digest (the ETag), so nothing is downloaded; a local file is read and hashed only
when its size or mtime differs from the last manifest: a touched but unchanged file costs
one hash and requests nothing, and an unchanged corpus costs one listing.
"""

from __future__ import annotations

import base64
import hashlib
import json
import zlib
from dataclasses import dataclass, field

from lorehouse.errors import SourceError
from lorehouse.sources.base import DocumentSource

_FORMAT = 1


@dataclass(frozen=True)
class ManifestEntry:
    size_bytes: int
    version: str
    digest: str


@dataclass
class Manifest:
    files: dict[str, ManifestEntry] = field(default_factory=dict)

    def encode(self) -> str:
        """A compact text form (JSON, zlib, base64) to keep as a sensor cursor."""
        payload = {
            "format": _FORMAT,
            "files": {
                p: [e.size_bytes, e.version, e.digest] for p, e in sorted(self.files.items())
            },
        }
        packed = zlib.compress(json.dumps(payload, separators=(",", ":")).encode(), 9)
        return base64.b64encode(packed).decode()

    @classmethod
    def decode(cls, cursor: str | None) -> Manifest:
        """The manifest a cursor holds; an absent or foreign cursor is an empty manifest."""
        if not cursor:
            return cls()
        try:
            payload = json.loads(zlib.decompress(base64.b64decode(cursor)))
        except (ValueError, zlib.error):
            return cls()  # written by another version: every file counts as new once
        if payload.get("format") != _FORMAT:
            return cls()
        return cls({p: ManifestEntry(s, v, d) for p, (s, v, d) in payload["files"].items()})

    def fingerprint(self) -> str:
        """Identifies this exact state of the source, e.g. as a run key."""
        lines = (f"{p}\t{e.digest}" for p, e in sorted(self.files.items()))
        return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:32]


@dataclass(frozen=True)
class SourceChanges:
    added: list[str]
    changed: list[str]
    removed: list[str]
    files_hashed: int

    def __bool__(self) -> bool:
        return bool(self.added or self.changed or self.removed)

    def describe(self) -> str:
        return f"{len(self.added)} added, {len(self.changed)} changed, {len(self.removed)} removed"


def take_manifest(source: DocumentSource, previous: Manifest) -> tuple[Manifest, SourceChanges]:
    """Lists the source, hashes only files whose size or change token moved, and diffs."""
    current = Manifest()
    hashed = 0
    for file in source.list_files():
        known = previous.files.get(file.rel_path)
        if known and (known.size_bytes, known.version) == (file.size_bytes, file.version):
            current.files[file.rel_path] = known
            continue
        digest = file.content_digest
        if digest is None:
            digest = _read_digest(source, file.rel_path, f"{file.size_bytes}:{file.version}")
            hashed += 1
        current.files[file.rel_path] = ManifestEntry(file.size_bytes, file.version, digest)
    old, new = previous.files, current.files
    changes = SourceChanges(
        added=sorted(set(new) - set(old)),
        changed=sorted(p for p in set(new) & set(old) if new[p].digest != old[p].digest),
        removed=sorted(set(old) - set(new)),
        files_hashed=hashed,
    )
    return current, changes


def _read_digest(source: DocumentSource, rel_path: str, token: str) -> str:
    try:
        return hashlib.sha256(source.read_bytes(rel_path)).hexdigest()
    except SourceError:
        # Unreadable now (permissions, vanished mid-listing): the inventory run records why;
        # the token still moves, so a later readable version counts as a change.
        return f"unreadable:{token}"
