"""An index kept in S3 (a local server speaking the S3 protocol) serves what a local one
does: late interaction takes stored token vectors by row offset from the object store."""

from __future__ import annotations

import numpy as np
import pytest

from lorehouse.search.rerankers import LateInteractionReranker
from lorehouse.search.tables import IndexNotBuilt
from lorehouse.stages.embed import EmbedReport, sync_table, sync_token_vectors
from lorehouse.stores.lance_index import ChunkIndex, chunk_schema
from lorehouse.wiring import lance_storage_options
from tests.conftest import default_embedder
from tests.dagster.conftest import s3_bucket
from tests.unit.test_sentence_vectors import _rows
from tests.unit.test_table_versions import _rows as versioned_rows
from tests.unit.test_token_vectors import QUESTION, CountingEncoder, _candidates


def test_token_vectors_in_s3_are_read_not_encoded_and_follow_a_new_version(
    s3_endpoint: str,
) -> None:
    s3_bucket(s3_endpoint, "index")
    uri = "s3://index/lancedb"
    options = lance_storage_options(uri, s3_endpoint, "eu-west-1")
    embedder = default_embedder()
    index = ChunkIndex(uri, storage_options=options)
    rows = _rows(embedder.name, acl_office=[])
    report = EmbedReport(model=embedder.name, dimension=embedder.dimension)
    sync_table(index, rows, "text_embed", chunk_schema, embedder, 8, report)
    sync_token_vectors(index, rows, embedder, 8, report)

    # A reader in another process: a fresh index object on the same bucket.
    reader = ChunkIndex(uri, storage_options=options)
    counting = CountingEncoder(embedder)
    ranked = LateInteractionReranker(counting, reader.token_vectors()).rerank(
        QUESTION, np.zeros(0), _candidates(reader)
    )
    assert counting.encoded == [QUESTION]  # every passage's tokens came from the bucket
    encoded = LateInteractionReranker(embedder).rerank(QUESTION, np.zeros(0), _candidates(reader))
    assert [c.chunk_id for c in ranked] == [c.chunk_id for c in encoded]
    for mine, theirs in zip(ranked, encoded, strict=True):
        assert mine.scores["maxsim"] == pytest.approx(theirs.scores["maxsim"], abs=0.01)

    # A passage removed from the table is gone from the next read of the new version.
    stored = reader.token_vectors().packed(["hotels", "holidays"])
    assert set(stored) == {"hotels", "holidays"}
    index.token_vectors().delete_keys(["hotels"])
    assert set(reader.token_vectors().packed(["hotels", "holidays"])) == {"holidays"}


def test_an_index_in_s3_is_read_at_its_published_versions(s3_endpoint: str) -> None:
    """The published versions live in the bucket too: commits after a publish stay unseen
    until the next one, and a store that never published is read at its latest."""
    s3_bucket(s3_endpoint, "index")
    uri = "s3://index/lancedb"
    options = lance_storage_options(uri, s3_endpoint, "eu-west-1")
    writer = ChunkIndex(uri, storage_options=options)
    writer.upsert(versioned_rows(["a", "b"], seed=1), [])
    reader = ChunkIndex(uri, storage_options=options)
    assert reader.published_versions() is None
    assert {row["chunk_id"] for row in reader.rows("true", ["chunk_id"], 10)} == {"a", "b"}

    published = writer.publish([writer, writer.sentences()])
    assert published == {"chunks": writer.latest_version(), "sentences": None}
    writer.upsert(versioned_rows(["c"], seed=2), ["a"])

    assert reader.latest_version() == published["chunks"]
    assert {row["chunk_id"] for row in reader.rows("true", ["chunk_id"], 10)} == {"a", "b"}
    with pytest.raises(IndexNotBuilt):
        reader.sentences().snapshot()
    writer.publish([writer])
    assert {row["chunk_id"] for row in reader.rows("true", ["chunk_id"], 10)} == {"b", "c"}
