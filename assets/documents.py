"""Assets of the first two stages: raw_documents and parsed_documents, with their checks."""

import dagster as dg
import pandas as pd
import pandera.errors
import pandera.pandas as pa

from assets._metadata import markdown_table, progress_logger, sources_table
from assets.checks import asset_check
from assets.partitioning import INDEX_PARTITIONS, PARTITION_BACKFILL, partition_stores
from assets.policies import SHARED_STORES_POOL
from assets.resources import DocumentSourceResource, FeatureStoreResource, ParsingResource
from lorehouse.display import printable
from lorehouse.schemas import (
    TABLE_CONTRACTS,
    FailedDocumentsSchema,
    ParsedDocumentsSchema,
    RawDocumentsSchema,
)
from lorehouse.stages.inventory import run_inventory
from lorehouse.stages.parse import ParseReport, run_parse
from lorehouse.stores.partitions import seed_partition


@dg.asset(group_name="ingest", kinds={"duckdb"}, pool=SHARED_STORES_POOL)
def raw_documents(
    context: dg.AssetExecutionContext,
    document_source: DocumentSourceResource,
    feature_store: FeatureStoreResource,
    parsing: ParsingResource,
) -> dg.MaterializeResult:
    """Inventory of the source: one row per file with its hash, real type and ACL groups."""
    source = document_source.open()
    report = run_inventory(
        source,
        feature_store.open(),
        parsing.max_file_bytes,
        on_progress=progress_logger(context, "inventoried"),
        layout=feature_store.layout(),
    )
    if not report.documents:
        # Said now, not after the stages and evals have run over nothing.
        context.log.warning(printable(f"the source {source.uri} has no documents"))
    for warning in report.warnings:
        context.log.warning(printable(warning))
    syncs = report.syncs.values()
    for name, sync in report.syncs.items():
        if sync.error:
            context.log.warning(printable(f"source {name} kept as last listed: {sync.error}"))
    return dg.MaterializeResult(
        metadata={
            **(
                {
                    "sources_synced": sum(s.outcome == "synced" for s in syncs),
                    "sources_not_due": sum(s.outcome == "not due" for s in syncs),
                    "sources_failed": sum(s.outcome == "failed" for s in syncs),
                    "sources": dg.MetadataValue.md(sources_table(report.syncs)),
                }
                if report.syncs
                else {}
            ),
            "dagster/row_count": report.documents,
            "added": report.added,
            "changed": report.changed,
            "removed": report.removed,
            "restricted_documents": report.restricted,
            "files_hashed": report.hashed,
            "files_trusted_unchanged": report.reused,
            "seconds": round(report.seconds, 2),
            "partitions_changed": len(report.partitions_changed),
            "changed_partitions": dg.MetadataValue.json(report.partitions_changed),
            "by_type": dg.MetadataValue.md(
                markdown_table(["file type", "documents"], sorted(report.by_type.items()))
            ),
        }
    )


@dg.asset(
    group_name="parse",
    kinds={"duckdb", "python"},
    deps=[raw_documents],
    partitions_def=INDEX_PARTITIONS,
    backfill_policy=PARTITION_BACKFILL,
)
def parsed_documents(
    context: dg.AssetExecutionContext,
    document_source: DocumentSourceResource,
    feature_store: FeatureStoreResource,
    parsing: ParsingResource,
) -> dg.MaterializeResult:
    """Structure-preserving Markdown and a page map for every new or changed document of
    the run's partitions, each partition first adopting its share of the inventory."""
    layout = feature_store.layout()
    source = document_source.open()
    report = ParseReport()
    rows = removed = seeded = 0
    limits, options = parsing.limits(), parsing.options()
    shared_path = feature_store.wiring().settings.duckdb_path
    for key, store, progress in partition_stores(context, feature_store, "parsed"):
        inventory_slice = layout.inventory_slice(key)
        if not inventory_slice.exists():
            raise dg.Failure(f"partition {key} has no inventory slice; materialize raw_documents")
        removed += store.adopt_inventory(inventory_slice)
        seeded += seed_partition(store, shared_path, layout)
        report.absorb(
            run_parse(
                source,
                store,
                limits,
                on_progress=progress,
                options=options,
            )
        )
        rows += store.row_count("documents_parsed")
    for failure in report.failed:
        # A path is whatever its owner named the file: escape sequences in it are shown,
        # not obeyed, by the terminal that runs the materialization.
        message = f"{failure.rel_path}: {failure.reason.value}: {failure.detail}"
        context.log.warning(printable(message))
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": rows,
            "partitions": len(context.partition_keys),
            "documents_removed": removed,
            # Taken from the shared store by partitions first used under this bucket count
            # (an upgrade to partitions, a new count), instead of being parsed again.
            "documents_seeded": seeded,
            "parsed_this_run": report.parsed,
            "failed_this_run": report.failed_count,
            "unchanged_skipped": report.skipped,
            "pages_parsed": report.pages,
            "seconds": round(report.seconds, 2),
            "pages_per_second": round(report.pages / report.seconds, 1) if report.seconds else 0,
            "parsed_by_type": dg.MetadataValue.md(
                markdown_table(["file type", "parsed"], sorted(report.parsed_by_type.items()))
            ),
            "failures_by_reason": dg.MetadataValue.md(
                markdown_table(["reason", "documents"], sorted(report.failed_by_reason.items()))
            ),
            "failures": dg.MetadataValue.md(
                markdown_table(
                    ["file", "reason", "detail"],
                    [[f.rel_path, f.reason.value, f.detail[:120]] for f in report.failed[:50]],
                )
            ),
            "slowest_files": dg.MetadataValue.md(
                markdown_table(
                    ["file", "ms", "pages"],
                    [[path, round(ms), spans] for ms, path, spans in report.slowest_first()],
                )
            ),
        }
    )


