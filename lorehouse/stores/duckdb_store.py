"""The DuckDB feature store: one file, its tables read and written by one module per stage.

`DuckDBStore` gathers them, so a stage runner, an asset check or a route holds one object for
the file; each module keeps the SQL of its own tables (`lorehouse.stores.database` says how
connections and transactions work).
"""

from __future__ import annotations

from lorehouse.stores.chunk_tables import ChunkTables
from lorehouse.stores.database import declared_columns
from lorehouse.stores.eval_tables import EvalTables, FeedbackQuota
from lorehouse.stores.index_reads import IndexReads
from lorehouse.stores.inventory_tables import RAW_COLUMNS, InventoryStaging, InventoryTables
from lorehouse.stores.parse_tables import ParseTables
from lorehouse.stores.status_tables import DocumentStatus, StatusTables

__all__ = [
    "RAW_COLUMNS",
    "DocumentStatus",
    "DuckDBStore",
    "FeedbackQuota",
    "InventoryStaging",
    "declared_columns",
]


class DuckDBStore(InventoryTables, ParseTables, ChunkTables, IndexReads, EvalTables, StatusTables):
    """Reads and writes the Lorehouse tables in one DuckDB file."""
