"""A search sees every commit: the cheap version check of a local table (one `stat` of its
`_versions` folder) must never hide a commit another process made, settled folder or not."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from lorehouse.search import tables
from lorehouse.search.retriever import Retriever, access_clause
from lorehouse.search.tables import VersionGone, VersionsFolderWatch
from lorehouse.stores.lance_index import ChunkIndex, chunk_schema
from tests.conftest import default_embedder

DIMENSION = 8
AN_HOUR = 3600


def _rows(
    ids: list[str],
    seed: int,
    doc_ids: list[str] | None = None,
    acls: list[list[str]] | None = None,
    texts: list[str] | None = None,
) -> pa.Table:
    schema = chunk_schema(DIMENSION, "test-8")
    vectors = np.random.default_rng(seed).standard_normal((len(ids), DIMENSION))
    columns = {
        "chunk_id": ids,
        "doc_id": doc_ids or ids,
        "acl": acls or [[] for _ in ids],
        "text_embed": ids,
        "text_chat": texts or [f"text of {key}" for key in ids],
        "position": list(range(len(ids))),
    }
    columns |= {"embed_key": ids, "row_hash": ids}
    arrays = [
        pa.FixedSizeListArray.from_arrays(
            pa.array(vectors.astype(np.float32).reshape(-1), pa.float32()), DIMENSION
        )
        if field.name == "vector"
        else pa.array(columns.get(field.name, [None] * len(ids)), type=field.type)
        for field in schema
    ]
    return pa.Table.from_arrays(arrays, schema=schema)


def _age_versions_folder(lancedb: Path) -> None:
    """Makes the table look untouched for an hour, as a server's store is between reindexes."""
    past = time.time() - AN_HOUR
    os.utime(lancedb / "chunks.lance" / "_versions", (past, past))


def _visible_ids(index: ChunkIndex) -> set[str]:
    snapshot = index.snapshot()
    found = snapshot.vector_search(np.ones(DIMENSION), access_clause([]), 100, ["chunk_id"])
    return {row["chunk_id"] for row in found}


def test_a_reader_sees_a_commit_made_after_it_trusted_a_settled_folder(tmp_path: Path) -> None:
    lancedb = tmp_path / "lancedb"
    writer = ChunkIndex(str(lancedb))
    writer.upsert(_rows(["a", "b"], seed=1), [])
    _age_versions_folder(lancedb)
    reader = ChunkIndex(str(lancedb))  # another process: its own connection and caches
    assert _visible_ids(reader) == {"a", "b"}
    assert _visible_ids(reader) == {"a", "b"}  # now answered by the folder's state alone

    writer.upsert(_rows(["c"], seed=2), ["a"])

    assert _visible_ids(reader) == {"b", "c"}


def test_a_folder_changed_within_the_last_second_is_never_trusted(tmp_path: Path) -> None:
    lancedb = tmp_path / "lancedb"
    ChunkIndex(str(lancedb)).upsert(_rows(["a"], seed=1), [])
    watch = VersionsFolderWatch(lancedb / "chunks.lance")
    fresh = watch.state()
    watch.trust(fresh, 1)
    # A commit in the same clock tick would leave this state as it is: it must not be taken
    # to mean "no commit since".
    assert watch.known_version(fresh) is None

    _age_versions_folder(lancedb)
    settled = watch.state()
    watch.trust(settled, 1)
    assert watch.known_version(settled) == 1
    assert watch.known_version(None) is None


def test_a_missing_table_is_missing_and_then_found_once_written(tmp_path: Path) -> None:
    lancedb = tmp_path / "lancedb"
    reader = ChunkIndex(str(lancedb))
    assert not reader.sentences().exists()
    assert not reader.exists()

    ChunkIndex(str(lancedb)).upsert(_rows(["a"], seed=1), [])

    assert reader.exists()
    assert _visible_ids(reader) == {"a"}


def test_an_older_version_reads_as_it_was_until_its_retention_ends(tmp_path: Path) -> None:
    """A citation names the version it was read from: that version answers with its own
    rows after later writes, and once the table's retention has cleaned it up, says so."""
    lancedb = str(tmp_path / "lancedb")
    kept = ChunkIndex(lancedb, keep_versions=timedelta(days=7))
    kept.upsert(_rows(["a", "b"], seed=1), [])
    cited = kept.latest_version()
    kept.upsert(_rows(["c"], seed=2), ["a"])
    kept.refresh_indexes()  # compacts and cleans versions older than the retention

    def ids_at(index: ChunkIndex, version: int) -> set[str]:
        return {row["chunk_id"] for row in index.rows_at(version, "true", ["chunk_id"], 10)}

    assert ids_at(kept, cited) == {"a", "b"}
    assert ids_at(kept, kept.latest_version()) == {"b", "c"}
    with pytest.raises(VersionGone, match="not written yet"):
        kept.rows_at(kept.latest_version() + 5, "true", ["chunk_id"], 10)

    brief = ChunkIndex(lancedb, keep_versions=timedelta(0))
    brief.upsert(_rows(["d"], seed=3), [])
    brief.refresh_indexes()
    with pytest.raises(VersionGone, match="no longer kept"):
        brief.rows_at(cited, "true", ["chunk_id"], 10)