#: The asset that brings the partitions' stage tables into the shared store
#: (`assets.features.merged_partitions`): the stage tables' checks read them there, as the
#: feature tables and the index do.
MERGED_PARTITIONS = "merged_partitions"
#: Rows a contract check validates at a time: a check's memory follows this, not the table.
#: Parsed documents carry their whole Markdown, chunks their texts and enriched chunks lists,
#: so they go fewer at a time: pandera's checks hold about as much again as the batch's frame.
CONTRACT_BATCH_ROWS = 100_000
CONTRACT_BATCH_ROWS_BY_TABLE = {
    "documents_parsed": 2_000,
    "chunks": 10_000,
    "enriched_chunks": 10_000,
}
#: Failing cases shown in a failed check's metadata.
FAILURE_CASES_SHOWN = 20


def schema_check(
    frame_name: str,
    schema: type[pa.DataFrameModel] | pa.DataFrameSchema,
    store: FeatureStoreResource,
) -> dg.AssetCheckResult:
    """Validates a table against its contract, with failing cases as metadata.

    The pandera schema checks the table a batch of rows at a time, so a check of a
    million-document table needs the memory of one batch. What no batch can see whole (a
    column's values unique, `TABLE_CONTRACTS` such as positions per document) is checked by
    queries over the whole table in DuckDB.
    """
    feature_store = store.open()
    rows, failures = 0, []
    batch_rows = CONTRACT_BATCH_ROWS_BY_TABLE.get(frame_name, CONTRACT_BATCH_ROWS)
    for frame in feature_store.table_batches(frame_name, batch_rows):
        rows += len(frame)
        try:
            schema.validate(frame, lazy=True)
        except pandera.errors.SchemaErrors as errors:
            failures.append(errors.failure_cases.head(FAILURE_CASES_SHOWN))
    columns = (schema.to_schema() if isinstance(schema, type) else schema).columns
    found = [
        (name, f"unique ({count} rows)", value)
        for name, column in columns.items()
        if column.unique
        for value, count in feature_store.duplicates(frame_name, name, FAILURE_CASES_SHOWN)
    ]
    found += [
        ("", error, value)
        for error, query in TABLE_CONTRACTS.get(frame_name, [])
        for value in feature_store.offending_values(query, FAILURE_CASES_SHOWN)
    ]
    if found:
        failures.append(pd.DataFrame(found, columns=["column", "check", "failure_case"]))
    if failures:
        cases = pd.concat(failures, ignore_index=True).head(FAILURE_CASES_SHOWN)
        return dg.AssetCheckResult(
            passed=False,
            metadata={
                "rows": rows,
                "failure_cases": dg.MetadataValue.md(cases.to_markdown(index=False)),
            },
        )
    return dg.AssetCheckResult(passed=True, metadata={"rows": rows})


@asset_check(asset=raw_documents, blocking=True)
def raw_documents_contract(feature_store: FeatureStoreResource) -> dg.AssetCheckResult:
    """documents_raw satisfies its pandera schema (unique ids and paths, valid hashes and types)."""
    return schema_check("documents_raw", RawDocumentsSchema, feature_store)


@asset_check(asset=MERGED_PARTITIONS, blocking=True)
def parsed_documents_contract(feature_store: FeatureStoreResource) -> dg.AssetCheckResult:
    """documents_parsed satisfies its schema: non-empty Markdown, a page map covering all of it."""
    return schema_check("documents_parsed", ParsedDocumentsSchema, feature_store)


@asset_check(asset=MERGED_PARTITIONS)
def parse_failures_contract(feature_store: FeatureStoreResource) -> dg.AssetCheckResult:
    """documents_failed holds one known reason per failed document and stage."""
    return schema_check("documents_failed", FailedDocumentsSchema, feature_store)


@asset_check(asset=MERGED_PARTITIONS)
def every_document_accounted_for(feature_store: FeatureStoreResource) -> dg.AssetCheckResult:
    """Each inventoried document ends parsed or failed with a reason: nothing is lost silently."""
    store = feature_store.open()
    totals = store.status_totals()
    pending = [s.rel_path for s in store.document_statuses(status="pending", limit=50)]
    return dg.AssetCheckResult(
        passed=totals["pending"] == 0,
        metadata={
            "documents": sum(totals.values()),
            "parsed": totals["parsed"],
            "failed": totals["failed"],
            "unaccounted": dg.MetadataValue.json(pending),
        },
    )
