"""Partition runs on pods that share no volume: each pod's data folder holds only what it
pulled, the partitions' files meet in a bucket (a local S3 server), and the writer's merge
reads every partition's rows, once each."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest
from pydantic import ValidationError

from assets import documents, embeddings, features
from lorehouse.inventory import document_id
from lorehouse.settings import BUNDLED_SAMPLE_CORPUS, Settings
from lorehouse.stores.partition_remote import PartitionRemote
from lorehouse.stores.partitions import PARTITION_KEY
from tests.dagster.conftest import metadata_of, s3_bucket
from tests.dagster.test_partitions import (
    PER_DOCUMENT,
    _bucket_key,
    _run,
    _sample_paths,
    _searchable,
)

BUCKET = "lorehouse"
MERGE = [features.merged_partitions, features.document_features, embeddings.search_index]


def _config(source: Path, data_dir: Path, endpoint: str | None) -> Settings:
    """One pod's settings: its own data folder, and the partitions in the bucket."""
    return Settings(
        source_uri=str(source),
        data_dir=data_dir,
        workers=1,
        index_partitions=4,
        partitions_uri=f"s3://{BUCKET}/lorehouse/partitions" if endpoint else None,
        s3_endpoint_url=endpoint,
        s3_region="eu-west-1",
    )


def _stores(data_dir: Path) -> set[str]:
    return {path.name for path in (data_dir / "partitions").glob("p*.duckdb")}


@pytest.mark.slow
def test_partition_runs_on_pods_without_a_shared_volume_meet_in_the_bucket(
    tmp_path: Path, s3_endpoint: str
) -> None:
    client = s3_bucket(s3_endpoint, BUCKET)
    source = Path(shutil.copytree(BUNDLED_SAMPLE_CORPUS, tmp_path / "corpus"))
    writer, pod_a, pod_b = tmp_path / "writer", tmp_path / "pod-a", tmp_path / "pod-b"
    with_documents = {_bucket_key(path, 4) for path in _sample_paths()}

    assert _run(
        [documents.raw_documents], _config(source, writer, s3_endpoint), "p00", "p03"
    ).success
    listed = client.list_objects_v2(Bucket=BUCKET, Prefix="lorehouse/partitions/inventory/")
    assert {item["Key"].rsplit("/", 1)[-1] for item in listed["Contents"]} == {
        "digests.json",
        *(f"{key}.parquet" for key in with_documents),
    }
    assert _run(PER_DOCUMENT, _config(source, pod_a, s3_endpoint), "p00", "p01").success
    assert _run(PER_DOCUMENT, _config(source, pod_b, s3_endpoint), "p02", "p03").success
    # Each pod worked on its own partitions' stores only; their vectors went to the bucket.
    assert _stores(pod_a) == {f"{key}.duckdb" for key in with_documents & {"p00", "p01"}}
    assert _stores(pod_b) == {f"{key}.duckdb" for key in with_documents & {"p02", "p03"}}
    assert not [
        *(pod_a / "partitions").glob("*.lancedb"),
        *(pod_b / "partitions").glob("*.lancedb"),
    ]
    assert not _stores(writer)

    merged = _run(MERGE, _config(source, writer, s3_endpoint), "p00", "p03")
    assert merged.success
    assert metadata_of(merged, "merged_partitions")["merged"] == sorted(with_documents)
    assert _stores(writer) == {f"{key}.duckdb" for key in with_documents}  # pulled to merge

    # What search reads is every partition's rows, once each: the files the pods pushed,
    # read back (a partitioned build equals one machine's: test_partitions.py).
    partition_chunks: list[str] = []
    for key in sorted(with_documents):
        store = writer / "partitions" / f"{key}.duckdb"
        with duckdb.connect(str(store), read_only=True) as connection:
            partition_chunks += [
                r[0] for r in connection.sql("SELECT chunk_id FROM chunks").fetchall()
            ]
    built = _searchable(writer)
    for table in ("chunks", "lancedb.chunks"):
        keys = [row[0] if isinstance(row, tuple) else row for row in built[table]]
        assert sorted(keys) == sorted(partition_chunks), table

    # An edit, then its partition on a pod that has never run it: it starts from the bucket's
    # copy, so only the edited document is parsed again.
    edited = "engineering/oncall-runbook.md"
    (source / edited).write_text((source / edited).read_text() + "\n\nPage the backup.\n")
    inventory = _run([documents.raw_documents], _config(source, writer, s3_endpoint), "p00", "p03")
    key = _bucket_key(edited, 4)
    assert metadata_of(inventory, "raw_documents")["changed_partitions"] == [key]
    pod_c = tmp_path / "pod-c"
    rerun = _run(PER_DOCUMENT, _config(source, pod_c, s3_endpoint), key, key)
    parsed = metadata_of(rerun, "parsed_documents")
    assert (parsed["parsed_this_run"], parsed["unchanged_skipped"]) == (
        1,
        sum(_bucket_key(path, 4) == key for path in _sample_paths()) - 1,
    )
    assert _run(MERGE, _config(source, writer, s3_endpoint), "p00", "p03").success
    texts = [row[2] for row in _searchable(writer)["chunks"] if row[1] == document_id(edited)]
    assert any("Page the backup." in text for text in texts)


