"""The index in partitions: runs side by side, a build equal to one partition's, and a
changed or deleted document that reruns its own partition only."""

from __future__ import annotations

import multiprocessing
import shutil
import uuid
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
import lancedb
import pytest

from assets import chunks, documents, embeddings, features
from assets.partitioning import with_index_partitions
from assets.resources import build_resources
from lorehouse.inventory import document_id
from lorehouse.settings import BUNDLED_SAMPLE_CORPUS, Settings
from lorehouse.stores.lance_index import ChunkIndex
from lorehouse.stores.partitions import bucket_of, partition_keys
from pipelines.definitions import build_definitions
from pipelines.local_runs import workspace_job_origin
from tests.conftest import materialize_everything
from tests.dagster.conftest import metadata_of

MODULES = [documents, chunks, features, embeddings]
PER_DOCUMENT = [
    documents.parsed_documents,
    chunks.chunks,
    features.enriched_chunks,
    embeddings.chunk_embeddings,
]


def _config(source: Path, data_dir: Path, partitions: int) -> Settings:
    return Settings(
        source_uri=str(source), data_dir=data_dir, workers=1, index_partitions=partitions
    )


def _run(
    definitions: list[Any], config: Settings, first: str, last: str, **kwargs: Any
) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        with_index_partitions(definitions, config.index_partitions),
        resources=build_resources(config),
        instance=dg.DagsterInstance.ephemeral(),
        tags={
            "dagster/asset_partition_range_start": first,
            "dagster/asset_partition_range_end": last,
        },
        **kwargs,
    )


def _partition_range(source: str, data_dir: str, first: str, last: str) -> None:
    """One partition run, in its own process, as a run pod or a backfill's run would be."""
    result = _run(PER_DOCUMENT, _config(Path(source), Path(data_dir), 4), first, last)
    assert result.success


def _searchable(data_dir: Path) -> dict[str, Any]:
    """What search and the API read, by table, in a stable order."""
    with duckdb.connect(str(data_dir / "lorehouse.duckdb"), read_only=True) as connection:
        found: dict[str, Any] = {
            name: connection.sql(query).fetchall()
            for name, query in {
                "chunks": "SELECT chunk_id, doc_id, text_embed, text_chat, acl, heading_path, "
                "page_start, page_end FROM chunks ORDER BY chunk_id",
                "enriched": "SELECT chunk_id, summary, faqs, keywords, status "
                "FROM enriched_chunks ORDER BY chunk_id",
                "documents": "SELECT doc_id, title, summary, n_chunks, acl FROM documents "
                "ORDER BY doc_id",
                "faqs": "SELECT * FROM chunk_faqs ORDER BY ALL",
                "keywords": "SELECT * FROM chunk_keywords ORDER BY ALL",
                "parsed": "SELECT doc_id, markdown, page_map FROM documents_parsed ORDER BY 1",
            }.items()
        }
    index = lancedb.connect(str(data_dir / "lancedb"))
    for name in index.list_tables().tables:
        table = index.open_table(name).to_arrow()
        key = table.column_names[0]
        found[f"lancedb.{name}"] = sorted(map(str, table.column(key).to_pylist()))
    return found


@pytest.mark.slow
def test_two_partition_runs_at_once_build_what_one_run_builds(
    materialized_sample: Path, tmp_path: Path
) -> None:
    """Two processes, each running two of four partitions, then the merge: search reads
    what the one-run build of the same corpus (sixteen partitions, in one process) holds."""
    whole = materialized_sample
    data_dir = tmp_path / "four-partitions"
    config = _config(BUNDLED_SAMPLE_CORPUS, data_dir, 4)
    assert _run([documents.raw_documents], config, "p00", "p03").success
    context = multiprocessing.get_context("spawn")
    runs = [
        context.Process(
            target=_partition_range, args=(str(BUNDLED_SAMPLE_CORPUS), str(data_dir), a, b)
        )
        for a, b in (("p00", "p01"), ("p02", "p03"))
    ]
    for run in runs:
        run.start()
    for run in runs:
        run.join(timeout=300)
        assert run.exitcode == 0
    # Each partition with documents wrote its own files, and nothing shared: search sees no
    # row yet.
    with_documents = {_bucket_key(path, 4) for path in _sample_paths()}
    assert len(with_documents) > 1
    assert sorted(p.name for p in (data_dir / "partitions").glob("p*")) == sorted(
        f"{key}.{kind}" for key in with_documents for kind in ("duckdb", "lancedb")
    )
    assert not (data_dir / "lancedb").exists()
    rest = [features.merged_partitions, features.document_features, embeddings.search_index]
    merged = _run(rest, config, "p00", "p03")
    assert merged.success
    assert metadata_of(merged, "merged_partitions")["partitions_merged"] == 4

    built, reference = _searchable(data_dir), _searchable(whole)
    # The one-run build ran the evals too, whose naive baseline keeps a table of its own.
    del reference["lancedb.naive_chunks"]
    assert built.keys() == reference.keys()
    for table in reference:
        assert built[table] == reference[table], table
    for table in ("chunks", "lancedb.chunks", "lancedb.token_vectors"):
        keys = [row[0] if isinstance(row, tuple) else row for row in built[table]]
        assert len(set(keys)) == len(keys) > 0  # no chunk twice