def test_a_cited_chunk_says_what_became_of_it_and_hides_when_access_narrowed(
    tmp_path: Path,
) -> None:
    index = ChunkIndex(str(tmp_path / "lancedb"))
    index.upsert(_rows(["a", "b", "c", "d"], seed=1), [])
    cited = index.latest_version()
    # b's document was edited (a new chunk id), c's removed, d's narrowed to a group.
    index.upsert(
        _rows(["b2", "d"], seed=2, doc_ids=["b", "d"], acls=[[], ["security"]]), ["b", "c"]
    )
    retriever = Retriever(index, default_embedder())

    def since(chunk_id: str, groups: list[str]) -> str | None:
        found = retriever.chunk_preview(chunk_id, groups, 0, cited)
        assert found is not None, chunk_id
        return retriever.changed_since(found[0], groups, cited)

    assert [since(chunk_id, []) for chunk_id in "abc"] == ["unchanged", "changed", "removed"]
    assert since("d", []) is None  # served to nobody who lost access
    assert since("d", ["security"]) == "unchanged"


def test_a_version_replaced_longer_ago_than_its_retention_is_gone_without_a_cleanup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Until a later run cleans up, every older version's files are still there: the age is
    checked when a version is read, so retention holds whether or not a run comes."""
    index = ChunkIndex(str(tmp_path / "lancedb"), keep_versions=timedelta(hours=1))
    index.upsert(_rows(["a", "b"], seed=1), [])
    cited = index.latest_version()
    index.upsert(_rows(["c"], seed=2), ["a"])  # no refresh_indexes: nothing is cleaned up

    def ids_at(version: int) -> set[str]:
        return {row["chunk_id"] for row in index.rows_at(version, "true", ["chunk_id"], 10)}

    now = datetime.now(UTC)
    monkeypatch.setattr(tables, "_utc_now", lambda: now + timedelta(minutes=59))
    assert ids_at(cited) == {"a", "b"}
    monkeypatch.setattr(tables, "_utc_now", lambda: now + timedelta(minutes=61))
    with pytest.raises(VersionGone, match="no longer kept"):
        ids_at(cited)
    # The latest version is what the index holds now: it never ages.
    monkeypatch.setattr(tables, "_utc_now", lambda: now + timedelta(days=365))
    assert ids_at(index.latest_version()) == {"b", "c"}


def test_a_document_restricted_and_then_deleted_stays_hidden_at_the_version_cited(
    tmp_path: Path,
) -> None:
    index = ChunkIndex(str(tmp_path / "lancedb"))
    index.upsert(_rows(["a", "d"], seed=1), [])
    cited = index.latest_version()
    index.upsert(_rows(["d"], seed=1, acls=[["security"]]), [])
    index.delete_keys(["d"])
    retriever = Retriever(index, default_embedder())

    assert retriever.pinned_preview("d", [], 0, cited) is None
    insider = retriever.pinned_preview("d", ["security"], 0, cited)
    assert insider is not None and insider[2] == "removed"
    outsider = retriever.pinned_preview("a", [], 0, cited)
    assert outsider is not None and outsider[2] == "unchanged"


def test_a_document_moved_into_a_restricted_group_stays_hidden_at_the_version_cited(
    tmp_path: Path,
) -> None:
    """A move gives the document a new id: the old one looks removed, and its public access
    list then must not outweigh the restricted one its text carries now."""
    index = ChunkIndex(str(tmp_path / "lancedb"))
    texts = ["## Plan\n\nBravo ships in May.", "## Budget\n\nBravo costs 4 M.", "Echo."]
    index.upsert(_rows(["b0", "b1", "e"], seed=1, doc_ids=["b", "b", "e"], texts=texts), [])
    cited = index.latest_version()
    # b moves under a new id into the security group; e is copied there and stays public.
    moved = _rows(
        ["s0", "s1", "s2"],
        seed=1,
        doc_ids=["s", "s", "t"],
        acls=[["security"]] * 3,
        texts=texts,
    )
    index.upsert(moved, ["b0", "b1"])
    retriever = Retriever(index, default_embedder())

    assert retriever.pinned_preview("b0", [], 1, cited) is None
    assert retriever.pinned_preview("b1", [], 0, cited) is None
    insider = retriever.pinned_preview("b0", ["security"], 1, cited)
    assert insider is not None and insider[2] == "removed" and len(insider[1]) == 2
    copied = retriever.pinned_preview("e", [], 0, cited)
    assert copied is not None and copied[2] == "unchanged"
