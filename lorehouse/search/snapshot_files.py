"""A table version's search snapshot as files every process of a host maps.

Searches read a table version from memory (`TableSnapshot`): the rows a search shows, the
unit vectors it scores or rescores, the BM25 postings, the key lookups. Held per process,
`--workers N` keeps N copies, each growing with the table: about 1.5 GB of vectors alone at
a million 384-dimensional rows. Kept in files each process maps read-only instead, the
copies are one, in the page cache, shared by every process that maps them, and only the
pages a search touches are ever read in: with the ANN index, the rows its candidates fall
on; of the rows, those a search returns; of the postings, its terms'.

A version's files are one folder named by what the version's rows are, its fragments (data
files and deletion files), not by its version number, which restarts when a table is dropped
and built again: two versions whose fragments are the same (an index-only commit) share one
folder. The first process to load a version writes its rows and vectors; what only some
searches need (postings, lookups, passage divisions) is written by the first process that
needs it, each set of arrays under a manifest written last. Everything is written beside its
place and renamed over it, so a reader never maps half of a file. Folders of other versions
are removed once they are older than `STALE_AFTER`: a process that maps one keeps its pages
(POSIX), and one that opens that version again writes it again.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

if TYPE_CHECKING:
    import lancedb

logger = logging.getLogger(__name__)

#: How long the folder of another version is kept after it was last written: processes
#: moving to a newly published version do so within seconds of each other.
STALE_AFTER = 600.0
VECTORS_FILE = "vectors.npy"
ROWS_FILE = "rows.arrow"
_MANIFEST = ".json"
#: Rows in a batch of a rows file: few batches for a take to visit, each well within the
#: 2 GiB an Arrow string column's batch can hold (about 1.5 KB of text a chunk).
BATCH_ROWS = 1 << 18


class SnapshotFiles:
    """The shared files of one table version: its rows (an Arrow IPC file), its unit vectors
    (a `.npy` matrix) and named sets of arrays derived from them."""

    def __init__(self, root: Path, table: str, identity: str) -> None:
        self.root = root
        self.table = table
        self.folder = root / f"{table}-{identity}"
        self._arrays_lock = threading.Lock()

    @classmethod
    def of(cls, root: Path, pinned: lancedb.table.Table) -> SnapshotFiles:
        """The files of the version `pinned` is checked out at."""
        fragments = pinned.to_lance().get_fragments()
        identity = hashlib.sha256(
            "\n".join(repr(fragment.metadata) for fragment in fragments).encode()
        ).hexdigest()[:24]
        return cls(root, pinned.name, identity)

    # -- the rows and their vectors --------------------------------------------------------------

    def load(
        self,
        rows: int,
        schema: pa.Schema,
        width: int,
        read_with_vectors: Callable[[np.ndarray], Iterator[pa.RecordBatch]],
    ) -> tuple[pa.Table, np.ndarray] | None:
        """(the rows, the unit vectors), both mapped read-only, of this version, or None
        where the folder cannot be used (searches then hold their own copy).

        One process of the host at a time looks for the files (a lock beside them): the
        first reads the rows with their vectors, writing the vectors straight into their
        file (`read_with_vectors` fills the array it is given while it yields the rows'
        batches, of `schema`) and each group of rows into theirs as it is read, then maps
        both like the others, which wait for it and read nothing from the table. The
        writer never holds more than a group of rows: holding the version's rows until
        they were written took about as much memory as their file.
        """
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            with self._turn():
                mapped = self.open()
                if mapped is None and self._write(rows, schema, width, read_with_vectors):
                    mapped = self.open()
        except OSError as error:
            logger.warning("search snapshot held per process: %s", error)
            return None
        return mapped

    def open(self) -> tuple[pa.Table, np.ndarray] | None:
        """(the rows, the unit vectors) mapped read-only, or None when no process has
        written this version's files (or they are not whole)."""
        try:
            vectors = np.load(self.folder / VECTORS_FILE, mmap_mode="r")
            source = pa.memory_map(str(self.folder / ROWS_FILE))
            rows = pa.ipc.open_file(source).read_all()
        except (OSError, ValueError, EOFError, pa.ArrowException):
            # Not written yet, cut short, or a folder that cannot be one: read from the table.
            return None
        if vectors.ndim != 2 or len(vectors) != rows.num_rows:
            return None
        return rows, vectors

    def _write(
        self,
        rows: int,
        schema: pa.Schema,
        width: int,
        read_with_vectors: Callable[[np.ndarray], Iterator[pa.RecordBatch]],
    ) -> bool:
        """Writes the version's rows and vectors; False (nothing written) when the version
        holds another number of rows than counted."""
        partial = self.root / f".{self.folder.name}.{os.getpid()}"
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir()
        try:
            out = np.lib.format.open_memmap(
                partial / VECTORS_FILE, mode="w+", dtype=np.float32, shape=(rows, width)
            )
            written = 0
            sink = pa.OSFile(str(partial / ROWS_FILE), "wb")
            with sink, pa.ipc.new_file(sink, schema) as writer:
                for batch in regrouped(read_with_vectors(out), schema):
                    writer.write_batch(batch)
                    written += batch.num_rows
            out.flush()
            del out
            if written != rows:
                return False
            _release_freed_memory()
            # A torn folder of this version (a writer killed before its manifest) goes.
            shutil.rmtree(self.folder, ignore_errors=True)
            partial.rename(self.folder)
        finally:
            shutil.rmtree(partial, ignore_errors=True)
        self._remove_stale()
        return True

    # -- arrays derived from the rows ------------------------------------------------------------

    def arrays(
        self, name: str, compute: Callable[[], Mapping[str, np.ndarray]]
    ) -> dict[str, np.ndarray]:
        """The set of arrays `name` of this version, mapped read-only: computed and written
        by the first process that asks, under the table's lock, and mapped by the others.
        Where the folder cannot be written, the arrays computed are returned as they are."""
        found = self._open_arrays(name)
        if found is not None:
            return found
        with self._arrays_lock:
            try:
                self.folder.mkdir(parents=True, exist_ok=True)
                with self._turn():
                    found = self._open_arrays(name)
                    if found is not None:
                        return found
                    computed = dict(compute())
                    self._write_arrays(name, computed)
                    del computed
                    # What computing them read (the text columns, for postings) is handed
                    # back: the process goes on mapping the files like every other one.
                    _release_freed_memory()
            except OSError as error:
                logger.warning("search arrays %s held per process: %s", name, error)
                return dict(compute())
            found = self._open_arrays(name)
            return found if found is not None else dict(compute())

    def _open_arrays(self, name: str) -> dict[str, np.ndarray] | None:
        try:
            manifest = json.loads((self.folder / f"{name}{_MANIFEST}").read_text())
            return {part: _load(self.folder / f"{name}.{part}.npy") for part in manifest}
        except (OSError, ValueError, EOFError):
            return None

    def _write_arrays(self, name: str, arrays: Mapping[str, np.ndarray]) -> None:
        suffix = f".{os.getpid()}"
        for part, array in arrays.items():
            path = self.folder / f"{name}.{part}.npy"
            partial = path.with_name(path.name + suffix)
            with partial.open("wb") as file:
                np.save(file, np.ascontiguousarray(array), allow_pickle=False)
            partial.replace(path)
        manifest = self.folder / f"{name}{_MANIFEST}"
        partial = manifest.with_name(manifest.name + suffix)
        partial.write_text(json.dumps(sorted(arrays)))
        partial.replace(manifest)

    # -- files written by a library ---------------------------------------------------------------

    def index_file(self, name: str, write: Callable[[Path], None]) -> Path | None:
        """The path of this version's file `name` (an index another library writes and
        maps, `lorehouse.search.ann`): written by the first process that asks, through
        `write(path)` beside its place and renamed over it, under the table's lock, and only
        opened by the others. None where the folder cannot be written."""
        path = self.folder / name
        if path.exists():
            return path
        with self._arrays_lock:
            try:
                self.folder.mkdir(parents=True, exist_ok=True)
                with self._turn():
                    if not path.exists():
                        partial = path.with_name(f".{name}.{os.getpid()}")
                        try:
                            write(partial)
                            partial.replace(path)
                        finally:
                            partial.unlink(missing_ok=True)
                        _release_freed_memory()
            except OSError as error:
                logger.warning("search index %s held per process: %s", name, error)
                return None
        return path

    # -- housekeeping ----------------------------------------------------------------------------

    @contextmanager
    def _turn(self) -> Iterator[None]:
        """This table's lock file, held exclusively: one process writes a version at a time,
        and the others find its files whole."""
        with (self.root / f"{self.table}.lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _remove_stale(self) -> None:
        """Removes the folders of this table's other versions not written for STALE_AFTER."""
        cutoff = time.time() - STALE_AFTER
        for path in self.root.glob(f"{self.table}-*"):
            if path == self.folder:
                continue
            try:
                if path.stat().st_mtime < cutoff:
                    shutil.rmtree(path)
            except FileNotFoundError:
                continue  # another process removed it first


def regrouped(
    batches: Iterable[pa.RecordBatch], schema: pa.Schema, rows: int | None = None
) -> Iterator[pa.RecordBatch]:
    """The rows of `batches` in batches of at least `rows` (BATCH_ROWS by default; the last
    one shorter), one group at a time: LanceDB reads a table in small batches, and a
    search's take of a few rows costs a take from every batch they fall in."""
    rows = rows or BATCH_ROWS
    group: list[pa.RecordBatch] = []
    held = 0
    for batch in batches:
        group.append(batch)
        held += batch.num_rows
        if held >= rows:
            yield from pa.Table.from_batches(group, schema).combine_chunks().to_batches()
            group, held = [], 0
    if group:
        yield from pa.Table.from_batches(group, schema).combine_chunks().to_batches()


def _load(path: Path) -> np.ndarray:
    """A `.npy` file mapped read-only; an empty array (which cannot be mapped) read."""
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except ValueError:
        empty = np.load(path, allow_pickle=False)
        if empty.size:
            raise
        return empty


def _release_freed_memory() -> None:
    """Hands back to the system what reading the vectors freed: the batches pass through
    the allocator, which keeps freed memory for reuse, so the process that wrote the files
    would go on holding about the rows' and vectors' size in memory it no longer uses."""
    import ctypes
    import ctypes.util

    pa.default_memory_pool().release_unused()
    name = ctypes.util.find_library("c")
    if name:
        try:
            ctypes.CDLL(name).malloc_trim(0)
        except (OSError, AttributeError):
            return  # not glibc: its allocator returns memory its own way