def _sample_paths() -> list[str]:
    """The sample corpus's documents, as the inventory names them (sidecars are not)."""
    return [
        path.relative_to(BUNDLED_SAMPLE_CORPUS).as_posix()
        for path in BUNDLED_SAMPLE_CORPUS.rglob("*")
        if path.is_file() and not path.name.endswith(".meta.json") and path.name != "_access.json"
    ]


def _bucket_key(rel_path: str, partitions: int) -> str:
    return partition_keys(partitions)[bucket_of(document_id(rel_path), partitions)]


def _chain_tick(defs: dg.Definitions, instance: dg.DagsterInstance, cursor: str | None) -> Any:
    """One evaluation of changed_partitions_sensor as the daemon runs it, which also checks
    that every requested job is one of the sensor's targets."""
    with dg.build_sensor_context(
        instance=instance, cursor=cursor, repository_def=defs.get_repository_def()
    ) as context:
        tick = defs.resolve_sensor_def("changed_partitions_sensor").evaluate_tick(context)
        return tick, tick.cursor or cursor


def _queued_run(instance: dg.DagsterInstance, key: str) -> str:
    """A partitions_job run of `key` as the run queue holds it before its turn."""
    run = dg.DagsterRun(
        job_name="partitions_job",
        run_id=str(uuid.uuid4()),
        status=dg.DagsterRunStatus.QUEUED,
        tags={"lorehouse/writes": "partition", "dagster/partition": key},
        remote_job_origin=workspace_job_origin("partitions_job"),
    )
    instance.add_run(run)
    return run.run_id


def _requests(tick: Any) -> list[tuple[str | None, str | None]]:
    assert tick.run_requests, tick.skip_message
    return [(request.job_name, request.partition_key) for request in tick.run_requests]


def _skipped(tick: Any) -> str:
    assert not tick.run_requests, tick.run_requests
    return tick.skip_message or ""


