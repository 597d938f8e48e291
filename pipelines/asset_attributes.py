"""What the Dagster UI shows about each asset beyond its code: the version of the stage that
built it, the columns of the table it writes, and who owns it.

Code versions come from the versions the stages already keep (each parser's, the chunker's,
the enrichment model and prompts, the embedding model and table layout), so after a change
that makes a stage redo its work the UI marks the asset and everything below it as changed.
"""

from __future__ import annotations

import hashlib
from typing import Any

import dagster as dg

from lorehouse.models import FileType
from lorehouse.parsing.runner import parser_version_of
from lorehouse.search.tables import TABLE_LAYOUT
from lorehouse.settings import SENTENCE_WINDOW, SENTENCE_WINDOW_STRIDE
from lorehouse.stages.features import FEATURES_VERSION
from lorehouse.stages.index_merge import INDEX_MERGE_VERSION
from lorehouse.stores.duckdb_store import declared_columns
from lorehouse.stores.lance_index import chunk_schema
from lorehouse.stores.partitions import MERGE_VERSION
from lorehouse.wiring import Lorehouse

OWNERS = ["team:lorehouse"]

#: asset -> the table it writes (DuckDB unless marked lancedb).
TABLES = {
    "raw_documents": "documents_raw",
    "parsed_documents": "documents_parsed",
    "chunks": "chunks",
    "enriched_chunks": "enriched_chunks",
    "merged_partitions": "partition_merges",
    "document_features": "documents",
    "chunk_embeddings": "lancedb.chunks",
    "search_index": "lancedb.chunks",
    "retrieval_eval": "eval_retrieval",
    "answer_eval": "eval_answers",
}


def code_versions(lorehouse: Lorehouse) -> dict[str, str]:
    """asset -> the version of the stage that builds it, for the assets whose stage has one."""
    settings = lorehouse.settings
    options = lorehouse.parse_options()
    parsers = ",".join(
        f"{file_type.value}={parser_version_of(file_type, options)}"
        for file_type in FileType
        if file_type is not FileType.UNKNOWN
    )
    embedding = (
        f"{settings.embed_model}|layout{TABLE_LAYOUT}"
        f"|windows{SENTENCE_WINDOW}/{SENTENCE_WINDOW_STRIDE}|tokens{settings.index_token_vectors}"
    )
    return {
        "parsed_documents": _short(parsers),
        "chunks": lorehouse.chunker().version,
        "enriched_chunks": _short(lorehouse.enricher().version),
        "merged_partitions": _short(f"{MERGE_VERSION}|{settings.index_partitions}"),
        "document_features": FEATURES_VERSION,
        "chunk_embeddings": _short(embedding),
        "search_index": _short(f"{INDEX_MERGE_VERSION}|{embedding}"),
    }


def column_schemas() -> dict[str, dg.TableSchema]:
    """asset -> the columns of the table it writes."""
    duckdb_tables = declared_columns()
    lance = chunk_schema(1, "")
    schemas = {}
    for asset, table in TABLES.items():
        if table.startswith("lancedb."):
            columns = [(field.name, str(field.type)) for field in lance]
        else:
            columns = duckdb_tables[table]
        schemas[asset] = dg.TableSchema(
            columns=[dg.TableColumn(name, kind) for name, kind in columns]
        )
    return schemas


def with_attributes(spec: dg.AssetSpec, versions: dict[str, str], schemas: dict) -> dg.AssetSpec:
    """`spec` with its code version, owners, table name and column schema."""
    name = spec.key.to_user_string()
    metadata: dict[str, Any] = dict(spec.metadata or {})
    if name in TABLES:
        metadata["dagster/table_name"] = TABLES[name]
        metadata["dagster/column_schema"] = schemas[name]
    return spec.replace_attributes(
        code_version=versions.get(name, spec.code_version),
        owners=OWNERS,
        metadata=metadata,
    )


def _short(text: str) -> str:
    """A readable version for long descriptions: a 12-hex digest."""
    return hashlib.sha256(text.encode()).hexdigest()[:12]
