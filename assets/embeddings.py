"""Vectors per partition (chunk_embeddings), and the merged LanceDB tables search reads
(search_index)."""

import dagster as dg
import pyarrow as pa

from assets._metadata import markdown_table, progress_logger
from assets.checks import asset_check
from assets.features import document_features, enriched_chunks
from assets.partitioning import INDEX_PARTITIONS, PARTITION_BACKFILL, partition_stores
from assets.policies import SHARED_STORES_POOL
from assets.resources import FeatureStoreResource, VectorIndexResource
from lorehouse.stages.embed import EmbedReport, run_embedding
from lorehouse.stages.features import run_document_features
from lorehouse.stages.index_merge import run_index_merge
from lorehouse.stores.lance_index import ChunkIndex
from lorehouse.stores.partition_lease import writing_shared_stores
from lorehouse.stores.partitions import (
    BUSY_PARTITION_WAIT_SECONDS,
    bucket_of,
    bucket_of_key,
    bucket_sql,
    forget_indexed,
    merged_digests,
    partition_is_indexed,
    record_indexed,
    seeded_vectors_taken,
    seeding,
)


@dg.asset(
    group_name="index",
    kinds={"lancedb"},
    deps=[enriched_chunks],
    partitions_def=INDEX_PARTITIONS,
    backfill_policy=PARTITION_BACKFILL,
)
def chunk_embeddings(
    context: dg.AssetExecutionContext,
    feature_store: FeatureStoreResource,
    vector_index: VectorIndexResource,
) -> dg.MaterializeResult:
    """Each partition's vectors, in its own LanceDB folder: new or changed chunks (others keep
    theirs); a vector per sentence window of each chunk, so a question matching one sentence
    finds its chunk; each chunk's token vectors, which the late-interaction reranker reads;
    and one profile vector per document (title, summary, FAQs) for choosing sources. The
    model calls, most of a build, run here, partition by partition; `search_index` merges
    the partitions' rows into the tables search reads."""
    embedder, encoder = vector_index.embedder(), vector_index.token_encoder()
    report = EmbedReport(model=embedder.name, dimension=None)
    rows = 0
    for key, store, progress in partition_stores(context, feature_store, "embedded"):
        run_document_features(store)  # the partition's document list: titles, summaries, ACLs
        index = feature_store.open_partition_index(key)
        # A partition seeded from the shared store (an upgrade, a new bucket count) takes its
        # documents' vectors from the shared index rather than the model.
        donor = vector_index.open() if seeding(store) else None
        # Until this run records its rows below, a merge leaves this partition as it last
        # took it rather than publish half of what this run rewrites.
        forget_indexed(store)
        done = run_embedding(
            store,
            index,
            embedder,
            batch_size=vector_index.embed_batch_size,
            on_progress=progress,
            token_encoder=encoder,
            batch_documents=vector_index.index_batch_documents,
            donor=donor,
            sentence_windows=vector_index.index_sentence_windows,
        )
        report.absorb(done)
        rows += index.count()
        if done.provider_failure:
            # Recorded, not raised: what was embedded is committed, the rest keep their old
            # rows, and search_index's blocking check holds back the evaluations until a
            # rerun completes them.
            context.log.error(
                f"embedding provider failed in {key}; {len(done.documents_not_embedded)} "
                f"documents keep their previous vectors until the next run: "
                f"{done.provider_failure}"
            )
        # This partition's rows now follow its stage tables (or keep their old vectors
        # where the provider failed): search_index may take them.
        record_indexed(store)
        if donor is not None and not done.provider_failure:
            seeded_vectors_taken(store)
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": rows,
            "embedding_model": report.model,
            "dimension": report.dimension or 0,
            "chunks": report.chunks,
            "embedded": report.embedded,
            "reused_vectors": report.reused_vectors,
            "vectors_seeded": report.vectors_seeded,
            "rows_written": report.rows_written,
            "rows_deleted": report.rows_deleted,
            "table_rebuilt": report.rebuilt,
            "documents": report.documents,
            "documents_embedded": report.documents_embedded,
            "sentence_windows": report.sentences,
            "sentence_windows_embedded": report.sentences_embedded,
            "token_vectors": report.token_vectors,
            "token_vectors_embedded": report.token_vectors_embedded,
            "documents_not_embedded": len(report.documents_not_embedded),
            "provider_failure": report.provider_failure or "none",
            "chunks_per_second": round(report.chunks_per_second, 1),
            "embed_seconds": round(report.embed_seconds, 2),
            "seconds": round(report.seconds, 2),
        }
    )