@pytest.mark.slow
def test_an_edit_and_a_deletion_rerun_only_their_partitions_and_publish_as_they_end(
    tmp_path: Path,
) -> None:
    """The nightly path: the inventory run, then changed_partitions_sensor's runs of the
    touched partitions alone, each searchable when it ends, then the whole index's checks;
    a partition behind (not run yet, or killed half-way) delays no other and is named."""
    source = Path(shutil.copytree(BUNDLED_SAMPLE_CORPUS, tmp_path / "corpus"))
    data_dir = tmp_path / "data"
    defs = build_definitions(_config(source, data_dir, 4))
    without_evals = [
        key for key in defs.resolve_asset_graph().get_all_asset_keys() if "eval" not in key.path[0]
    ]
    with dg.instance_for_test() as instance:

        def run(name: str, **kwargs: Any) -> dg.ExecuteInProcessResult:
            job = defs.resolve_job_def(name)
            selected = [key for key in without_evals if key in job.asset_layer.selected_asset_keys]
            return job.execute_in_process(instance=instance, asset_selection=selected, **kwargs)

        assert run("index_job").success
        # A full run merged itself: the inventory that follows finds nothing to run.
        assert run("inventory_job").success
        nothing, cursor = _chain_tick(defs, instance, None)
        assert "changed no partition" in _skipped(nothing)

        edited, deleted = "engineering/oncall-runbook.md", "hr/parental-leave-faq.md"
        (source / edited).write_text((source / edited).read_text() + "\n\nPage the backup.\n")
        (source / deleted).unlink()
        touched = sorted({_bucket_key(edited, 4), _bucket_key(deleted, 4)})
        inventory = run("inventory_job")
        assert metadata_of(inventory, "raw_documents")["changed_partitions"] == touched
        launched, cursor = _chain_tick(defs, instance, cursor)
        assert _requests(launched) == [("partitions_job", key) for key in touched]

        waiting, cursor = _chain_tick(defs, instance, cursor)
        assert f"not published yet: {touched[0]}" in _skipped(waiting)
        parsed = 0
        for number, key in enumerate(touched):
            partition_run = run("partitions_job", partition_key=key)
            assert partition_run.success
            parsed += int(metadata_of(partition_run, "parsed_documents")["parsed_this_run"])
            assert metadata_of(partition_run, "published_partition")["published"] is True
            if number == 0:
                # One partition done is searchable at once; the checks wait for the other
                # while its run is queued.
                queued = _queued_run(instance, touched[1])
                waiting, cursor = _chain_tick(defs, instance, cursor)
                assert f"{touched[1]} queued" in _skipped(waiting)
                instance.delete_run(queued)
        assert parsed == 1
        # Each partition's run published its own rows as it ended: no merge run was needed.
        searchable = _searchable(data_dir)
        texts = [row[2] for row in searchable["chunks"] if row[1] == document_id(edited)]
        assert any("Page the backup." in text for text in texts)
        _assert_gone(data_dir, searchable, deleted)

        checks, cursor = _chain_tick(defs, instance, cursor)
        assert _requests(checks) == [("merge_job", None)]
        merged = run("merge_job")
        assert merged.success
        assert metadata_of(merged, "merged_partitions")["merged"] == []
        assert metadata_of(merged, "search_index")["partitions_compared"] == 0
        assert _searchable(data_dir) == searchable
        done, cursor = _chain_tick(defs, instance, cursor)
        assert "no inventory run since the last merge" in _skipped(done)

        # A new file, and a merge run before its partition caught up: the merge goes on with
        # every other partition and names that one; search does not see the file yet, and
        # the chain indexes it.
        added = "engineering/new-service.md"
        (source / added).write_text("# New service\n\nThe new service pages the platform team.\n")
        assert run("inventory_job").success
        early = run("merge_job")
        assert metadata_of(early, "merged_partitions")["partitions_behind"] == [
            _bucket_key(added, 4)
        ]
        assert metadata_of(early, "search_index")["partitions_behind"] == []
        assert _searchable(data_dir)["chunks"] == searchable["chunks"]
        launched, cursor = _chain_tick(defs, instance, cursor)
        assert _requests(launched) == [("partitions_job", _bucket_key(added, 4))]
        assert run("partitions_job", partition_key=_bucket_key(added, 4)).success
        assert document_id(added) in {row[1] for row in _searchable(data_dir)["chunks"]}
        merge, cursor = _chain_tick(defs, instance, cursor)
        assert _requests(merge) == [("merge_job", None)]
        assert run("merge_job").success

        # Two inventories before the checks: the partition the first named finished before
        # the second, which names another; the checks must not wait for the first forever.
        names = [f"engineering/service-{number}.md" for number in range(20)]
        first = names[0]
        second = next(name for name in names if _bucket_key(name, 4) != _bucket_key(first, 4))
        for name in (first, second):
            (source / name).write_text(f"# {name}\n\nThe {name} service is owned by platform.\n")
            assert run("inventory_job").success
            launched, cursor = _chain_tick(defs, instance, cursor)
            assert _requests(launched) == [("partitions_job", _bucket_key(name, 4))]
            assert run("partitions_job", partition_key=_bucket_key(name, 4)).success
        merge, cursor = _chain_tick(defs, instance, cursor)
        assert _requests(merge) == [("merge_job", None)]
        assert run("merge_job").success
        chunks = {row[1] for row in _searchable(data_dir)["chunks"]}
        assert {document_id(first), document_id(second)} <= chunks

        # A partition whose run dies after chunking delays no other: an edit in another
        # partition is searchable when that partition's run ends, the dead partition's
        # documents stay as they were last published, except one whose access was narrowed
        # meanwhile, which leaves search at that publish, until its own partition's run is
        # done.
        (source / first).write_text((source / first).read_text() + "\nIt is paged at night.\n")
        (source / f"{second}.meta.json").write_text('{"groups": ["hr"]}')
        assert run("inventory_job").success
        launched, cursor = _chain_tick(defs, instance, cursor)
        dead, alive = _bucket_key(second, 4), _bucket_key(first, 4)
        assert sorted(_requests(launched)) == sorted(
            [("partitions_job", alive), ("partitions_job", dead)]
        )
        killed = [dg.AssetKey("parsed_documents"), dg.AssetKey("chunks")]
        job = defs.resolve_job_def("partitions_job")
        assert job.execute_in_process(
            instance=instance, asset_selection=killed, partition_key=dead
        ).success
        published = run("partitions_job", partition_key=alive)
        assert published.success
        assert metadata_of(published, "published_partition")["documents_withheld"] >= 1
        searchable = _searchable(data_dir)
        texts = [row[2] for row in searchable["chunks"] if row[1] == document_id(first)]
        assert any("paged at night" in text for text in texts)
        _assert_not_in_search(data_dir, second)
        others = [
            row
            for row in searchable["documents"]
            if _bucket_key_of_id(row[0], 4) == dead and row[0] != document_id(second)
        ]
        assert others  # the rest of the dead partition is still searchable
        # Nothing of the dead partition is queued or running: the checks go on without it.
        merge, cursor = _chain_tick(defs, instance, cursor)
        assert _requests(merge) == [("merge_job", None)]
        merged = run("merge_job")
        assert merged.success
        # The feature store takes the dead partition's new stage tables; its search rows are
        # behind them, and the narrowed document stays out of search.
        assert metadata_of(merged, "merged_partitions")["partitions_behind"] == []
        assert metadata_of(merged, "search_index")["partitions_behind"] == [dead]
        narrowed = [row for row in _searchable(data_dir)["chunks"] if row[1] == document_id(second)]
        assert narrowed and all(list(row[4]) == ["hr"] for row in narrowed)
        _assert_not_in_search(data_dir, second)
        waiting, cursor = _chain_tick(defs, instance, cursor)
        assert f"not published yet: {dead}" in _skipped(waiting)
        # Its rerun completes it, and the document is back under its new access list.
        assert run("partitions_job", partition_key=dead).success
        back = [row for row in _searchable(data_dir)["chunks"] if row[1] == document_id(second)]
        assert back and all(list(row[4]) == ["hr"] for row in back)
        assert ChunkIndex(str(data_dir / "lancedb")).count(f"doc_id = '{document_id(second)}'")
        merge, cursor = _chain_tick(defs, instance, cursor)
        assert _requests(merge) == [("merge_job", None)]
        assert run("merge_job").success

        # Its access changed and changed back before its partition ran again: withheld in
        # between, then served again from the partition's unchanged rows.
        sidecar = source / f"{second}.meta.json"
        sidecar.write_text('{"groups": ["hr", "people-leads"]}')
        assert run("inventory_job").success
        assert run("merge_job").success
        _assert_not_in_search(data_dir, second)
        sidecar.write_text('{"groups": ["hr"]}')
        assert run("inventory_job").success
        assert run("merge_job").success
        again = [row for row in _searchable(data_dir)["chunks"] if row[1] == document_id(second)]
        assert again == back
        assert ChunkIndex(str(data_dir / "lancedb")).count(f"doc_id = '{document_id(second)}'")
        _, cursor = _chain_tick(defs, instance, cursor)  # the two inventories, seen

        # A deployment whose chunker changed: no document changed, yet every partition was
        # built by other code, so every one reruns.
        rechunked = build_definitions(
            _config(source, data_dir, 4).model_copy(update={"chunk_max_tokens": 128})
        )
        assert run("inventory_job").success
        every, _ = _chain_tick(rechunked, instance, cursor)
        assert _requests(every) == [("partitions_job", key) for key in partition_keys(4)]


