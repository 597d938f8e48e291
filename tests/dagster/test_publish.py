"""A partition's publish into the shared stores waits its turn: the shared stores' pool has
one slot on the shipped instance, so two writers never commit at once, whichever run,
launcher or process holds the other; and a writer killed outright does not hold the slot
for ever."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
import uuid
from pathlib import Path

import dagster as dg

from assets.policies import SHARED_STORES_POOL
from lorehouse.inventory import document_id
from lorehouse.settings import REPO_ROOT, Settings
from lorehouse.stores.lance_index import ChunkIndex
from lorehouse.stores.partition_lease import SHARED_STORES_LEASE, PartitionLease
from lorehouse.stores.partitions import bucket_of
from lorehouse.wiring import Lorehouse
from pipelines.definitions import build_definitions
from pipelines.local_runs import PID_TAG, free_slots_of_dead_runs, local_run_tags

PUBLISHED = dg.AssetKey("published_partition")


def _one_note(tmp_path: Path) -> Settings:
    """A deployment of two partitions over a folder holding one note."""
    source = tmp_path / "docs"
    source.mkdir()
    (source / "note.md").write_text("# Note\n\nThe shared stores take one writer at a time.\n")
    return Settings(
        source_uri=str(source), data_dir=tmp_path / "data", index_partitions=2, workers=1
    )


def test_a_publish_waits_while_another_run_writes_the_shared_stores(tmp_path: Path) -> None:
    home = tmp_path / "dagster"
    home.mkdir()
    shutil.copy(REPO_ROOT / "pipelines" / "dagster.yaml", home / "dagster.yaml")
    settings = _one_note(tmp_path)
    defs = build_definitions(settings)
    instance = dg.DagsterInstance.from_config(str(home))
    try:
        assert defs.resolve_job_def("inventory_job").execute_in_process(instance=instance).success
        storage = instance.event_log_storage
        # Another run's merge step holds the pool's one slot, as a merge_job run would.
        assert storage.initialize_concurrency_limit_to_default(SHARED_STORES_POOL)
        other = str(uuid.uuid4())
        assert storage.claim_concurrency_slot(SHARED_STORES_POOL, other, "search_index").is_claimed

        results: list[dg.ExecuteInProcessResult] = []
        publish = defs.resolve_job_def("publish_job")
        run = threading.Thread(
            target=lambda: results.append(
                publish.execute_in_process(instance=instance, partition_key="p00")
            )
        )
        run.start()
        time.sleep(8)
        assert run.is_alive(), "the publish did not wait for the slot"
        assert not instance.get_materialized_partitions(PUBLISHED)
        info = storage.get_concurrency_info(SHARED_STORES_POOL)
        assert info.slot_count == 1 and info.pending_step_count == 1

        storage.free_concurrency_slots_for_run(other)
        run.join(timeout=120)
        assert not run.is_alive()
        assert results and results[0].success
        assert instance.get_materialized_partitions(PUBLISHED) == {"p00"}
    finally:
        instance.dispose()


def test_a_killed_local_run_gives_its_pool_slot_back_to_the_next_one(tmp_path: Path) -> None:
    """A `lorehouse materialize` killed outright leaves its run started and its slot held;
    the next one on the same host frees it (the dead run marked failed), or every later
    publish would wait for it without end. A live process's slot is left alone."""
    home = tmp_path / "dagster"
    home.mkdir()
    shutil.copy(REPO_ROOT / "pipelines" / "dagster.yaml", home / "dagster.yaml")
    instance = dg.DagsterInstance.from_config(str(home))
    try:
        storage = instance.event_log_storage
        assert storage.initialize_concurrency_limit_to_default(SHARED_STORES_POOL)
        gone = subprocess.Popen(["true"])
        gone.wait()
        runs = {}
        for name, pid in (("dead", gone.pid), ("alive", os.getpid())):
            run = instance.create_run_for_job(
                dg.GraphDefinition(name=f"job_{name}").to_job(),
                tags={**local_run_tags(), PID_TAG: str(pid)},
            )
            instance.handle_run_event(
                run.run_id,
                dg.DagsterEvent(dg.DagsterEventType.RUN_START.value, job_name=run.job_name),
            )
            runs[name] = run.run_id
        assert storage.claim_concurrency_slot(SHARED_STORES_POOL, runs["dead"], "s").is_claimed

        assert free_slots_of_dead_runs(instance, [SHARED_STORES_POOL]) == [runs["dead"]]
        failed = instance.get_run_by_id(runs["dead"])
        assert failed is not None and failed.status == dg.DagsterRunStatus.FAILURE
        # The slot is the live run's to take now; it is never freed behind its back.
        assert storage.claim_concurrency_slot(SHARED_STORES_POOL, runs["alive"], "s").is_claimed
        assert free_slots_of_dead_runs(instance, [SHARED_STORES_POOL]) == []
        info = storage.get_concurrency_info(SHARED_STORES_POOL)
        assert info.active_run_ids == {runs["alive"]}
    finally:
        instance.dispose()


def test_a_publish_waits_for_another_writer_whatever_launched_it(tmp_path: Path) -> None:
    """Runs on ephemeral instances (two `lorehouse materialize` without DAGSTER_HOME) claim no
    pool slot; the shared stores' lease still holds a publish until the other writer is
    done, since two publishes at once would each publish the versions they saw."""
    settings = _one_note(tmp_path)
    defs = build_definitions(settings)
    assert defs.resolve_job_def("inventory_job").execute_in_process().success
    layout = Lorehouse(settings).partition_layout()
    key = layout.keys[bucket_of(document_id("note.md"), 2)]
    results: list[dg.ExecuteInProcessResult] = []
    partition_run = defs.resolve_job_def("partitions_job")
    run = threading.Thread(
        target=lambda: results.append(partition_run.execute_in_process(partition_key=key))
    )
    with PartitionLease(layout.root, SHARED_STORES_LEASE, "another-run"):
        run.start()
        # The partition's own stages go on; its publish waits for the other writer.
        deadline = time.monotonic() + 120
        while not layout.index_path(key).exists() and time.monotonic() < deadline:
            time.sleep(0.5)
        time.sleep(8)
        assert run.is_alive(), "the publish did not wait for the other writer"
        assert not (settings.data_dir / "lancedb").exists()
    run.join(timeout=120)
    assert not run.is_alive()
    assert results and results[0].success
    published = results[0].asset_materializations_for_node("published_partition")
    assert published and published[0].metadata["published"].value is True
    searched = ChunkIndex(str(settings.data_dir / "lancedb")).column_values("doc_id")
    assert searched.to_pylist() == [document_id("note.md")]
