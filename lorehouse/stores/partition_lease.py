"""One writer at a time of an index partition's files: a lease per partition, taken by every
run that writes them, whichever launched it.

Why a lease beside the files rather than only the run queue's limits or a Dagster pool: the
queue's `dagster/partition` limit counts the runs it launches, not `lorehouse materialize`
(`execute_in_process` never enters the queue) nor a range run over every partition. A pool
is claimed by a step even in process, but only on an instance with persistent storage (not
the ephemeral one `lorehouse materialize` uses without DAGSTER_HOME), and its name and limit
are fixed on the asset: it bounds how many partition steps run at once over all partitions,
not one writer per partition, and a range run's one step claims one slot for all of them.
A lock in the partitions' own folder holds whoever writes, from any launcher, and the kernel
frees it when its holder dies, so a killed run never leaves a partition locked.

The lease is an exclusive `flock` on `partitions/leases/<key>.lock`: runs on one machine,
and on pods that share the partitions' volume over NFS (whose Linux client carries `flock`
to the server), exclude each other. It names its holder (run, process, host) so the run
refused can say who has the partition. Pods that share no volume each have their own folder;
there the conditional push of `partition_remote` is what fences them.

The `filelock` package has the same parts in its recent releases (a hook to write the holder,
inherited locks closed after a fork), but it is only installed as Dagster's unpinned
dependency, not one of Lorehouse's; the lock itself is one `flock` call.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

#: Where the leases live, under the partitions folder: a folder of their own, so a listing
#: of the partitions' files (`p*`) never shows them.
LEASES = "leases"

#: The descriptors of the leases this process holds. A process forked while one is held (a
#: parse worker) shares its lock, and would keep the partition locked after the run gave it
#: back; so a child closes its copies at once (closing, unlike unlocking, leaves the parent's
#: lock as it is). Process-wide because the fork is.
_HELD: set[int] = set()


def _close_inherited() -> None:
    for fd in _HELD:
        with suppress(OSError):
            os.close(fd)
    _HELD.clear()


os.register_at_fork(after_in_child=_close_inherited)


class PartitionLeaseHeld(RuntimeError):
    """Another run holds the partition's lease: it is writing the partition's files now."""

    def __init__(self, key: str, holder: dict[str, object], path: Path) -> None:
        self.key = key
        self.holder = holder
        if holder:
            who = (
                f"run {holder.get('run_id', '?')} (pid {holder.get('pid', '?')} on host "
                f"{holder.get('host', '?')}, since {holder.get('since', '?')})"
            )
        else:
            who = "another run (it is just starting and has not said which)"
        super().__init__(
            f"partition {key} is being written by {who}; this run leaves it alone. Run it "
            f"again once that run has finished (the lease is {path})"
        )


class PartitionLease:
    """The lease on partition `key`'s files under `root` (the partitions folder), taken for
    run `run_id`. A context manager; `acquire` fails at once, never waits: a run that waited
    would redo, from a stale start, what the holder is doing."""

    def __init__(self, root: Path, key: str, run_id: str) -> None:
        self.key = key
        self.run_id = run_id
        self.path = root / LEASES / f"{key}.lock"
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> PartitionLease:
        """Takes the lease, or raises `PartitionLeaseHeld` naming the run that has it."""
        if self._fd is not None:
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Never unlinked or replaced: a lock is on the inode, and a run that opened a file
        # since removed would hold a lease nobody else can see.
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            holder = _holder(fd)
            os.close(fd)
            if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise PartitionLeaseHeld(self.key, holder, self.path) from None
            raise
        # Written over whatever a dead holder left, then cut to length: a run refused in
        # between reads a whole record or an unreadable one, never a mix of two holders.
        record = json.dumps(
            {
                "run_id": self.run_id,
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "since": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
        ).encode()
        os.pwrite(fd, record, 0)
        os.ftruncate(fd, len(record))
        self._fd = fd
        _HELD.add(fd)
        return self

    def release(self) -> None:
        """Gives the lease back (the holder record goes with it); a lease not held is a no-op."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        _HELD.discard(fd)
        try:
            os.ftruncate(fd, 0)
        finally:
            os.close(fd)  # closing the only descriptor frees the lock

    def __enter__(self) -> PartitionLease:
        return self.acquire()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()


def _holder(fd: int) -> dict[str, object]:
    try:
        found = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


#: The lease of whoever merges into the shared stores and publishes the index's versions (a
#: partition's publish, the merge of every partition), beside the partitions' own leases.
SHARED_STORES_LEASE = "shared-stores"
#: How often a writer waiting for the shared stores tries again, and says who holds them.
_SHARED_POLL_SECONDS = 0.5
_SHARED_SAY_SECONDS = 60.0


@contextmanager
def writing_shared_stores(
    root: Path, run_id: str, on_wait: Callable[[str], None] | None = None
) -> Iterator[None]:
    """Holds the shared stores' lease for the block, waiting while another writer holds it.

    The Dagster pool of the shared-store steps queues writers on an instance with
    persistent storage, but two `lorehouse materialize` runs on ephemeral instances claim no
    slot; and two publishes at once would each publish the versions they saw, the later
    commit naming versions without the other's rows. The lease holds them apart whatever
    launched them. Unlike a partition's, it waits: a publish redoes nothing from a stale
    start, since it reads the shared tables only once it holds them. `on_wait` is told who
    holds it, at once and every minute.
    """
    lease = PartitionLease(root, SHARED_STORES_LEASE, run_id)
    said: float | None = None
    while True:
        try:
            lease.acquire()
            break
        except PartitionLeaseHeld as held:
            now = time.monotonic()
            if on_wait is not None and (said is None or now - said >= _SHARED_SAY_SECONDS):
                holder = held.holder
                on_wait(
                    f"waiting for the shared stores: run {holder.get('run_id', '?')} (pid "
                    f"{holder.get('pid', '?')} on {holder.get('host', '?')}) writes them"
                )
                said = now
            time.sleep(_SHARED_POLL_SECONDS)
    try:
        yield
    finally:
        lease.release()