def _rows(path: Path) -> list[int]:
    with duckdb.connect(str(path), read_only=True) as connection:
        return [row[0] for row in connection.sql("SELECT n FROM t ORDER BY n").fetchall()]


def _write(path: Path, n: int) -> None:
    with duckdb.connect(str(path)) as connection:
        connection.execute("CREATE TABLE IF NOT EXISTS t (n INTEGER)")
        connection.execute("INSERT INTO t VALUES (?)", [n])


def test_a_pull_keeps_work_not_pushed_yet_and_takes_a_newer_object(
    tmp_path: Path, s3_endpoint: str
) -> None:
    client = s3_bucket(s3_endpoint, BUCKET)
    here = PartitionRemote(client, f"s3://{BUCKET}/parts", tmp_path / "here")
    there = PartitionRemote(client, f"s3://{BUCKET}/parts", tmp_path / "there")
    (tmp_path / "here").mkdir()
    _write(tmp_path / "here" / "p00.duckdb", 1)
    assert here.push_store("p00")
    assert not here.push_store("p00")  # nothing written since
    assert there.pull_stores(["p00", "p01"]) == ["p00"]
    assert _rows(tmp_path / "there" / "p00.duckdb") == [1]

    # A run there committed more, then its pod died before pushing: the bucket did not move,
    # so the next pull there keeps that work, and the next push publishes it.
    _write(tmp_path / "there" / "p00.duckdb", 2)
    assert there.pull_stores(["p00"]) == []
    assert _rows(tmp_path / "there" / "p00.duckdb") == [1, 2]

    # Another pod pushed since: its file replaces the copy, and a log left beside the copy is
    # dropped rather than replayed onto the new file.
    _write(tmp_path / "here" / "p00.duckdb", 3)
    assert here.push_store("p00")
    (tmp_path / "there" / "p00.duckdb.wal").write_bytes(b"left by a dead run")
    assert there.pull_stores(["p00"]) == ["p00"]
    assert _rows(tmp_path / "there" / "p00.duckdb") == [1, 3]
    assert not (tmp_path / "there" / "p00.duckdb.wal").exists()


def test_partitions_of_an_earlier_bucket_count_leave_the_bucket(
    tmp_path: Path, s3_endpoint: str
) -> None:
    client = s3_bucket(s3_endpoint, BUCKET)
    for key in (
        "parts/p00.duckdb",
        "parts/p05.duckdb",
        "parts/inventory/p05.parquet",
        "parts/inventory/digests.json",
        "parts/p000.lancedb/data/a.lance",
        "parts/p00.lancedb/data/b.lance",
    ):
        client.put_object(Bucket=BUCKET, Key=key, Body=b"rows")
    remote = PartitionRemote(client, f"s3://{BUCKET}/parts", tmp_path)
    assert remote.remove_partitions_except({"p00", "p01"}, PARTITION_KEY) == {"p05", "p000"}
    left = client.list_objects_v2(Bucket=BUCKET, Prefix="parts/")["Contents"]
    assert sorted(item["Key"] for item in left) == [
        "parts/inventory/digests.json",
        "parts/p00.duckdb",
        "parts/p00.lancedb/data/b.lance",
    ]


def test_a_partitions_uri_outside_a_bucket_is_refused_with_its_reason() -> None:
    with pytest.raises(ValidationError, match="must be an s3:// bucket prefix"):
        Settings(partitions_uri="/mnt/shared/partitions")
