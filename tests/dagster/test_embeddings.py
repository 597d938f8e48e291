"""chunk_embeddings on real documents: reruns, deletions and a change of embedding model."""

from __future__ import annotations

import shutil
from pathlib import Path

import lancedb
import numpy as np
import pyarrow as pa
import pytest

from lorehouse.embedding.litellm import LiteLLMEmbedder
from lorehouse.models import PUBLIC_GROUP
from lorehouse.search.retriever import Retriever
from lorehouse.settings import BUNDLED_SAMPLE_CORPUS
from lorehouse.stores.duckdb_store import DuckDBStore
from lorehouse.stores.lance_index import ChunkIndex
from tests.conftest import default_embedder, materialize_everything
from tests.dagster.conftest import metadata_of
from tests.provider_server import provider_server


def _lance_rows(data_dir: Path) -> dict[str, tuple[str, np.ndarray]]:
    table = ChunkIndex(str(data_dir / "lancedb")).table().to_arrow()
    vectors = table["vector"].to_numpy(zero_copy_only=False)
    return {
        chunk_id: (text, np.asarray(vector))
        for chunk_id, text, vector in zip(
            table["chunk_id"].to_pylist(), table["text_embed"].to_pylist(), vectors, strict=True
        )
    }


def _sentence_owners(data_dir: Path) -> set[str]:
    """The chunk of every sentence-window row."""
    sentences = ChunkIndex(str(data_dir / "lancedb")).sentences().table().to_arrow()
    return set(sentences["chunk_id"].to_pylist())


def _token_vector_chunks(data_dir: Path) -> set[str]:
    """The chunks with stored token vectors."""
    stored = ChunkIndex(str(data_dir / "lancedb")).token_vectors().table().to_arrow()
    return set(stored["chunk_id"].to_pylist())


def test_rerun_changes_nothing_and_a_deleted_file_leaves_every_store(tmp_path: Path) -> None:
    """In batches of 3 documents (4 per run), as a large corpus is enriched and embedded: a
    batch compares and replaces only its own documents' rows, never another batch's."""
    source = tmp_path / "corpus"
    shutil.copytree(BUNDLED_SAMPLE_CORPUS, source)
    data_dir = tmp_path / "data"

    first = materialize_everything(source, data_dir, with_evals=False, index_batch_documents=3)
    assert first.success
    embedded = metadata_of(first, "chunk_embeddings")
    store = DuckDBStore(data_dir / "lorehouse.duckdb")
    chunk_ids = set(store.table("chunks")["chunk_id"])
    assert embedded["embedded"] == embedded["chunks"] == len(chunk_ids) > 50
    assert embedded["embedding_model"] == "all-MiniLM-L6-v2-int8"
    assert embedded["dimension"] == 384
    assert embedded["chunks_per_second"] > 0
    before = _lance_rows(data_dir)
    assert set(before) == chunk_ids
    assert set(store.table("enriched_chunks")["chunk_id"]) == chunk_ids  # every batch kept
    assert 0 < embedded["sentence_windows_embedded"] <= embedded["sentence_windows"]
    assert _sentence_owners(data_dir) < chunk_ids
    assert embedded["token_vectors_embedded"] == embedded["token_vectors"] == len(chunk_ids)
    assert _token_vector_chunks(data_dir) == chunk_ids

    second = materialize_everything(source, data_dir, with_evals=False, index_batch_documents=3)
    assert second.success
    again = metadata_of(second, "chunk_embeddings")
    assert (again["embedded"], again["rows_written"], again["rows_deleted"]) == (0, 0, 0)
    assert again["sentence_windows_embedded"] == again["token_vectors_embedded"] == 0
    after = _lance_rows(data_dir)
    assert set(after) == set(before)
    assert all(np.array_equal(after[c][1], before[c][1]) for c in before)

    # one edited sentence: only that document is parsed, chunked, enriched and embedded again
    runbook = source / "engineering" / "oncall-runbook.md"
    runbook.write_text(
        runbook.read_text().replace("On-call pay is EUR 250", "On-call pay is EUR 275")
    )
    edited = materialize_everything(source, data_dir, with_evals=False, index_batch_documents=3)
    assert edited.success
    documents = metadata_of(edited, "raw_documents")["dagster/row_count"]
    parsed = metadata_of(edited, "parsed_documents")
    assert (parsed["parsed_this_run"], parsed["unchanged_skipped"]) == (1, documents - 1)
    chunked = metadata_of(edited, "chunks")
    assert (chunked["documents_chunked"], chunked["documents_unchanged"]) == (1, documents - 1)
    enriched = metadata_of(edited, "enriched_chunks")
    # the edited chunk and the runbook's document summary; its other chunks come from cache
    assert (enriched["computed"], enriched["llm_calls"]) == (2, 0)
    reembedded = metadata_of(edited, "chunk_embeddings")
    assert (reembedded["embedded"], reembedded["rows_deleted"]) == (1, 1)
    assert reembedded["token_vectors_embedded"] == 1
    now = _lance_rows(data_dir)
    (old_id,) = set(before) - set(now)
    (new_id,) = set(now) - set(before)
    assert "EUR 250" in before[old_id][0] and "EUR 275" in now[new_id][0]
    assert old_id not in set(store.table("chunks")["chunk_id"])
    assert all(np.array_equal(now[c][1], before[c][1]) for c in set(now) & set(before))
    before = now

    owners_before = _sentence_owners(data_dir)
    (source / "hr" / "parental-leave-faq.md").unlink()
    third = materialize_everything(source, data_dir, with_evals=False, index_batch_documents=3)
    assert third.success
    removed = {c for c, (text, _) in before.items() if "Parental Leave FAQ" in text}
    assert removed
    assert metadata_of(third, "chunk_embeddings")["rows_deleted"] == len(removed)
    assert not removed & set(_lance_rows(data_dir))
    assert removed & owners_before and not removed & _sentence_owners(data_dir)
    assert _sentence_owners(data_dir) < set(store.table("chunks")["chunk_id"])
    assert _token_vector_chunks(data_dir) == set(store.table("chunks")["chunk_id"])
    for table in ("chunks", "enriched_chunks", "chunk_keywords"):
        assert not removed & set(store.table(table)["chunk_id"]), table
    assert "hr/parental-leave-faq.md" not in set(store.table("documents")["rel_path"])
    retriever = Retriever(ChunkIndex(str(data_dir / "lancedb")), default_embedder())
    hits = retriever.search("How many weeks of parental leave do I get?", top_k=20).hits
    assert hits and not {h.chunk_id for h in hits} & removed