@dg.asset(
    group_name="index",
    kinds={"lancedb"},
    deps=[chunk_embeddings, document_features],
    pool=SHARED_STORES_POOL,
)
def search_index(
    context: dg.AssetExecutionContext,
    feature_store: FeatureStoreResource,
    vector_index: VectorIndexResource,
) -> dg.MaterializeResult:
    """The LanceDB tables search reads: the rows of every partition whose run is done,
    compared only where they changed since the last merge, with the rows of documents that
    left removed and the BM25, scalar and ANN indexes refreshed once over all of them. A
    partition whose run is queued, running or failed keeps what the last merge took, and
    delays no other. No model is called here."""
    layout = feature_store.layout()
    index = vector_index.open()
    with writing_shared_stores(layout.root, context.run_id, context.log.info):
        report = run_index_merge(
            feature_store.open(),
            index,
            {key: feature_store.open_partition_index(key) for key in sorted(layout.indexed_keys())},
            layout,
            on_progress=progress_logger(context, "merged"),
        )
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": report.rows,
            "embedding_model": report.model,
            "rows_copied": dg.MetadataValue.md(
                markdown_table(["table", "rows"], sorted(report.copied.items()))
            ),
            "rows_deleted": sum(report.deleted.values()),
            "tables_rebuilt": dg.MetadataValue.json(report.rebuilt),
            "published_versions": dg.MetadataValue.json(report.published),
            # Their run is not done: what search reads of them is what the last merge took.
            "partitions_behind": dg.MetadataValue.json(report.behind),
            # Rows of those partitions whose access list changed since: out of search.
            "rows_withheld": sum(report.withheld.values()),
            "partitions_compared": len({name.split("/")[0] for name in report.compared}),
            "seconds": round(report.seconds, 2),
            "vector_index_steps_between_batches": report.index_steps,
            "lancedb_uri": dg.MetadataValue.path(index.uri),
            "indexes": dg.MetadataValue.md(
                markdown_table(
                    ["index", "kind", "columns", "indexed rows", "unindexed rows"],
                    [
                        [s.name, s.kind, ", ".join(s.columns), s.indexed_rows, s.unindexed_rows]
                        for s in report.indexes
                    ],
                )
            ),
            "ann_index": _ann_index_state(index, report.rows),
        }
    )


def _ann_index_state(index: ChunkIndex, rows: int) -> str:
    """What proposes the shared chunks' nearest rows to searches, in words."""
    neighbours = index.neighbours
    if neighbours is None:
        engine = "lancedb" if index.has_vector_index() else None
    else:
        engine = neighbours.engine_for(
            rows, neighbours.engine == "lancedb" and index.has_vector_index()
        )
    if engine == "mapped":
        return "mapped IVF index, built by the first search of each version"
    if engine == "lancedb":
        return "LanceDB's index, built"
    threshold = index.ann_min_rows if neighbours is None else neighbours.min_rows
    return f"exact search (below {threshold} rows)"


@asset_check(asset=search_index, blocking=True)
def chunk_embeddings_match_chunks(
    feature_store: FeatureStoreResource, vector_index: VectorIndexResource
) -> dg.AssetCheckResult:
    """The index holds exactly the chunks DuckDB holds, embedded with the configured model,
    but for partitions behind (their run not done): the merge left their search rows as it
    last took them, so they are named, not compared."""
    import pyarrow.compute as pc

    index = vector_index.open()
    store = feature_store.open()
    layout = feature_store.layout()
    merged = merged_digests(store)
    behind = [
        key
        for key in sorted(layout.indexed_keys())
        if not partition_is_indexed(layout, key, merged.get(key), BUSY_PARTITION_WAIT_SECONDS)
    ]
    # Compared as Arrow columns: at a million documents, sets of Python strings of every
    # chunk id would hold about 2 GB.
    expected = store.column_values("chunks", "chunk_id")
    # No table yet (the first run's provider failed before any commit): nothing is stored.
    stored = index.column_values(index.key_column)
    if behind:
        buckets = ", ".join(str(bucket_of_key(key)) for key in behind)
        with store.connect() as connection:
            expected = connection.sql(
                "SELECT chunk_id FROM chunks "
                f"WHERE {bucket_sql('doc_id', layout.partitions)} NOT IN ({buckets})"
            ).to_arrow_table()["chunk_id"]
        if len(stored):
            rows = index.table().search().select([index.key_column, "doc_id"])
            rows = rows.limit(max(1, index.count())).to_arrow()
            held = {bucket_of_key(key) for key in behind}
            docs = rows["doc_id"].to_pylist()
            inside = {doc for doc in set(docs) if bucket_of(doc, layout.partitions) in held}
            stored = rows[index.key_column].filter(pa.array([doc not in inside for doc in docs]))
    missing = len(expected) - (pc.sum(pc.is_in(expected, value_set=stored)).as_py() or 0)
    extra = len(stored) - (pc.sum(pc.is_in(stored, value_set=expected)).as_py() or 0)
    model = index.embedding_model()[0] if index.exists() else None
    configured = vector_index.embedder().name
    return dg.AssetCheckResult(
        passed=missing == 0 and extra == 0 and (model == configured or not len(expected)),
        metadata={
            "missing_from_index": missing,
            "not_in_duckdb": extra,
            "stored_model": model or "none",
            "configured_model": configured,
            "partitions_behind": dg.MetadataValue.json(behind),
        },
    )
