"""A local folder as a document source.

Symbolic links are never followed, neither while listing nor while reading. A link is still
listed, so the run records it as failed with the reason instead of dropping a document its
owner expects to be indexed. Following links only within the root was the alternative; it
was not taken because a link's target inside the root is indexed anyway at its own path,
under its own access list, so following would only add a second copy whose access list
depends on where the link sits, while a link out of the root must never be read at all.
Reads open each path component with `O_NOFOLLOW` from a descriptor of the root, so a folder
or file swapped for a link after listing (or after indexing, when the API serves the
original) is refused rather than followed.
"""

from __future__ import annotations

import errno
import logging
import os
import stat as stat_mode
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

from lorehouse.errors import SourceError
from lorehouse.sources.base import SourceFile, is_hidden

log = logging.getLogger(__name__)

_LINK_REFUSED = (
    "is a symbolic link; links are not followed, so that nothing outside the source folder is "
    "read and every document keeps its own access list (index the target at its own path)"
)


def display_name(name: str) -> str:
    """A file name as valid UTF-8: bytes that are not UTF-8 (which Python decodes as lone
    surrogates) become `\\xNN`, so the name can be stored, shown and hashed, and
    `LocalFolderSource.read_bytes` finds the file again from it."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


class LocalFolderSource:
    """Files below a folder, listed and read without following symbolic links."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root).expanduser().resolve()
        if not self.root.is_dir():
            raise SourceError(f"source folder {self.root} does not exist or is not a folder")

    @property
    def uri(self) -> str:
        return str(self.root)

    def list_files(self) -> Iterator[SourceFile]:
        # os.walk never descends into a linked folder (followlinks=False) but names it among
        # the folders: it is listed as an entry of its own so the run says why it was left.
        for directory, folders, files in os.walk(self.root, followlinks=False):
            folders.sort()
            linked = [name for name in folders if (Path(directory) / name).is_symlink()]
            folders[:] = [name for name in folders if name not in linked]
            taken = {display_name(name) for name in files if display_name(name) == name}
            for name in sorted([*files, *linked]):
                shown = display_name(name)
                if shown != name and shown in taken:
                    log.warning(
                        "%s in %s is not UTF-8 and its escaped name is another file's; not listed",
                        shown,
                        directory,
                    )
                    continue
                path = Path(directory) / name
                rel_path = display_name(path.relative_to(self.root).as_posix())
                if is_hidden(rel_path):
                    continue
                try:
                    stat = path.lstat()
                except FileNotFoundError:
                    continue  # removed between the directory listing and now
                if not (stat_mode.S_ISREG(stat.st_mode) or stat_mode.S_ISLNK(stat.st_mode)):
                    continue  # a FIFO, socket or device: never a document
                yield SourceFile(
                    rel_path=rel_path,
                    size_bytes=stat.st_size,
                    modified_at=datetime.fromtimestamp(stat.st_mtime, tz=UTC),
                    version=str(stat.st_mtime_ns),
                )

    def read_bytes(self, rel_path: str) -> bytes:
        """The bytes of a regular file below the root, reached without following any link."""
        parts = PurePosixPath(rel_path).parts
        if not parts or rel_path.startswith("/") or any(p in {".", ".."} for p in parts):
            raise SourceError(f"{rel_path!r} is not a path inside the source folder")
        try:
            folder = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as error:
            raise SourceError(f"cannot open the source folder {self.root}: {error}") from error
        try:
            for part in parts[:-1]:
                inner = self._open_entry(folder, part, rel_path, os.O_DIRECTORY)
                os.close(folder)
                folder = inner
            descriptor = self._open_entry(folder, parts[-1], rel_path, os.O_NONBLOCK)
        finally:
            os.close(folder)
        with os.fdopen(descriptor, "rb") as file:
            if not stat_mode.S_ISREG(os.fstat(file.fileno()).st_mode):
                raise SourceError(f"cannot read {rel_path}: not a regular file")
            try:
                return file.read()
            except OSError as error:
                raise SourceError(f"cannot read {rel_path}: {error}") from error

    def _open_entry(self, folder: int, part: str, rel_path: str, flags: int) -> int:
        """A descriptor of `part` in the open `folder`; SourceError for a link or a failure."""
        name = self._entry_name(folder, part)
        try:
            if stat_mode.S_ISLNK(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode):
                raise SourceError(f"cannot read {rel_path}: {part} {_LINK_REFUSED}")
            # O_NOFOLLOW again: a link swapped in after the check fails with ELOOP.
            return os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | flags, dir_fd=folder)
        except OSError as error:
            reason = _LINK_REFUSED if error.errno == errno.ELOOP else error.strerror
            raise SourceError(f"cannot read {rel_path}: {part}: {reason}") from error

    @staticmethod
    def _entry_name(folder: int, part: str) -> str:
        """The on-disk name behind a listed name: itself, or for a name listed with escaped
        bytes (`display_name`), the entry of the folder it was escaped from."""
        if "\\x" not in part:
            return part
        try:
            os.stat(part, dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:
            for name in os.listdir(folder):
                if name != part and display_name(name) == part:
                    return name
        return part  # a real name wins over an escaped one

    def file_uri(self, rel_path: str) -> str:
        return (self.root / rel_path).as_uri()