def test_a_new_embedding_model_re_embeds_every_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, materialized_sample: Path
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local-test")
    data_dir = tmp_path / "data"
    # A copy of the session's stores, built with the bundled model.
    shutil.copytree(materialized_sample, data_dir)
    chunk_count = len(_lance_rows(data_dir))

    with provider_server(dimension=16) as server:
        model = "openai/lorehouse-test-embedding"
        result = materialize_everything(
            BUNDLED_SAMPLE_CORPUS,
            data_dir,
            embed_model=model,
            embed_api_base=server.base_url,
            with_evals=False,
        )
        assert result.success
        meta = metadata_of(result, "chunk_embeddings")
        index = ChunkIndex(str(data_dir / "lancedb"))
        assert meta["table_rebuilt"] is True
        assert meta["embedded"] == chunk_count
        # Every chunk text went to the provider (the eval's queries and baseline follow it).
        chunk_texts = {text for text, _ in _lance_rows(data_dir).values()}
        assert chunk_texts <= set(server.texts_embedded)
        assert meta["documents_embedded"] == meta["documents"] == 10
        assert index.documents().embedding_model() == (model, 16)
        assert index.embedding_model() == (model, 16)
        rows = _lance_rows(data_dir)
        assert len(rows) == chunk_count
        assert all(vector.shape == (16,) for _, vector in rows.values())
        assert all(abs(np.linalg.norm(vector) - 1) < 1e-5 for _, vector in rows.values())

        provider = LiteLLMEmbedder(model, api_base=server.base_url)
        assert Retriever(index, provider).search("parental leave", mode="vector").hits
        # The bundled model cannot query vectors another model made.
        with pytest.raises(RuntimeError, match="re-embed"):
            Retriever(index, default_embedder()).search("parental leave", mode="vector")


def test_a_new_model_leaves_searches_on_the_old_index_until_every_partition_holds_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, materialized_sample: Path
) -> None:
    """A model change re-embeds partition by partition; until the last is done, the merge
    replaces nothing and names the partitions still on the old model, and searches read the
    old index whole."""
    import dagster as dg

    from assets import chunks, documents, embeddings, features
    from assets.partitioning import with_index_partitions
    from assets.resources import build_resources
    from lorehouse.inventory import document_id
    from lorehouse.settings import Settings
    from lorehouse.stores.partitions import bucket_of, partition_keys

    monkeypatch.setenv("OPENAI_API_KEY", "sk-local-test")
    data_dir = tmp_path / "data"
    shutil.copytree(materialized_sample, data_dir)
    old = ChunkIndex(str(data_dir / "lancedb")).embedding_model()
    with provider_server(dimension=16) as server:
        model = "openai/lorehouse-test-embedding"
        config = Settings(
            source_uri=str(BUNDLED_SAMPLE_CORPUS),
            data_dir=data_dir,
            workers=1,
            embed_model=model,
            embed_api_base=server.base_url,
        )
        n = config.index_partitions
        first = partition_keys(n)[bucket_of(document_id("hr/parental-leave-faq.md"), n)]
        assets = with_index_partitions(
            dg.load_assets_from_modules([documents, chunks, features, embeddings]), n
        )
        one = dg.materialize(
            assets,
            selection=[
                *("parsed_documents", "chunks", "enriched_chunks", "chunk_embeddings"),
                *("merged_partitions", "document_features", "search_index"),
            ],
            resources=build_resources(config),
            instance=dg.DagsterInstance.ephemeral(),
            tags={
                "dagster/asset_partition_range_start": first,
                "dagster/asset_partition_range_end": first,
            },
            raise_on_error=False,
        )
        (failure,) = [e for e in one.all_events if e.event_type_value == "STEP_FAILURE"]
        message = str(failure.event_specific_data.error)
        assert "searches keep the current index" in message and model in message
        index = ChunkIndex(str(data_dir / "lancedb"))
        assert index.embedding_model() == old
        hits = Retriever(index, default_embedder()).search("parental leave", mode="vector").hits
        assert hits

        every = materialize_everything(
            BUNDLED_SAMPLE_CORPUS,
            data_dir,
            with_evals=False,
            embed_model=model,
            embed_api_base=server.base_url,
        )
        assert every.success
        assert ChunkIndex(str(data_dir / "lancedb")).embedding_model() == (model, 16)


