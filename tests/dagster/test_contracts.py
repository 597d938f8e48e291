"""Data-contract checks read their table in batches; what spans batches is checked in DuckDB."""

from __future__ import annotations

import pytest

from assets import documents as documents_assets
from assets.documents import schema_check
from assets.resources import FeatureStoreResource
from lorehouse.schemas import RawDocumentsSchema, chunks_schema
from lorehouse.stores.duckdb_store import DuckDBStore


@pytest.fixture
def five_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every table checked 5 rows at a time: 24 chunks in 5 batches, 12 documents in 3."""
    monkeypatch.setattr(documents_assets, "CONTRACT_BATCH_ROWS", 5)
    monkeypatch.setattr(documents_assets, "CONTRACT_BATCH_ROWS_BY_TABLE", {})


def _check_chunks(store: DuckDBStore) -> tuple[bool, dict]:
    result = schema_check(
        "chunks",
        chunks_schema(256),
        FeatureStoreResource(data_dir=str(store.path.parent), index_partitions=1),
    )
    return result.passed, {key: value.value for key, value in result.metadata.items()}


def test_batches_cover_the_table_once(stage_tables_store: DuckDBStore, five_batches: None) -> None:
    """Documents cut between batches (2 chunks each, 5 rows a batch) still pass: positions
    per document are checked over the whole table."""
    batches = list(stage_tables_store.table_batches("chunks", 5))
    assert [len(batch) for batch in batches] == [5, 5, 5, 5, 4]
    chunk_ids = [chunk_id for batch in batches for chunk_id in batch["chunk_id"]]
    assert sorted(chunk_ids) == sorted(set(chunk_ids)) and len(chunk_ids) == 24
    assert _check_chunks(stage_tables_store) == (True, {"rows": 24})


def test_a_duplicate_in_another_batch_still_fails(
    stage_tables_store: DuckDBStore, five_batches: None
) -> None:
    """The first and the last document claim one path: no batch sees both rows, the check in
    DuckDB does."""
    first, other = "p/0.md", "doc-11"
    with stage_tables_store.connect() as connection:
        connection.execute("UPDATE documents_raw SET rel_path = ? WHERE doc_id = ?", [first, other])
    store = FeatureStoreResource(data_dir=str(stage_tables_store.path.parent), index_partitions=1)
    result = schema_check("documents_raw", RawDocumentsSchema, store)
    cases = result.metadata["failure_cases"].value
    assert not result.passed
    assert first in cases and "unique (2 rows)" in cases


def test_a_gap_in_positions_fails(stage_tables_store: DuckDBStore, five_batches: None) -> None:
    with stage_tables_store.connect() as connection:
        connection.execute("DELETE FROM chunks WHERE chunk_id = 'doc-3-0'")
    passed, metadata = _check_chunks(stage_tables_store)
    assert not passed
    assert "positions must run 0..n-1" in metadata["failure_cases"]
