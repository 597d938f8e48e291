"""The chunk_embeddings asset: chunks, their enrichment and vectors in LanceDB, indexed."""

import dagster as dg

from assets._metadata import markdown_table, progress_logger
from assets.features import document_features, merged_partitions
from lorehouse.stages.embed import run_embedding
from pipelines.resources import FeatureStoreResource, VectorIndexResource


@dg.asset(
    group_name="index",
    kinds={"lancedb"},
    deps=[merged_partitions, document_features],
)
def chunk_embeddings(
    context: dg.AssetExecutionContext,
    feature_store: FeatureStoreResource,
    vector_index: VectorIndexResource,
) -> dg.MaterializeResult:
    """Vectors of new or changed chunks (others keep theirs), BM25 and ANN indexes refreshed;
    a vector per sentence window of each chunk, so a question matching one sentence finds its
    chunk; each chunk's token vectors, which the late-interaction reranker reads; plus one
    profile vector per document (title, summary, FAQs) for choosing sources."""
    index = vector_index.open()
    report = run_embedding(
        feature_store.open(),
        index,
        vector_index.embedder(),
        batch_size=vector_index.embed_batch_size,
        on_progress=progress_logger(context, "embedded"),
        token_encoder=vector_index.token_encoder(),
        batch_documents=vector_index.index_batch_documents,
    )
    if report.provider_failure:
        # Recorded, not raised: what was embedded is committed, the rest keep their old rows,
        # and the blocking check below holds back the evaluations until a rerun completes.
        context.log.error(
            f"embedding provider failed; {len(report.documents_not_embedded)} documents keep "
            f"their previous vectors until the next run: {report.provider_failure}"
        )
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": index.count(),
            "embedding_model": report.model,
            "dimension": report.dimension or 0,
            "chunks": report.chunks,
            "embedded": report.embedded,
            "reused_vectors": report.reused_vectors,
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
            "ann_index": "built"
            if index.has_vector_index()
            else f"exact search (below {index.ann_min_rows} rows)",
        }
    )


@dg.asset_check(asset=chunk_embeddings, blocking=True)
def chunk_embeddings_match_chunks(
    feature_store: FeatureStoreResource, vector_index: VectorIndexResource
) -> dg.AssetCheckResult:
    """The index holds exactly the chunks DuckDB holds, embedded with the configured model."""
    import pyarrow.compute as pc

    index = vector_index.open()
    # Compared as Arrow columns: at a million documents, sets of Python strings of every
    # chunk id would hold about 2 GB.
    expected = feature_store.open().column_values("chunks", "chunk_id")
    # No table yet (the first run's provider failed before any commit): nothing is stored.
    stored = index.column_values(index.key_column)
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
        },
    )