def _downgrade_to_layout_2(data_dir: Path) -> None:
    """Rewrites the searched tables, and each partition's, as layout 2 wrote them: public
    rows with an empty `acl`."""
    for folder in [data_dir / "lancedb", *sorted((data_dir / "partitions").glob("*.lancedb"))]:
        _downgrade_folder(folder)


def _downgrade_folder(folder: Path) -> None:
    db = lancedb.connect(str(folder))
    present = db.list_tables().tables  # a partition of failed documents only has no chunks
    for name in (n for n in ("chunks", "sentences", "documents") if n in present):
        arrow = db.open_table(name).to_arrow()
        column = arrow.schema.get_field_index("acl")
        field = arrow.schema.field(column)
        groups = [[g for g in acl if g != PUBLIC_GROUP] for acl in arrow["acl"].to_pylist()]
        arrow = arrow.set_column(column, field, pa.array(groups, field.type))
        arrow = arrow.replace_schema_metadata(
            {**(arrow.schema.metadata or {}), b"lorehouse.layout": b"2"}
        )
        db.create_table(name, data=arrow, schema=arrow.schema, mode="overwrite")


def test_a_table_of_an_older_layout_is_rebuilt_with_its_vectors_kept(
    tmp_path: Path, materialized_sample: Path
) -> None:
    data_dir = tmp_path / "data"
    shutil.copytree(materialized_sample, data_dir)
    before = _lance_rows(data_dir)
    _downgrade_to_layout_2(data_dir)
    assert not ChunkIndex(str(data_dir / "lancedb")).is_current("all-MiniLM-L6-v2-int8")

    result = materialize_everything(BUNDLED_SAMPLE_CORPUS, data_dir, with_evals=False)
    assert result.success
    meta = metadata_of(result, "chunk_embeddings")
    assert meta["table_rebuilt"] is True
    # Nothing is embedded again: the model is the same, only the layout changed.
    assert meta["embedded"] == 0 and meta["reused_vectors"] == len(before)
    assert meta["documents_embedded"] == 0 and meta["sentence_windows_embedded"] == 0
    # The tables search reads are replaced whole from the partitions' rebuilt ones.
    rebuilt = metadata_of(result, "search_index")["tables_rebuilt"]
    assert {"chunks", "sentences", "documents"} <= set(rebuilt)
    after = _lance_rows(data_dir)
    assert set(after) == set(before)
    assert all(np.array_equal(after[c][1], before[c][1]) for c in before)
    index = ChunkIndex(str(data_dir / "lancedb"))
    for table in (index, index.sentences(), index.documents()):
        acl = table.table().to_arrow()["acl"].to_pylist()
        assert all(groups for groups in acl), table.name
        assert any(groups == [PUBLIC_GROUP] for groups in acl), table.name
    # An outsider finds public chunks again, and still nothing restricted.
    hits = Retriever(index, default_embedder()).search("parental leave", top_k=20).hits
    restricted = index.rows(f"NOT array_has_any(acl, ['{PUBLIC_GROUP}'])", ["chunk_id"], 1000)
    assert restricted, "the sample corpus holds restricted chunks"
    assert hits and not {h.chunk_id for h in hits} & {r["chunk_id"] for r in restricted}


def test_a_corpus_of_one_short_note_is_indexed_and_searchable(tmp_path: Path) -> None:
    """A chunk whose sentences fit in one window gets no windows, so a corpus of such chunks
    has none at all: the index is built from its chunks alone, and found."""
    source = tmp_path / "corpus"
    source.mkdir()
    (source / "wifi.md").write_text(
        "# Guest Wi-Fi\n\nThe guest network is called Lorehouse-Guest.\n"
    )
    data_dir = tmp_path / "data"

    result = materialize_everything(source, data_dir, with_evals=False)
    assert result.success
    embedded = metadata_of(result, "chunk_embeddings")
    assert embedded["chunks"] == embedded["embedded"] >= 1
    assert embedded["sentence_windows"] == 0
    index = ChunkIndex(str(data_dir / "lancedb"))
    for mode in ("hybrid", "vector"):
        hits = Retriever(index, default_embedder()).search(
            "What is the guest network called?", top_k=3, mode=mode
        )
        assert "Lorehouse-Guest" in hits.hits[0].text_chat, mode

    again = materialize_everything(source, data_dir, with_evals=False)
    assert again.success
    assert metadata_of(again, "chunk_embeddings")["embedded"] == 0
