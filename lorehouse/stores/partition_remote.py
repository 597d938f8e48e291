"""Partition files kept in an S3 bucket, for partition runs on pods that share no volume.

A partition run owns a DuckDB file (its share of the inventory and its stage tables) and a
LanceDB folder (its search rows). On one machine, or on pods that mount one ReadWriteMany
volume, both sit under `data_dir/partitions`. Many clusters only offer volumes one node
mounts at a time; there `LOREHOUSE_PARTITIONS_URI` names a bucket prefix instead:

- the LanceDB folders live in the bucket (LanceDB writes S3 itself);
- a DuckDB file cannot be written on S3 (and DuckDB's httpfs extension cannot be installed
  offline), so a step pulls its partition's file before it works and pushes it after, whole.
  It is small beside the vectors it describes (docs/operations.md gives sizes);
- the inventory run pushes the slices it publishes, and the merge pulls the files that
  changed since it last pulled them.

Each local copy has a sidecar (`<file>.sync`) recording the object's ETag and the file's
size and modification time when they last matched. A pull downloads only an object whose
ETag moved; a push uploads only a file written since. So a pod that died after its stage
committed batches but before its push keeps that work if the partition runs there again, and
any other pod starts from the last pushed file: the stages resume from their tables as after
any crash, and the embedding stage compares the LanceDB rows with the chunks itself.

A partition's push is conditional: it replaces the object only if the object still has the
ETag this copy was pulled or last pushed at (`If-Match`), or creates it only if there is none
(`If-None-Match: *`). Two runs of one partition on pods that share nothing (a UI backfill
beside a sensor's run, or `lorehouse materialize` beside either) would otherwise both push,
and the last push would silently drop the first run's work. With the condition the first
push commits and the second raises `PartitionClaimedElsewhere`: its run fails, the bucket
keeps the first run's file whole, and a rerun starts from that file. (On one machine or one
volume, `partition_lease` keeps a second writer out before it starts.)
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
from collections.abc import Callable, Iterable
from functools import cached_property
from pathlib import Path
from typing import Any

import duckdb

#: Where a partition's slice of the inventory and the slices' digests live, under the root.
INVENTORY = "inventory"
DIGESTS = "digests.json"


#: What S3 answers a conditional put whose condition no longer holds: the object changed
#: (412), another conditional write to it is in flight (409), or it is gone (404, `If-Match`).
_CONFLICTS = {"PreconditionFailed", "ConditionalRequestConflict", "NoSuchKey"}
#: The object metadata naming the pod that pushed a partition's file, read back on a conflict.
_WRITER = "lorehouse-writer"


class PartitionClaimedElsewhere(RuntimeError):
    """Another run committed a partition's file to the bucket after this run pulled it: this
    run's copy was not pushed, so nothing of the other run's file is lost."""

    def __init__(self, key: str, by: str = "") -> None:
        self.key = key
        super().__init__(
            f"partition {key} was committed to the bucket by another run"
            f"{f' ({by})' if by else ''} since this "
            "run pulled it, so this run's work on it was not pushed and the bucket keeps that "
            f"run's file whole. Run partition {key} again: the rerun starts from that file"
        )


class ConditionalWritesUnsupported(RuntimeError):
    """The bucket's S3 service refuses conditional puts, which fence two writers of a
    partition from each other."""


def _error_code(error: Exception) -> str:
    """The S3 error code of a boto3 `ClientError` (read from the error, so that this module
    needs no botocore import where the partitions are not in a bucket)."""
    response = getattr(error, "response", None)
    return str(response.get("Error", {}).get("Code", "")) if isinstance(response, dict) else ""


def _md5(path: Path) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with path.open("rb") as body:
        for block in iter(lambda: body.read(1 << 20), b""):
            digest.update(block)
    return f'"{digest.hexdigest()}"'


def _stat(path: Path) -> list[int]:
    stat = path.stat()
    return [stat.st_size, stat.st_mtime_ns]


class PartitionRemote:
    """The bucket prefix the partition files of a deployment are kept under, and the folder
    (`root`, the partitions folder of this pod's data dir) they are worked on in."""

    def __init__(self, client: Any | Callable[[], Any], uri: str, root: Path) -> None:
        """`client` is a boto3 S3 client, or a function building one when a copy is first
        made: a layout asked only where a partition's files are builds none."""
        if not uri.startswith("s3://"):
            raise ValueError(f"LOREHOUSE_PARTITIONS_URI must be an s3:// URI, not {uri!r}")
        bucket, _, prefix = uri.removeprefix("s3://").partition("/")
        if not bucket:
            raise ValueError(f"LOREHOUSE_PARTITIONS_URI names no bucket: {uri!r}")
        self._client = client
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.root = root

    @cached_property
    def client(self) -> Any:
        return self._client() if callable(self._client) else self._client

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}".rstrip("/")

    def index_uri(self, key: str) -> str:
        """The LanceDB folder of partition `key`, in the bucket."""
        return f"{self.uri}/{key}.lancedb"

    def indexed_keys(self) -> set[str]:
        """The partitions that have a LanceDB folder in the bucket."""
        _, folders = self._listing("")
        return {name.removesuffix(".lancedb") for name in folders if name.endswith(".lancedb")}

    # -- partition stores -------------------------------------------------------------------

    def pull_stores(self, keys: Iterable[str]) -> list[str]:
        """Downloads the DuckDB file of each of `keys` whose object changed since this pod
        last pulled or pushed it; returns those keys. A partition with no object keeps its
        local file (one built before the bucket was configured is pushed by its next run)."""
        objects, _ = self._listing("")
        pulled = []
        for key in keys:
            name = f"{key}.duckdb"
            if name in objects and self._pull(name, self.root / name, objects[name]):
                pulled.append(key)
        return pulled

    def push_store(self, key: str) -> bool:
        """Uploads partition `key`'s DuckDB file if it was written since it was last pulled
        or pushed; returns whether it was. Raises `PartitionClaimedElsewhere`, uploading
        nothing, when another run pushed the partition since this copy was pulled."""
        path = self.root / f"{key}.duckdb"
        if not path.exists():
            return False
        if path.with_name(path.name + ".wal").exists():
            # Committed work still in the write-ahead log belongs in the pushed file.
            with duckdb.connect(str(path)) as connection:
                connection.execute("CHECKPOINT")
        return self._push(path.name, path, fenced_as=key)

    def remove_partitions_except(self, keys: set[str], key_pattern: re.Pattern[str]) -> set[str]:
        """Deletes the objects of partitions not in `keys` (their store, their LanceDB
        folder, their inventory slice); returns the partitions removed."""
        objects, folders = self._listing("")
        slices, _ = self._listing(INVENTORY)
        doomed: list[str] = []
        removed: set[str] = set()
        for name in [*objects, *folders, *(f"{INVENTORY}/{name}" for name in slices)]:
            key = name.rsplit("/", 1)[-1].split(".", 1)[0]
            if not key_pattern.fullmatch(key) or key in keys:
                continue
            removed.add(key)
            if name in folders:
                doomed += self._objects_under(f"{name}/")
            else:
                doomed.append(self._object_key(name))
        for start in range(0, len(doomed), 1000):  # DeleteObjects takes 1,000 keys a call
            batch = [{"Key": key} for key in doomed[start : start + 1000]]
            self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": batch})
        return removed

    def _objects_under(self, folder: str) -> list[str]:
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=self._object_key(folder)
        )
        return [item["Key"] for page in pages for item in page.get("Contents", [])]

    # -- the inventory's slices -------------------------------------------------------------

    def push_inventory(self) -> int:
        """Uploads every slice written since it was last pushed, then the digests that say
        which slice is current; returns the slices uploaded. Comparing with what was pushed,
        not with what the inventory run changed, means a push cut short is finished by the
        next run."""
        folder = self.root / INVENTORY
        pushed = 0
        for path in sorted(folder.glob("p*.parquet")):
            pushed += self._push(f"{INVENTORY}/{path.name}", path)
        digests = folder / DIGESTS
        if digests.exists():
            self._push(f"{INVENTORY}/{DIGESTS}", digests)
        return pushed

    def pull_inventory(self, keys: Iterable[str]) -> None:
        """Downloads the slices' digests and the slices of `keys` that changed."""
        objects, _ = self._listing(INVENTORY)
        folder = self.root / INVENTORY
        for name in [DIGESTS, *(f"{key}.parquet" for key in keys)]:
            if name in objects:
                self._pull(f"{INVENTORY}/{name}", folder / name, objects[name])

    # -- objects ------------------------------------------------------------------------------

    def _object_key(self, name: str) -> str:
        return f"{self.prefix}/{name}" if self.prefix else name

    def _listing(self, folder: str) -> tuple[dict[str, str], set[str]]:
        """(ETag by object name, sub-folder names) directly under `folder` of the prefix."""
        prefix = self._object_key(f"{folder}/" if folder else "")
        if prefix == "/":
            prefix = ""
        objects: dict[str, str] = {}
        folders: set[str] = set()
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=prefix, Delimiter="/"
        )
        for page in pages:
            for item in page.get("Contents", []):
                objects[item["Key"][len(prefix) :]] = item["ETag"]
            for common in page.get("CommonPrefixes", []):
                folders.add(common["Prefix"][len(prefix) :].rstrip("/"))
        return objects, folders

    def _sidecar(self, path: Path) -> dict[str, Any]:
        try:
            return json.loads(path.with_name(path.name + ".sync").read_text())
        except (FileNotFoundError, ValueError):
            return {}

    def _record(self, path: Path, etag: str) -> None:
        sidecar = path.with_name(path.name + ".sync")
        partial = sidecar.with_name(sidecar.name + ".partial")
        partial.write_text(json.dumps({"etag": etag, "stat": _stat(path)}))
        partial.replace(sidecar)

    def _pull(self, name: str, path: Path, etag: str) -> bool:
        if path.exists() and self._sidecar(path).get("etag") == etag:
            return False
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.name + ".partial")
        response = self.client.get_object(Bucket=self.bucket, Key=self._object_key(name))
        with partial.open("wb") as out:
            for block in response["Body"].iter_chunks(1 << 20):
                out.write(block)
        # A log left by a run that died on this pod would be replayed onto the new file.
        path.with_name(path.name + ".wal").unlink(missing_ok=True)
        partial.replace(path)
        self._record(path, response["ETag"])
        return True

    def _push(self, name: str, path: Path, fenced_as: str | None = None) -> bool:
        """Uploads `path` as object `name` if it was written since it last matched the object.
        With `fenced_as` (a partition's key), only over the object this copy came from.

        The inventory's slices are pushed plainly: only the inventory's writer run publishes
        them, each rebuilt whole from the shared inventory, so the last push is a whole
        listing, not a half-merged one; and a writer whose volume was rebuilt (no sidecars)
        must still be able to publish over the slices its predecessor left."""
        sidecar = self._sidecar(path)
        if sidecar.get("stat") == _stat(path):
            return False
        if fenced_as is None:
            response = self._put(name, path)
        else:
            etag = sidecar.get("etag")
            condition = {"IfMatch": etag} if etag else {"IfNoneMatch": "*"}
            try:
                response = self._put(name, path, **condition)
            except Exception as error:
                code = _error_code(error)
                if code == "NotImplemented":
                    raise ConditionalWritesUnsupported(
                        f"the S3 service of {self.uri} refuses conditional writes (If-Match, "
                        "If-None-Match), which keep two runs of one partition from overwriting "
                        "each other's work: use one that supports them, as AWS S3 does"
                    ) from error
                if code not in _CONFLICTS:
                    raise
                response = self._after_conflict(name, path, fenced_as, code)
        self._record(path, response["ETag"])
        return True

    def _put(self, name: str, path: Path, **condition: str) -> dict[str, Any]:
        with path.open("rb") as body:
            return self.client.put_object(
                Bucket=self.bucket,
                Key=self._object_key(name),
                Body=body,
                Metadata={_WRITER: f"pid {os.getpid()} on host {socket.gethostname()}"},
                **condition,
            )

    def _after_conflict(self, name: str, path: Path, key: str, code: str) -> dict[str, Any]:
        """The put's answer where the refusal left nothing to protect, or else
        `PartitionClaimedElsewhere`."""
        if code == "NoSuchKey":
            # Removed from the bucket since this copy was pulled (by hand: Lorehouse removes
            # only partitions of an earlier bucket count): no other run's file to keep, so this
            # copy is published, unless another run has published one meanwhile.
            try:
                return self._put(name, path, IfNoneMatch="*")
            except Exception as error:
                if _error_code(error) not in _CONFLICTS:
                    raise
        try:
            current = self.client.head_object(Bucket=self.bucket, Key=self._object_key(name))
        except Exception:  # noqa: BLE001 (the conflict is known; the look is for its message)
            current = {}
        if current.get("ETag") == _md5(path):
            # This very file: an upload retried after its first attempt had landed.
            return current
        by = [current.get("Metadata", {}).get(_WRITER)]
        if current.get("LastModified"):
            by.append(f"at {current['LastModified']:%Y-%m-%d %H:%M:%S %Z}")
        raise PartitionClaimedElsewhere(key, ", ".join(filter(None, by)))
