"""A local folder as a document source."""

from __future__ import annotations

import os
import stat as stat_mode
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from lorehouse.errors import SourceError
from lorehouse.sources.base import SourceFile, is_hidden


class LocalFolderSource:
    """Files below a folder, found without following directory symlinks (no loops).

    A file symlink that loops or points nowhere is still listed, described by the link
    itself, so the run records it as unreadable with the operating system's reason instead
    of dropping a document the owner expects to be indexed.
    """

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root).expanduser().resolve()
        if not self.root.is_dir():
            raise SourceError(f"source folder {self.root} does not exist or is not a folder")

    @property
    def uri(self) -> str:
        return str(self.root)

    def list_files(self) -> Iterator[SourceFile]:
        for directory, folders, files in os.walk(self.root, followlinks=False):
            folders.sort()
            for name in sorted(files):
                path = Path(directory) / name
                rel_path = path.relative_to(self.root).as_posix()
                if is_hidden(rel_path):
                    continue
                try:
                    stat = path.stat()
                except OSError:
                    if not path.is_symlink():
                        continue  # removed between the directory listing and now
                    stat = path.lstat()
                else:
                    if not stat_mode.S_ISREG(stat.st_mode):
                        continue  # a FIFO, socket or device: never a document
                yield SourceFile(
                    rel_path=rel_path,
                    size_bytes=stat.st_size,
                    modified_at=datetime.fromtimestamp(stat.st_mtime, tz=UTC),
                    version=str(stat.st_mtime_ns),
                )

    def read_bytes(self, rel_path: str) -> bytes:
        path = self.root / rel_path
        try:
            return path.read_bytes()
        except OSError as error:  # includes ELOOP from a symlink loop
            raise SourceError(f"cannot read {rel_path} from {self.root}: {error}") from error

    def file_uri(self, rel_path: str) -> str:
        return (self.root / rel_path).as_uri()
