"""The whole graph on the sample corpus: chunk counts, enrichment metadata, the cache."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from assets import chunks, documents, features
from assets.checks import checks_of
from assets.partitioning import all_partitions_tags
from assets.resources import build_resources
from lorehouse.settings import BUNDLED_SAMPLE_CORPUS, Settings
from lorehouse.stores.duckdb_store import DuckDBStore
from tests.dagster.conftest import metadata_of

MODULES = [documents, chunks, features]


def _materialize_everything(data_dir: Path) -> dg.ExecuteInProcessResult:
    settings = Settings(source_uri=str(BUNDLED_SAMPLE_CORPUS), data_dir=data_dir, workers=2)
    return dg.materialize(
        [
            *dg.load_assets_from_modules(MODULES),
            *checks_of(MODULES),
        ],
        resources=build_resources(settings),
        instance=dg.DagsterInstance.ephemeral(),
        tags=all_partitions_tags(settings.index_partitions),
    )


def test_graph_builds_the_document_list_and_reruns_from_cache(data_dir: Path) -> None:
    first = _materialize_everything(data_dir)
    assert first.success
    assert all(check.passed for check in first.get_asset_check_evaluations())
    chunk_meta = metadata_of(first, "chunks")
    enrich_meta = metadata_of(first, "enriched_chunks")
    assert chunk_meta["chunks_written"] == chunk_meta["dagster/row_count"] > 50
    assert chunk_meta["table_chunks_written"] > 5
    assert enrich_meta["enrichment_mode"] == "extractive"
    assert enrich_meta["llm_calls"] == 0
    assert enrich_meta["computed"] > 0
    assert enrich_meta["failures"] == 0

    store = DuckDBStore(data_dir / "lorehouse.duckdb")
    documents_table = store.table("documents").set_index("title")
    handbook = documents_table.loc["Employee Handbook"]
    assert handbook["n_pages"] == 9
    assert handbook["summary"]
    assert list(store.table("documents")["acl"].map(list)).count(["security"]) == 2
    assert store.row_count("chunk_keywords") > 100
    assert store.row_count("chunk_faqs") == 0  # extractive mode writes no FAQs

    second = _materialize_everything(data_dir)
    assert second.success
    again = metadata_of(second, "enriched_chunks")
    assert again["computed"] == 0
    assert again["documents_up_to_date"] == enrich_meta["documents"]
    assert again["documents"] == again["cache_hits"] == 0
    assert metadata_of(second, "chunks")["documents_chunked"] == 0