def _bucket_key_of_id(doc_id: str, partitions: int) -> str:
    return partition_keys(partitions)[bucket_of(doc_id, partitions)]


def _assert_not_in_search(data_dir: Path, rel_path: str) -> None:
    """No shared LanceDB table holds a row of the document."""
    gone = document_id(rel_path)
    index = lancedb.connect(str(data_dir / "lancedb"))
    for name in index.list_tables().tables:
        table = index.open_table(name)
        if "doc_id" in table.schema.names:
            assert table.count_rows(f"doc_id = '{gone}'") == 0, name


def _assert_gone(data_dir: Path, searchable: dict[str, Any], deleted: str) -> None:
    """A deleted document is in no shared table, no table of its partition's file and no
    LanceDB table."""
    gone = document_id(deleted)
    assert not [row for row in searchable["chunks"] if row[1] == gone]
    assert not [row for row in searchable["documents"] if row[0] == gone]
    assert not [row for row in searchable["parsed"] if row[0] == gone]
    partition = data_dir / "partitions" / f"{_bucket_key(deleted, 4)}.duckdb"
    with duckdb.connect(str(partition), read_only=True) as connection:
        for table in ("documents_raw", "documents_parsed", "chunks", "enriched_chunks"):
            (count,) = connection.execute(
                f"SELECT count(*) FROM {table} WHERE doc_id = ?", [gone]
            ).fetchone()
            assert count == 0, table
    index = lancedb.connect(str(data_dir / "lancedb"))
    for name in index.list_tables().tables:
        table = index.open_table(name)
        if "doc_id" in table.schema.names:
            assert table.count_rows(f"doc_id = '{gone}'") == 0, name


