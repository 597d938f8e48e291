"""What the Dagster UI shows about the index's health: stale stages, a source that moved on,
documents that failed."""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg

from assets.documents import raw_documents
from assets.freshness import index_matches_source, no_failed_documents, sources_synced
from assets.resources import build_resources
from lorehouse.settings import Settings
from pipelines.definitions import defs
from tests.dagster.conftest import materialize_all, metadata_of
from tests.web_site import Site, html, serve

INDEXING_ASSETS = [
    "raw_documents",
    "parsed_documents",
    "chunks",
    "enriched_chunks",
    "merged_partitions",
    "document_features",
    "chunk_embeddings",
    "search_index",
]


def test_every_indexing_stage_is_flagged_stale_after_a_missed_night() -> None:
    graph = defs.resolve_asset_graph()
    for name in INDEXING_ASSETS:
        policy = graph.get(dg.AssetKey(name)).freshness_policy
        assert policy is not None, name
        assert policy.fail_window.to_timedelta() == timedelta(hours=26), name


def test_source_changes_and_failed_documents_are_reported(tmp_path: Path) -> None:
    source, data_dir = tmp_path / "source", tmp_path / "data"
    source.mkdir()
    (source / "kept.md").write_text("# Kept\n\nStays as it is.\n")
    (source / "edited.md").write_text("# Edited\n\nFirst version.\n")
    (source / "deleted.md").write_text("# Deleted\n\nGoes away.\n")
    (source / "broken.pdf").write_bytes(b"%PDF-1.7\n1 0 obj << /Type /Catalog")
    assert materialize_all(source, data_dir).success
    with dg.build_resources(
        build_resources(Settings(source_uri=str(source), data_dir=data_dir))
    ) as resources:
        stores = {"document_source": resources.document_source}
        stores["feature_store"] = resources.feature_store
    current = index_matches_source(**stores)
    assert current.passed
    failed = no_failed_documents(feature_store=stores["feature_store"])
    assert not failed.passed
    assert failed.severity == dg.AssetCheckSeverity.WARN
    assert failed.metadata["failed_documents"].value == 1
    assert "broken.pdf" in failed.metadata["failures"].value

    later = time.time() + 5
    (source / "edited.md").write_text("# Edited\n\nSecond version.\n")
    os.utime(source / "edited.md", (later, later))
    (source / "deleted.md").unlink()
    (source / "added.md").write_text("# Added\n\nNew.\n")
    stale = index_matches_source(**stores)
    assert not stale.passed
    assert stale.severity == dg.AssetCheckSeverity.WARN
    counts = {k: stale.metadata[k].value for k in ("added", "changed", "removed")}
    assert counts == {"added": 1, "changed": 1, "removed": 1}
    assert "edited.md" in stale.metadata["not_yet_indexed"].value

    assert materialize_all(source, data_dir).success
    assert index_matches_source(**stores).passed


def test_a_source_that_stops_answering_fails_sources_synced_then_turns_it_red(
    tmp_path: Path,
) -> None:
    wiki, files = Site(), tmp_path / "files"
    wiki.page("/w/", html("Wiki", "Expenses over EUR 5,000 need the CFO."))
    files.mkdir()
    (files / "travel.md").write_text("# Travel\n\nHotels up to CAD 240 a night.\n")
    with serve(wiki):
        settings = Settings(
            source_uri=f"wiki={wiki.base_url}/w/ files={files}", data_dir=tmp_path / "data"
        )
        resources = build_resources(settings)
        with dg.build_resources(resources) as initialized:
            source = initialized.document_source
        inventory = dg.materialize(
            [raw_documents], resources=resources, instance=dg.DagsterInstance.ephemeral()
        )
        assert metadata_of(inventory, "raw_documents")["sources_synced"] == 1
        assert sources_synced(document_source=source).passed

        wiki.robots_status = 503
        kept = dg.materialize(
            [raw_documents], resources=resources, instance=dg.DagsterInstance.ephemeral()
        )
    meta = metadata_of(kept, "raw_documents")
    assert (meta["sources_failed"], meta["removed"], meta["dagster/row_count"]) == (1, 0, 2)
    assert "robots.txt" in meta["sources"]
    failing = sources_synced(document_source=source)
    assert not failing.passed and failing.severity == dg.AssetCheckSeverity.WARN
    assert failing.metadata["failing_sources"].value == 1
    assert failing.metadata["stale_sources"].value == 0

    # A day and more without an answer: past the nightly window, an error.
    state_path = next((tmp_path / "data" / "connectors").glob("*/state.json"))
    state = json.loads(state_path.read_text())
    state["synced_at"] = (datetime.now(UTC) - timedelta(hours=27)).isoformat()
    state_path.write_text(json.dumps(state))
    stale = sources_synced(document_source=source)
    assert not stale.passed and stale.severity == dg.AssetCheckSeverity.ERROR
    assert stale.metadata["stale_sources"].value == 1
    assert stale.metadata["hours_since_oldest_sync"].value >= 27
    assert "wiki" in stale.metadata["sources"].value
