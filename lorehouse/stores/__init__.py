"""Adapters over the stores: DuckDB for tables and features, LanceDB (later) for vectors."""

from lorehouse.stores.duckdb_store import DocumentStatus, DuckDBStore

__all__ = ["DocumentStatus", "DuckDBStore"]