@pytest.mark.slow
def test_an_upgrade_or_a_new_bucket_count_builds_nothing_again(
    materialized_sample: Path, tmp_path: Path
) -> None:
    """A store built before partitions, then a deployment moving to another bucket count:
    each new partition takes its documents' rows and vectors from the shared stores, so
    nothing is parsed, chunked, enriched or embedded again, and search reads what it did."""
    data_dir = Path(shutil.copytree(materialized_sample, tmp_path / "data"))
    before = _searchable(data_dir)
    shutil.rmtree(data_dir / "partitions")  # as the shared stores were before partitions
    documents = len(before["documents"])
    for partitions in (4, 3):
        result = materialize_everything(
            BUNDLED_SAMPLE_CORPUS, data_dir, with_evals=False, index_partitions=partitions
        )
        assert result.success
        parsed = metadata_of(result, "parsed_documents")
        assert (parsed["parsed_this_run"], parsed["failed_this_run"]) == (0, 0)
        assert parsed["unchanged_skipped"] == documents
        # After the upgrade every document comes from the shared store; after the new count,
        # those that moved bucket (the others are in their partition's file already).
        seeded = parsed["documents_seeded"]
        assert seeded == documents if partitions == 4 else 0 < seeded < documents
        assert metadata_of(result, "chunks")["documents_chunked"] == 0
        assert metadata_of(result, "enriched_chunks")["computed"] == 0
        embedded = metadata_of(result, "chunk_embeddings")
        assert embedded["embedded"] == embedded["documents_embedded"] == 0
        assert embedded["sentence_windows_embedded"] == embedded["token_vectors_embedded"] == 0
        assert embedded["vectors_seeded"] >= embedded["chunks"] > 0
        after = _searchable(data_dir)
        for table in before:
            assert after[table] == before[table], (partitions, table)
        # The earlier count's partitions are gone once the new ones merged (4 -> 3: p03).
        keys = partition_keys(partitions)
        assert {p.name for p in (data_dir / "partitions").glob("p*")} == {
            f"{key}.{kind}" for key in keys for kind in ("duckdb", "lancedb")
        }
        assert {p.stem for p in (data_dir / "partitions" / "inventory").glob("p*")} == set(keys)
        removed = metadata_of(result, "merged_partitions")["stale_partitions_removed"]
        assert removed == ([] if partitions == 4 else ["p03"])
    # A second run under the same count seeds nothing: its partitions are its own now.
    again = materialize_everything(
        BUNDLED_SAMPLE_CORPUS, data_dir, with_evals=False, index_partitions=3
    )
    assert metadata_of(again, "parsed_documents")["documents_seeded"] == 0
    assert metadata_of(again, "chunk_embeddings")["vectors_seeded"] == 0


def test_a_chain_cursor_written_before_per_partition_marks_still_reads() -> None:
    """A deployment upgraded mid-chain keeps waiting for what it was waiting for."""
    from pipelines.sensors import ChainCursor

    old = ChainCursor.decode('{"pending": ["p01", "p03"], "seen": 12, "since": 9}')
    assert old.seen == 12 and old.pending == {"p01": 9, "p03": 9}
    assert ChainCursor.decode(old.encode()) == old
    assert ChainCursor.decode(None) == ChainCursor()
