"""Two writers of one index partition: on pods that share nothing, the second push is refused
and the bucket keeps the first run's file; on one machine or volume, the second run is
refused before it writes, naming the run that holds the partition."""

import multiprocessing
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
import pytest

from assets import documents
from assets.partitioning import INDEX_PARTITIONS, partition_stores, with_index_partitions
from assets.resources import FeatureStoreResource, build_resources
from lorehouse.settings import Settings
from lorehouse.stores.partition_lease import PartitionLease, PartitionLeaseHeld
from lorehouse.stores.partition_remote import PartitionClaimedElsewhere, PartitionRemote
from tests.dagster.conftest import s3_bucket

BUCKET = "lorehouse"
URI = f"s3://{BUCKET}/parts"
#: Processes forked, not spawned: a lease is a lock on an open file, which a forked child
#: opens for itself, and a fork starts in milliseconds.
FORK = multiprocessing.get_context("fork")


def _write(path: Path, n: int) -> None:
    with duckdb.connect(str(path)) as connection:
        connection.execute("CREATE TABLE IF NOT EXISTS t (n INTEGER)")
        connection.execute("INSERT INTO t VALUES (?)", [n])


def _rows(path: Path) -> list[int]:
    with duckdb.connect(str(path), read_only=True) as connection:
        return [row[0] for row in connection.sql("SELECT n FROM t ORDER BY n").fetchall()]


def _bucket_rows(client: Any, key: str, tmp_path: Path) -> list[int]:
    """The rows of the partition file the bucket holds, as a third pod would read them."""
    copy = tmp_path / f"read-back-{key}.duckdb"
    client.download_file(BUCKET, f"parts/{key}.duckdb", str(copy))
    return _rows(copy)


def _failure(result: dg.ExecuteInProcessResult) -> str:
    (failure,) = [event for event in result.all_events if event.is_step_failure]
    return failure.step_failure_data.error.message  # type: ignore[union-attr]


# -- pods that share no volume ---------------------------------------------------------------


def test_of_two_pods_writing_one_partition_the_first_commits_and_the_second_is_refused(
    tmp_path: Path, s3_endpoint: str
) -> None:
    client = s3_bucket(s3_endpoint, BUCKET)
    first, second = tmp_path / "pod-a", tmp_path / "pod-b"
    seed = PartitionRemote(client, URI, tmp_path / "seed")
    (tmp_path / "seed").mkdir()
    _write(tmp_path / "seed" / "p00.duckdb", 1)
    assert seed.push_store("p00")

    # Two runs of p00 start from the same file, each on its own pod, and both write.
    pod_a, pod_b = PartitionRemote(client, URI, first), PartitionRemote(client, URI, second)
    assert pod_a.pull_stores(["p00"]) == pod_b.pull_stores(["p00"]) == ["p00"]
    _write(first / "p00.duckdb", 2)
    _write(second / "p00.duckdb", 3)

    assert pod_a.push_store("p00")
    with pytest.raises(PartitionClaimedElsewhere) as refused:
        pod_b.push_store("p00")
    message = str(refused.value)
    assert "partition p00 was committed to the bucket by another run" in message
    assert f"on host {socket.gethostname()}" in message  # the pod that committed it
    assert "the rerun starts from that file" in message
    # Nothing of the first run's work is lost, and the second pod's rerun starts from it.
    assert _bucket_rows(client, "p00", tmp_path) == [1, 2]
    assert pod_b.pull_stores(["p00"]) == ["p00"]
    assert _rows(second / "p00.duckdb") == [1, 2]
    _write(second / "p00.duckdb", 3)
    assert pod_b.push_store("p00")
    assert _bucket_rows(client, "p00", tmp_path) == [1, 2, 3]


def test_of_two_pods_creating_one_partition_the_second_is_refused(
    tmp_path: Path, s3_endpoint: str
) -> None:
    client = s3_bucket(s3_endpoint, BUCKET)
    first, second = tmp_path / "pod-a", tmp_path / "pod-b"
    for root, n in ((first, 1), (second, 2)):
        root.mkdir()
        _write(root / "p01.duckdb", n)
    assert PartitionRemote(client, URI, first).push_store("p01")
    with pytest.raises(PartitionClaimedElsewhere, match="partition p01 was committed"):
        PartitionRemote(client, URI, second).push_store("p01")
    assert _bucket_rows(client, "p01", tmp_path) == [1]


def test_a_partition_removed_from_the_bucket_is_published_again_by_its_next_push(
    tmp_path: Path, s3_endpoint: str
) -> None:
    client = s3_bucket(s3_endpoint, BUCKET)
    pod = PartitionRemote(client, URI, tmp_path / "pod")
    (tmp_path / "pod").mkdir()
    _write(tmp_path / "pod" / "p02.duckdb", 1)
    assert pod.push_store("p02")
    client.delete_object(Bucket=BUCKET, Key="parts/p02.duckdb")
    _write(tmp_path / "pod" / "p02.duckdb", 2)
    # No other run's file to keep: the copy is published rather than refused forever.
    assert pod.push_store("p02")
    assert _bucket_rows(client, "p02", tmp_path) == [1, 2]


