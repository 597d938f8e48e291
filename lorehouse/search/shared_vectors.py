"""A table version's unit vectors in a file that every process of a host maps.

Searches score vectors from memory (`TableSnapshot`): exact scoring below the ANN threshold,
and the exact rescoring of ANN candidates above it. Held per process, `--workers N` keeps N
copies of the same matrix, about 1.5 GB each at a million 384-dimensional rows. Kept in a
file each process maps read-only instead, the copies are one, in the page cache, shared by
every process that maps it, and only the pages searches touch are ever read in: with the ANN
index, the rows its candidates fall on.

A file is named by what the version's rows are, its fragments (data files and deletion
files), not by its version number, which restarts when a table is dropped and built again:
two versions whose fragments are the same (an index-only commit) share one file. The first
process to load a version writes it; a file is written beside its place and renamed over it,
so a reader never maps half of one. Files of other versions are removed once they are older
than `STALE_AFTER`: a process that maps one keeps its pages (POSIX), and one that opens that
version again writes it again.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import lancedb
    import pyarrow as pa

logger = logging.getLogger(__name__)

#: How long a file of another version is kept after it was last written: processes moving
#: to a newly published version do so within seconds of each other.
STALE_AFTER = 600.0
_VECTORS = ".vectors.npy"
_ROW_IDS = ".rowids.npy"


class SharedVectors:
    """The shared files of one table version: its unit vectors and, to check a file against
    the rows a process read, their LanceDB row ids."""

    def __init__(self, folder: Path, table: str, identity: str) -> None:
        self.folder = folder
        self.table = table
        stem = f"{table}-{identity}"
        self.vectors_path = folder / f"{stem}{_VECTORS}"
        self.row_ids_path = folder / f"{stem}{_ROW_IDS}"

    @classmethod
    def of(cls, folder: Path, pinned: lancedb.table.Table) -> SharedVectors:
        """The files of the version `pinned` is checked out at."""
        fragments = pinned.to_lance().get_fragments()
        identity = hashlib.sha256(
            "\n".join(repr(fragment.metadata) for fragment in fragments).encode()
        ).hexdigest()[:24]
        return cls(folder, pinned.name, identity)

    def load(
        self,
        rows: int,
        width: int,
        read_rows: Callable[[], pa.Table],
        read_with_vectors: Callable[[np.ndarray], pa.Table],
    ) -> tuple[pa.Table, np.ndarray] | None:
        """(the rows, the unit vectors mapped read-only) of this version, or None where the
        folder cannot be used (searches then hold their own copy).

        One process of the host at a time looks for the file (a lock beside it): the first
        reads the rows with their vectors and writes the vectors straight into the file
        (`read_with_vectors` fills the array it is given), holding no copy of its own; the
        others wait for it, then read the rows alone and map the file.
        """
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            with self._turn():
                mapped = self.open()
                arrow = None
                if mapped is None:
                    arrow = self._write(rows, width, read_with_vectors)
                    mapped = self.open()
        except OSError as error:
            logger.warning("search vectors held per process: %s", error)
            return None
        if mapped is None:
            return None
        arrow = read_rows() if arrow is None else arrow
        if not np.array_equal(arrow["_rowid"].to_numpy(), mapped[0]):
            return None
        return arrow, mapped[1]

    def open(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(row ids, the unit vectors mapped read-only), or None when no process has written
        this version's files (or they are not whole)."""
        try:
            row_ids = np.load(self.row_ids_path)
            vectors = np.load(self.vectors_path, mmap_mode="r")
        except (OSError, ValueError, EOFError):
            # Not written yet, cut short, or a folder that cannot be one: read from the table.
            return None
        if vectors.ndim != 2 or len(vectors) != len(row_ids):
            return None
        return row_ids, vectors

    @contextmanager
    def _turn(self) -> Iterator[None]:
        """This table's lock file, held exclusively: one process writes a version at a time,
        and the others find its file whole."""
        with (self.folder / f"{self.table}.lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _write(
        self, rows: int, width: int, read_with_vectors: Callable[[np.ndarray], pa.Table]
    ) -> pa.Table | None:
        """Writes the version's files; returns the rows read, or None (nothing written) when
        the version holds another number of rows than counted."""
        partial = self.vectors_path.with_name(f"{self.vectors_path.name}.{os.getpid()}")
        try:
            out = np.lib.format.open_memmap(
                partial, mode="w+", dtype=np.float32, shape=(rows, width)
            )
            arrow = read_with_vectors(out)
            out.flush()
            del out
            _release_freed_memory()
            if arrow.num_rows != rows:
                return None
            ids = self.row_ids_path.with_name(f"{self.row_ids_path.name}.{os.getpid()}")
            with ids.open("wb") as file:
                np.save(file, arrow["_rowid"].to_numpy())
            ids.replace(self.row_ids_path)
            partial.replace(self.vectors_path)
        finally:
            partial.unlink(missing_ok=True)
        self._remove_stale()
        return arrow

    def _remove_stale(self) -> None:
        """Removes the files of this table's other versions not written for STALE_AFTER."""
        cutoff = time.time() - STALE_AFTER
        mine = {self.vectors_path.name, self.row_ids_path.name}
        for path in self.folder.glob(f"{self.table}-*"):
            if path.name in mine:
                continue
            try:
                if path.stat().st_mtime < cutoff:
                    path.unlink()
            except FileNotFoundError:
                continue  # another process removed it first


def _release_freed_memory() -> None:
    """Hands back to the system what reading the vectors freed: the batches pass through
    the allocator, which keeps freed memory for reuse, so the process that wrote the file
    would go on holding about the vectors' size in memory it no longer uses."""
    import ctypes
    import ctypes.util

    import pyarrow as pa

    pa.default_memory_pool().release_unused()
    name = ctypes.util.find_library("c")
    if name:
        try:
            ctypes.CDLL(name).malloc_trim(0)
        except (OSError, AttributeError):
            return  # not glibc: its allocator returns memory its own way
