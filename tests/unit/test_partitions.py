"""Hash buckets of the corpus: the same bucket in Python and in SQL, slices that follow the
inventory, and a partition store that adopts its slice."""

from __future__ import annotations

import hashlib
from pathlib import Path

import duckdb

from lorehouse.settings import Settings
from lorehouse.stores.duckdb_store import DuckDBStore
from lorehouse.stores.partitions import (
    bucket_of,
    bucket_sql,
    partition_keys,
    publish_inventory_slices,
)
from lorehouse.wiring import Lorehouse


def test_keys_sort_in_bucket_order_past_a_hundred() -> None:
    assert partition_keys(4) == ["p00", "p01", "p02", "p03"]
    keys = partition_keys(128)
    assert keys[0] == "p000" and keys[-1] == "p127" and keys == sorted(keys)


def test_the_bucket_in_sql_is_the_bucket_in_python() -> None:
    ids = [hashlib.sha256(f"folder/file-{n}.md".encode()).hexdigest()[:20] for n in range(2000)]
    with duckdb.connect() as connection:
        connection.execute("CREATE TABLE ids (doc_id VARCHAR)")
        connection.executemany("INSERT INTO ids VALUES (?)", [[i] for i in ids])
        for partitions in (1, 7, 16):
            found = dict(
                connection.execute(
                    f"SELECT doc_id, {bucket_sql('doc_id', partitions)} FROM ids"
                ).fetchall()
            )
            assert found == {i: bucket_of(i, partitions) for i in ids}
    counts = [sum(bucket_of(i, 16) == b for i in ids) for b in range(16)]
    assert min(counts) > 2000 / 16 * 0.6  # evenly spread, not all in one bucket


def _inventory(store: DuckDBStore, paths: dict[str, list[str]]) -> None:
    rows = [
        (hashlib.sha256(p.encode()).hexdigest()[:20], "file:///c", p, "md", 10, "0" * 64, acl)
        for p, acl in paths.items()
    ]
    with store.connect() as connection:
        connection.execute("DELETE FROM documents_raw")
        connection.executemany(
            "INSERT INTO documents_raw (doc_id, source_uri, rel_path, file_type, size_bytes, "
            "content_sha256, modified_at, acl_groups) "
            "VALUES (?, ?, ?, ?, ?, ?, TIMESTAMPTZ '2026-01-01 00:00:00+00', ?)",
            rows,
        )


def test_slices_follow_the_inventory_and_a_partition_adopts_its_own(tmp_path: Path) -> None:
    wiring = Lorehouse(Settings(data_dir=tmp_path, index_partitions=4))
    shared, layout = wiring.feature_store(), wiring.partition_layout()
    paths = {f"doc-{n}.md": ["everyone"] for n in range(40)}
    _inventory(shared, paths)
    assert publish_inventory_slices(shared, layout) == layout.keys
    assert publish_inventory_slices(shared, layout) == []  # nothing changed

    gone = "doc-3.md"
    gone_id = hashlib.sha256(gone.encode()).hexdigest()[:20]
    key = layout.keys[bucket_of(gone_id, 4)]
    partition = wiring.partition_store(key)
    partition.adopt_inventory(layout.inventory_slice(key))
    adopted = set(partition.column_values("documents_raw", "rel_path").to_pylist())
    assert gone in adopted
    bucket = layout.keys.index(key)
    assert all(bucket_of(hashlib.sha256(p.encode()).hexdigest()[:20], 4) == bucket for p in adopted)

    del paths[gone]
    paths["doc-1.md"] = ["finance"]  # an access list that changed
    _inventory(shared, paths)
    changed = publish_inventory_slices(shared, layout)
    doc1_key = layout.keys[bucket_of(hashlib.sha256(b"doc-1.md").hexdigest()[:20], 4)]
    assert changed == sorted({key, doc1_key})
    assert partition.adopt_inventory(layout.inventory_slice(key)) == 1
    assert gone not in set(partition.column_values("documents_raw", "rel_path").to_pylist())


def test_a_new_bucket_count_publishes_every_slice_again(tmp_path: Path) -> None:
    wiring = Lorehouse(Settings(data_dir=tmp_path, index_partitions=2))
    _inventory(wiring.feature_store(), {f"d{n}.md": [] for n in range(10)})
    publish_inventory_slices(wiring.feature_store(), wiring.partition_layout())
    wider = Lorehouse(Settings(data_dir=tmp_path, index_partitions=3))
    assert publish_inventory_slices(wider.feature_store(), wider.partition_layout()) == (
        wider.partition_layout().keys
    )
