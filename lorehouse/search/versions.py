"""Which version of each LanceDB table searches read: the one the last finished index merge
published, told cheaply while nothing was committed.

Split from the table readers (`lorehouse.search.tables`) because it is a concern of its own:
how a reader learns that a new version exists, on a folder or an object store, without
asking LanceDB at every search.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import lancedb


#: The table naming the version of each table that searches read (see PublishedVersions).
PUBLISHED_TABLE_NAME = "published"


# A local table's `_versions` folder whose modification time is at least this old when its
# version is read is trusted to show the next commit as a new modification time (see
# VersionsFolderWatch). File times tick in steps of a few milliseconds; a second is ample.
_SETTLED_NANOSECONDS = 1_000_000_000


class VersionsFolderWatch:
    """Tells, for a table in a local folder, its latest version while no commit can have
    happened, from one `stat` of its `_versions` folder instead of LanceDB's check, which
    costs far more and is asked for every table a search reads.

    Every commit writes a new manifest into `_versions`, which gives the folder a new
    modification time. That time ticks coarsely, so a commit in the same tick as the last
    look would go unseen; the folder's state is therefore trusted only once its modification
    time is older than `settled_ns` when the version was read (git's "racy clean" rule): any
    commit after that has a later time. Until then, and whenever the state differs, the
    caller asks LanceDB.
    """

    def __init__(self, table_folder: Path, settled_ns: int = _SETTLED_NANOSECONDS) -> None:
        self.versions = table_folder / "_versions"
        self.settled_ns = settled_ns
        #: (folder state, the version read after taking it), once the state has settled.
        self._trusted: tuple[tuple[int, int, int, int], int] | None = None

    def state(self) -> tuple[int, int, int, int] | None:
        """What identifies the folder's content now; None when it does not exist."""
        try:
            found = self.versions.stat()
        except FileNotFoundError:
            return None
        return (found.st_ino, found.st_mtime_ns, found.st_ctime_ns, found.st_size)

    def known_version(self, state: tuple[int, int, int, int] | None) -> int | None:
        """The latest version if `state` (taken now) is the trusted one, else None."""
        trusted = self._trusted
        if state is None or trusted is None or trusted[0] != state:
            return None
        return trusted[1]

    def trust(self, state: tuple[int, int, int, int] | None, version: int) -> None:
        """Remembers `version`, read after taking `state`, if the state has settled."""
        settled = state is not None and state[1] <= time.time_ns() - self.settled_ns
        self._trusted = (state, version) if settled and state is not None else None


class PublishedVersions:
    """The version of each table that the last finished index merge published: what
    searches read, so that they never see a state no merge finished, neither while a merge
    commits table by table nor after one stopped before its end (`lorehouse.stages.index_merge`).

    Kept in one small table of the same database (PUBLISHED_TABLE_NAME, a row per table
    the merge writes, rewritten in one commit), so it changes atomically wherever LanceDB
    writes, a folder or an object store. A table it does not name (the eval baseline's), and
    every table of a database without it (built before publishing, or written by the
    embedding stage alone), is read at its latest version. In a local folder the check is
    one `stat` while the table is unchanged (see VersionsFolderWatch).
    """

    def __init__(self, db: lancedb.DBConnection, folder: Path | None) -> None:
        """`folder` is the table's folder on this machine; None for an object store."""
        self._db = db
        self._watch = None if folder is None else VersionsFolderWatch(folder)
        self._table: lancedb.table.Table | None = None
        #: (version of the published table, table name -> version published), last read.
        self._read: tuple[int, dict[str, int | None]] | None = None
        self._lock = threading.Lock()

    def versions(self) -> Mapping[str, int | None] | None:
        """table name -> its published version (None: published as not built yet); None
        when nothing was ever published."""
        watch = self._watch
        # Taken before the version is read, as in TableReader.latest_version.
        state = None if watch is None else watch.state()
        if watch is not None:
            if state is None:
                return None
            known, read = watch.known_version(state), self._read
            if known is not None and read is not None and read[0] == known:
                return read[1]
        table = self._table
        if table is None:
            try:
                table = self._table = self._db.open_table(PUBLISHED_TABLE_NAME)
            except ValueError:  # not found: never published
                return None
        # Not under the lock: on an object store this is a request, which concurrent
        # searches make side by side, as they do for each table's own version.
        version = table.version
        if watch is not None:
            watch.trust(state, version)
        read = self._read
        if read is None or read[0] != version:
            with self._lock:  # the rows of a new version are read once
                read = self._read
                if read is None or read[0] != version:
                    read = self._read = (version, self._rows_at(version))
        return read[1]

    def _rows_at(self, version: int) -> dict[str, int | None]:
        pinned = self._db.open_table(PUBLISHED_TABLE_NAME)
        pinned.checkout(version)
        rows = pinned.to_arrow()
        names, numbers = rows["table_name"].to_pylist(), rows["version"].to_pylist()
        return dict(zip(names, numbers, strict=True))


class VersionGone(LookupError):
    """A table version that is no longer kept, or was never written."""

    def __init__(self, version: int, latest: int) -> None:
        super().__init__(
            f"index version {version} is "
            + ("not written yet" if version > latest else "no longer kept")
            + f"; the index is at version {latest}"
        )
        self.version = version
        self.latest = latest
