"""A local folder as a document source."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from lorehouse.errors import SourceError
from lorehouse.sources.base import SourceFile, is_hidden


class LocalFolderSource:
    """Files below a folder, found without following directory symlinks (no loops)."""

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
                    continue  # a dangling or looping symlink: nothing to read
                if not path.is_file():
                    continue
                yield SourceFile(
                    rel_path=rel_path,
                    size_bytes=stat.st_size,
                    modified_at=datetime.fromtimestamp(stat.st_mtime, tz=UTC),
                    version=str(stat.st_mtime_ns),
                )

    def read_bytes(self, rel_path: str) -> bytes:
        path = (self.root / rel_path).resolve()
        try:
            return path.read_bytes()
        except OSError as error:
            raise SourceError(f"cannot read {rel_path} from {self.root}: {error}") from error

    def file_uri(self, rel_path: str) -> str:
        return (self.root / rel_path).as_uri()
