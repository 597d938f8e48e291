"""The code location loads, and its graph, checks, job and schedule are what the docs say."""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from assets.policies import SHARED_STORES_POOL
from assets.resources import build_resources
from lorehouse.settings import REPO_ROOT, Settings
from lorehouse.stores.duckdb_store import DuckDBStore
from pipelines.definitions import build_definitions, defs
from pipelines.jobs import INDEX_WRITER_TAG
from tests.web_site import Site, html, serve


def test_loading_the_code_location_leaves_what_only_a_stage_uses_unloaded() -> None:
    """Every Dagster process (the webserver, the daemon, each run and step process or pod)
    loads the code location first. The libraries only one stage uses are loaded by that
    stage: PyMuPDF by the parse pool, LanceDB by what reads or writes a table, YAKE by the
    enrichment. Loaded with the code location they cost each process over a second and
    about 130 MB."""
    listed = subprocess.run(
        [
            sys.executable,
            "-W",
            "ignore",
            "-c",
            "import sys, pipelines.definitions; print(' '.join(sys.modules))",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    loaded = set(listed.stdout.split())
    assert "pipelines.definitions" in loaded
    assert not {"pymupdf", "lancedb", "lance", "yake"} & loaded


def test_asset_graph_runs_raw_to_parsed() -> None:
    graph = defs.resolve_asset_graph()
    assert dg.AssetKey("parsed_documents") in graph.get_all_asset_keys()
    parsed = graph.get(dg.AssetKey("parsed_documents"))
    assert parsed.parent_keys == {dg.AssetKey("raw_documents")}


def test_feature_stages_follow_parsing_in_order() -> None:
    graph = defs.resolve_asset_graph()
    chain = ["parsed_documents", "chunks", "enriched_chunks"]
    for parent, child in itertools.pairwise(chain):
        assert graph.get(dg.AssetKey(child)).parent_keys == {dg.AssetKey(parent)}
    # The merge reads the inventory and the partitioned stages' files, after the last of
    # them (a partition's publish) is done with those files; the feature tables read it.
    assert graph.get(dg.AssetKey("merged_partitions")).parent_keys == {
        dg.AssetKey(name) for name in ["raw_documents", *chain, "published_partition"]
    }
    assert graph.get(dg.AssetKey("document_features")).parent_keys == {
        dg.AssetKey("merged_partitions")
    }


def test_vectors_follow_enrichment_and_search_reads_their_merge() -> None:
    graph = defs.resolve_asset_graph()
    assert graph.get(dg.AssetKey("chunk_embeddings")).parent_keys == {
        dg.AssetKey("enriched_chunks")
    }
    assert graph.get(dg.AssetKey("search_index")).parent_keys == {
        dg.AssetKey("chunk_embeddings"),
        dg.AssetKey("document_features"),
    }
    # Each partition publishes its own vectors, as the last step of its run.
    published = graph.get(dg.AssetKey("published_partition"))
    assert published.parent_keys == {dg.AssetKey("chunk_embeddings")}
    assert published.partitions_def == graph.get(dg.AssetKey("chunk_embeddings")).partitions_def


def test_each_stage_has_its_data_contract_check() -> None:
    graph = defs.resolve_asset_graph()
    check_names = {key.name for key in graph.asset_check_keys}
    assert {
        "raw_documents_contract",
        "parsed_documents_contract",
        "parse_failures_contract",
        "every_document_accounted_for",
        "chunks_contract",
        "enriched_chunks_contract",
        "documents_contract",
        "chunk_faqs_contract",
        "chunk_keywords_contract",
        "chunk_embeddings_match_chunks",
    } <= check_names


def test_nightly_schedule_starts_the_inventory_and_the_chain_carries_it_on() -> None:
    schedule = defs.resolve_schedule_def("nightly_reindex_schedule")
    assert schedule.cron_schedule == "0 2 * * *"
    assert schedule.job_name == "inventory_job"
    chain = defs.resolve_sensor_def("changed_partitions_sensor")
    assert chain.default_status == dg.DefaultSensorStatus.RUNNING
    assert {target.job_name for target in chain.targets} == {
        "partitions_job",
        "publish_job",
        "merge_job",
    }
    assert defs.resolve_job_def("merge_job") is not None


def test_shared_store_writers_are_one_pool_of_one_slot(tmp_path: Path) -> None:
    """Every step that writes the shared stores (the inventory, a partition's publish, the
    merges of every partition) is in one Dagster pool, which the shipped instance settings
    give one slot: one such step at a time across all runs. Partition runs build in their
    own files side by side, and publish as their last step; no run-level limit holds whole
    writer runs back (an inventory waits for no eval)."""
    shutil.copy(REPO_ROOT / "pipelines" / "dagster.yaml", tmp_path / "dagster.yaml")
    instance = dg.DagsterInstance.from_config(str(tmp_path))
    try:
        config = instance.get_concurrency_config()
        limits = config.run_queue_config.tag_concurrency_limits
        assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"
    finally:
        instance.dispose()
    assert config.pool_config.default_pool_limit == 1
    graph = defs.resolve_asset_graph()
    writers = {
        "raw_documents",
        "published_partition",
        "merged_partitions",
        "document_features",
        "search_index",
    }
    pools = {key.to_user_string(): graph.get(key).pools for key in graph.get_all_asset_keys()}
    assert {name for name, pool in pools.items() if pool} == writers
    assert {next(iter(pools[name])) for name in writers} == {SHARED_STORES_POOL}
    assert not [limit for limit in limits if limit.get("value") == "index"]
    partitions = defs.resolve_job_def("partitions_job")
    assert partitions.tags[INDEX_WRITER_TAG] == "partition"
    assert dg.AssetKey("published_partition") in partitions.asset_layer.selected_asset_keys
    assert {"key": INDEX_WRITER_TAG, "value": "partition", "limit": 2} in limits
    # One run per partition key at a time, whoever launched it.
    per_partition = {"key": "dagster/partition", "value": {"applyLimitPerUniqueValue": True}}
    assert {**per_partition, "limit": 1} in limits
    sensor = defs.resolve_sensor_def("source_change_sensor")
    schedule = defs.resolve_schedule_def("nightly_reindex_schedule")
    assert sensor.job_name == schedule.job_name == "inventory_job"


def test_writer_runs_alone_get_the_deployments_kubernetes_config(tmp_path: Path) -> None:
    """With the partitions' files in a bucket, only the runs writing the shared stores mount
    the feature-store volume: the config Dagster's Kubernetes launcher reads from the
    `dagster-k8s/config` tag goes on them, and partition runs schedule on any node."""
    mount = {
        "container_config": {"volume_mounts": [{"name": "data", "mount_path": "/data"}]},
        "pod_spec_config": {
            "volumes": [{"name": "data", "persistent_volume_claim": {"claim_name": "lh"}}]
        },
    }
    settings = Settings(
        data_dir=tmp_path,
        partitions_uri="s3://index/partitions",
        writer_run_k8s_config=json.loads(json.dumps(mount)),
    )
    configured = build_definitions(settings)
    for writer in ("index_job", "inventory_job", "merge_job"):
        assert json.loads(configured.resolve_job_def(writer).tags["dagster-k8s/config"]) == mount
    assert "dagster-k8s/config" not in configured.resolve_job_def("partitions_job").tags
    assert "dagster-k8s/config" not in defs.resolve_job_def("merge_job").tags  # unset: none


def _code_versions(settings: Settings) -> dict[str, str | None]:
    graph = build_definitions(settings).resolve_asset_graph()
    return {key.to_user_string(): graph.get(key).code_version for key in graph.get_all_asset_keys()}


def test_a_stage_version_change_shows_as_new_code_from_that_stage_on(tmp_path: Path) -> None:
    """The UI marks an asset changed when its code version moves: only the stage whose
    version changed moves, so only it and what depends on it are flagged."""
    base = _code_versions(Settings(data_dir=tmp_path))
    staged = ["parsed_documents", "chunks", "enriched_chunks", "document_features"]
    assert all(base[name] for name in [*staged, "chunk_embeddings"])

    smaller_chunks = _code_versions(Settings(data_dir=tmp_path, chunk_max_tokens=128))
    assert {k for k in base if base[k] != smaller_chunks[k]} == {"chunks"}

    embed_model = "openai/text-embedding-3-small"
    other_model = _code_versions(Settings(data_dir=tmp_path, embed_model=embed_model))
    assert {k for k in base if base[k] != other_model[k]} == {"chunk_embeddings", "search_index"}

    ocr = _code_versions(Settings(data_dir=tmp_path, pdf_ocr_languages="eng"))
    assert {k for k in base if base[k] != ocr[k]} == {"parsed_documents"}

    prompts = tmp_path / "prompts"
    prompts.mkdir()
    with_llm = Settings(data_dir=tmp_path, llm_model="openai/gpt-4o-mini", prompts_dir=prompts)
    before_edit = _code_versions(with_llm)
    (prompts / "chunk_enrichment.v1.md").write_text("Summarise {text} under {breadcrumb}.")
    after_edit = _code_versions(with_llm)
    assert {k for k in base if before_edit[k] != after_edit[k]} == {"enriched_chunks"}


def test_every_table_asset_names_its_table_and_columns() -> None:
    graph = defs.resolve_asset_graph()
    tables = {}
    pictures = set()
    for key in graph.get_all_asset_keys():
        metadata = graph.get(key).metadata
        if "dagster/column_schema" not in metadata:
            pictures.add(key.to_user_string())
            continue
        schema = metadata["dagster/column_schema"]
        tables[key.to_user_string()] = (
            metadata["dagster/table_name"],
            [column.name for column in schema.columns],
        )
    assert set(tables) == {
        "raw_documents",
        "parsed_documents",
        "chunks",
        "enriched_chunks",
        "merged_partitions",
        "document_features",
        "chunk_embeddings",
        "published_partition",
        "search_index",
        "retrieval_eval",
        "answer_eval",
    }
    assert pictures == {"embedding_map"}  # its output is its metadata: the map itself
    assert tables["raw_documents"][0] == "documents_raw"
    assert {"doc_id", "rel_path", "content_sha256"} <= set(tables["raw_documents"][1])
    assert {"chunk_id", "vector", "acl"} <= set(tables["chunk_embeddings"][1])
    assert {"question", "answer", "score"} <= set(tables["answer_eval"][1])
    assert all(graph.get(key).owners == ["team:lorehouse"] for key in graph.get_all_asset_keys())


def test_each_connector_is_a_resource_the_launchpad_configures_for_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOREHOUSE_CONFLUENCE_TOKEN", "secret-token")
    site = Site()
    site.page("/docs/", html("Handbook", "Start here.", ["a.html", "b.html"]))
    site.page("/docs/a.html", html("A", "Expenses over EUR 5,000 need the CFO."))
    site.page("/docs/b.html", html("B", "Hotels up to CAD 240 a night."))
    with serve(site):
        settings = Settings(
            source_uri=f"{site.base_url}/docs/",
            data_dir=tmp_path / "data",
            confluence_token="secret-token",
        )
        defs = build_definitions(settings)
        job = defs.resolve_job_def("inventory_job")
        resources = job.run_config_schema.config_type.fields["resources"].config_type.fields
        config = {key: resources[key].config_type.fields["config"] for key in resources}
        # One resource per connector, beside the source; its secret is an environment
        # variable's name in the UI, never its value.
        assert {"google_drive", "confluence", "sharepoint", "web_site"} <= set(config)
        assert "confluence_token" in config["confluence"].config_type.fields
        assert "web_max_pages" not in config["document_source"].config_type.fields
        token = build_resources(settings)["confluence"].data["confluence_token"]
        assert isinstance(token, dg.EnvVar) and token.env_var_name == "LOREHOUSE_CONFLUENCE_TOKEN"
        # What the launchpad sets on web_site is what the run's crawl obeys.
        launched = job.execute_in_process(
            run_config={"resources": {"web_site": {"config": {"web_max_pages": 1}}}},
            instance=dg.DagsterInstance.ephemeral(),
        )
    assert launched.success
    listed = DuckDBStore(tmp_path / "data" / "lorehouse.duckdb").table("documents_raw")
    assert list(listed["rel_path"]) == ["index.html"]
