"""The document source interface every stage reads raw bytes through."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import PurePosixPath
from typing import Protocol

FOLDER_ACL_FILE = "_access.json"
SIDECAR_SUFFIX = ".meta.json"


@dataclass(frozen=True)
class SourceFile:
    """A file as listed by its source, before anyone reads it."""

    rel_path: str
    size_bytes: int
    modified_at: datetime
    #: Changes whenever the content may have: the S3 ETag, or a local file's mtime in ns.
    version: str = ""
    #: A digest of the content the listing already gives (the S3 ETag), so a change check
    #: need not download the file; None where only reading the file tells (local folders).
    content_digest: str | None = None
    #: The groups allowed to read the file, from the source's own permissions (a connector's
    #: sharing settings mapped to Lorehouse groups); None where access files decide
    #: (`_access.json`, sidecars). Empty means public, like an empty access file.
    acl_groups: tuple[str, ...] | None = None


class DocumentSource(Protocol):
    """A tree of files addressed by POSIX paths relative to the source root."""

    @property
    def uri(self) -> str:
        """Where the source lives, as the user configured it."""
        ...

    def list_files(self) -> Iterator[SourceFile]:
        """Every file below the root, sidecars included; order is not significant."""
        ...

    def read_bytes(self, rel_path: str) -> bytes:
        """The file's content; raises SourceError when it cannot be read."""
        ...

    def file_uri(self, rel_path: str) -> str:
        """An address a person can open to see the original file."""
        ...


def is_sidecar(rel_path: str) -> bool:
    """Access-control files describe documents; they are not documents themselves."""
    name = PurePosixPath(rel_path).name
    return name == FOLDER_ACL_FILE or name.endswith(SIDECAR_SUFFIX)


def is_hidden(rel_path: str) -> bool:
    """Dot-files and dot-folders (.git, .DS_Store) are never documents."""
    return any(part.startswith(".") for part in PurePosixPath(rel_path).parts)