def test_a_partition_run_whose_partition_another_pod_committed_fails_saying_so(
    tmp_path: Path, s3_endpoint: str
) -> None:
    client = s3_bucket(s3_endpoint, BUCKET)
    (tmp_path / "seed").mkdir()
    _write(tmp_path / "seed" / "p00.duckdb", 1)
    assert PartitionRemote(client, URI, tmp_path / "seed").push_store("p00")
    other_pod = PartitionRemote(client, URI, tmp_path / "pod-b")

    @dg.asset(partitions_def=INDEX_PARTITIONS)
    def written(
        context: dg.AssetExecutionContext, feature_store: FeatureStoreResource
    ) -> dg.MaterializeResult:
        """A partition step whose partition another pod commits while the step works on it."""
        for key, store, _ in partition_stores(context, feature_store, "written"):
            other_pod.pull_stores([key])
            _write(other_pod.root / f"{key}.duckdb", 9)
            other_pod.push_store(key)
            with store.connect() as connection:
                connection.execute("INSERT INTO t VALUES (5)")
        return dg.MaterializeResult()

    config = Settings(
        source_uri=str(tmp_path),
        data_dir=tmp_path / "pod-a",
        index_partitions=4,
        partitions_uri=URI,
        s3_endpoint_url=s3_endpoint,
        s3_region="eu-west-1",
    )
    result = dg.materialize(
        [written],
        resources={"feature_store": build_resources(config)["feature_store"]},
        instance=dg.DagsterInstance.ephemeral(),
        partition_key="p00",
        raise_on_error=False,
    )
    assert not result.success
    assert "partition p00 was committed to the bucket by another run" in _failure(result)
    assert _bucket_rows(client, "p00", tmp_path) == [1, 9]


# -- one machine, or one volume ----------------------------------------------------------------


def _forked_worker(parent: int, started: Any) -> None:
    """A parse worker's stand-in: lives until the process that forked it is gone (a minute
    at most)."""
    started.set()
    deadline = time.monotonic() + 60
    while os.getppid() == parent and time.monotonic() < deadline:
        time.sleep(0.05)


def _hold(root: Path, key: str, run_id: str, then: str, pipe: Connection) -> None:
    """A writer in a process of its own: takes the lease, says so, and waits to be told to
    go on: it then finishes its work, or fails in the middle of it, and stays alive after."""
    try:
        with PartitionLease(root, key, run_id):
            if then == "fork a worker":
                # A worker forked during the work (as the parse pool's are) outlives it.
                started = FORK.Event()
                FORK.Process(target=_forked_worker, args=(os.getpid(), started)).start()
                assert started.wait(30)
            pipe.send("holding")
            pipe.recv()
            if then == "raise":
                raise RuntimeError("the work failed")
    except RuntimeError:
        pass
    pipe.send("done")
    pipe.recv()


@contextmanager
def _holder(
    root: Path, key: str, run_id: str, then: str = "finish"
) -> Iterator[tuple[Connection, int]]:
    """A writer holding partition `key` in another process: a pipe to it, and its pid."""
    ours, theirs = FORK.Pipe()
    process = FORK.Process(target=_hold, args=(root, key, run_id, then, theirs))
    process.start()
    try:
        assert ours.poll(30) and ours.recv() == "holding"
        assert process.pid is not None
        yield ours, process.pid
    finally:
        process.kill()
        process.join()


@pytest.mark.parametrize("then", ["finish", "raise", "fork a worker"])
def test_a_second_writer_of_a_partition_fails_at_once_naming_the_first(
    tmp_path: Path, then: str
) -> None:
    with _holder(tmp_path, "p03", "run-one", then) as (holder, pid):
        with pytest.raises(PartitionLeaseHeld) as refused:
            PartitionLease(tmp_path, "p03", "run-two").acquire()
        assert (
            f"partition p03 is being written by run run-one (pid {pid} on host "
            f"{socket.gethostname()}, since "
        ) in str(refused.value)
        # Another partition is not held.
        with PartitionLease(tmp_path, "p02", "run-two"):
            pass

        # Once the holder's work is over, finished or failed, the lease is free, though the
        # holder (and any worker it forked) lives on.
        holder.send("go on")
        assert holder.poll(30) and holder.recv() == "done"
        with PartitionLease(tmp_path, "p03", "run-two") as lease:
            assert lease.held
    assert not lease.held


def _config(tmp_path: Path) -> Settings:
    (tmp_path / "corpus").mkdir(exist_ok=True)
    return Settings(
        source_uri=str(tmp_path / "corpus"),
        data_dir=tmp_path / "data",
        workers=1,
        index_partitions=4,
    )


def _parse(config: Settings, key: str) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        with_index_partitions([documents.parsed_documents], config.index_partitions),
        resources=build_resources(config),
        instance=dg.DagsterInstance.ephemeral(),
        partition_key=key,
        raise_on_error=False,
    )


def test_a_partition_run_fails_at_once_while_another_run_holds_the_partition(
    tmp_path: Path,
) -> None:
    config = _config(tmp_path)
    with _holder(config.data_dir / "partitions", "p01", "the-sensors-run"):
        result = _parse(config, "p01")
    assert not result.success
    assert "partition p01 is being written by run the-sensors-run" in _failure(result)


def test_a_partition_run_that_failed_in_its_work_leaves_the_partition_free(
    tmp_path: Path,
) -> None:
    config = _config(tmp_path)
    # A store but no inventory slice: the parse fails in the middle of the partition's work.
    (config.data_dir / "partitions").mkdir(parents=True)
    duckdb.connect(str(config.data_dir / "partitions" / "p02.duckdb")).close()
    result = _parse(config, "p02")
    assert "partition p02 has no inventory slice" in _failure(result)

    ours, theirs = FORK.Pipe()

    def take() -> None:
        try:
            PartitionLease(config.data_dir / "partitions", "p02", "next-run").acquire()
            theirs.send("taken")
        except PartitionLeaseHeld as refused:
            theirs.send(str(refused))

    process = FORK.Process(target=take)
    process.start()
    process.join(30)
    assert ours.poll(1) and ours.recv() == "taken"
