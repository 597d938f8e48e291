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
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from functools import cached_property
from pathlib import Path
from typing import Any

import duckdb

#: Where a partition's slice of the inventory and the slices' digests live, under the root.
INVENTORY = "inventory"
DIGESTS = "digests.json"


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
        or pushed; returns whether it was."""
        path = self.root / f"{key}.duckdb"
        if not path.exists():
            return False
        if path.with_name(path.name + ".wal").exists():
            # Committed work still in the write-ahead log belongs in the pushed file.
            with duckdb.connect(str(path)) as connection:
                connection.execute("CHECKPOINT")
        return self._push(path.name, path)

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

    def _push(self, name: str, path: Path) -> bool:
        if self._sidecar(path).get("stat") == _stat(path):
            return False
        with path.open("rb") as body:
            response = self.client.put_object(
                Bucket=self.bucket, Key=self._object_key(name), Body=body
            )
        self._record(path, response["ETag"])
        return True
