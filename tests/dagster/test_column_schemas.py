"""The column schemas the Dagster UI shows: the stores' own columns, each described, and the
search index's vector as wide as the configured model's."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import lancedb
import pyarrow as pa
import pytest

from lorehouse.embedding.minilm import EMBEDDING_DIMENSION
from lorehouse.settings import Settings
from lorehouse.stores.duckdb_store import declared_columns
from lorehouse.stores.lance_index import chunk_schema
from lorehouse.wiring import Lorehouse
from pipelines.asset_attributes import (
    COLUMN_DESCRIPTIONS,
    PROVIDER_VECTOR_TYPE,
    TABLE_COLUMN_DESCRIPTIONS,
    TABLES,
    column_schemas,
)
from pipelines.definitions import defs

PROVIDER_MODEL = "openai/text-embedding-3-small"
LANCE_ASSETS = [asset for asset, table in TABLES.items() if table.startswith("lancedb.")]


def _store_columns() -> dict[str, list[str]]:
    """table -> its columns, as the stores create them."""
    tables = {table: [name for name, _ in columns] for table, columns in declared_columns().items()}
    return {**tables, "lancedb.chunks": chunk_schema(1, "").names}


def _vector_type(schema: dg.TableSchema) -> str:
    return next(column.type for column in schema.columns if column.name == "vector")


@pytest.fixture
def no_embedding(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fails the test if anything asks for the embedder: describing the vector column must
    not call a provider."""

    def refuse(self: Lorehouse) -> None:
        raise AssertionError("the column schemas asked for the embedder")

    monkeypatch.setattr(Lorehouse, "embedder", refuse)


def test_the_ui_shows_every_column_the_stores_create_each_described() -> None:
    """What the code location publishes: a new column in a store shows up here, and fails
    until it is described."""
    graph = defs.resolve_asset_graph()
    tables = _store_columns()
    assert LANCE_ASSETS == ["chunk_embeddings", "published_partition", "search_index"]
    for asset, table in TABLES.items():
        schema = graph.get(dg.AssetKey(asset)).metadata["dagster/column_schema"]
        assert [column.name for column in schema.columns] == tables[table], asset
        undescribed = [column.name for column in schema.columns if not column.description]
        assert not undescribed, f"{asset} ({table}) has columns without a description"


def test_no_description_is_left_over_from_a_removed_column() -> None:
    tables = _store_columns()
    written = {table: tables[table] for table in TABLES.values()}
    every_column = {column for columns in written.values() for column in columns}
    assert set(COLUMN_DESCRIPTIONS) <= every_column
    for table, overrides in TABLE_COLUMN_DESCRIPTIONS.items():
        assert set(overrides) <= set(written[table]), table
        # An override says something the shared description does not.
        assert all(text != COLUMN_DESCRIPTIONS.get(name) for name, text in overrides.items())


def test_the_vector_is_as_wide_as_the_bundled_model(tmp_path: Path, no_embedding: None) -> None:
    schemas = column_schemas(Lorehouse(Settings(data_dir=tmp_path)))
    for asset in LANCE_ASSETS:
        assert _vector_type(schemas[asset]) == str(pa.list_(pa.float32(), EMBEDDING_DIMENSION))
        assert _vector_type(schemas[asset]) == "fixed_size_list<item: float>[384]"


def test_a_provider_model_before_its_first_embedding_has_no_width_yet(
    tmp_path: Path, no_embedding: None
) -> None:
    settings = Settings(data_dir=tmp_path, embed_model=PROVIDER_MODEL)
    schemas = column_schemas(Lorehouse(settings))
    assert {_vector_type(schemas[asset]) for asset in LANCE_ASSETS} == {PROVIDER_VECTOR_TYPE}
    # Looking for the table did not create the LanceDB folder.
    assert not Path(settings.lancedb_location).exists()


def test_a_provider_model_shows_the_width_its_table_records(
    tmp_path: Path, no_embedding: None
) -> None:
    settings = Settings(data_dir=tmp_path, embed_model=PROVIDER_MODEL)
    database = lancedb.connect(settings.lancedb_location)
    database.create_table("chunks", schema=chunk_schema(1536, PROVIDER_MODEL))
    schemas = column_schemas(Lorehouse(settings))
    assert _vector_type(schemas["search_index"]) == "fixed_size_list<item: float>[1536]"

    # A table of another model is rebuilt by the next run: its width says nothing of this one.
    database.create_table("chunks", schema=chunk_schema(768, "cohere/embed"), mode="overwrite")
    schemas = column_schemas(Lorehouse(settings))
    assert _vector_type(schemas["search_index"]) == PROVIDER_VECTOR_TYPE
