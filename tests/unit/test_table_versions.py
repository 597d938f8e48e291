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
from lorehouse.search.filters import access_clause
from lorehouse.search.retriever import Retriever
from lorehouse.search.versions import VersionGone, VersionsFolderWatch
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


# -- a new version loads in the background ---------------------------------------------------

_CORPUS = [f"c{n}" for n in range(8)]


def _hashed(rows: pa.Table, hashes: list[str]) -> pa.Table:
    """`rows` with these row hashes: a row hash covers every stored column, so a row whose
    access or text changed carries a new one."""
    at = rows.schema.get_field_index("row_hash")
    return rows.set_column(at, "row_hash", pa.array(hashes, pa.string()))


def _search(snapshot: tables.TableSnapshot, groups: list[str]) -> set[str]:
    found = snapshot.vector_search(np.ones(DIMENSION), access_clause(groups), 100, ["chunk_id"])
    return {row["chunk_id"] for row in found}


def _text_search(snapshot: tables.TableSnapshot, text: str, groups: list[str]) -> set[str]:
    return {key for key, _ in snapshot.text_ranking(text, access_clause(groups), 100)}


def _loaded_reader(lancedb: Path) -> tuple[ChunkIndex, ChunkIndex, pa.Table]:
    """A writer, and a reader (another process) that has searched the first version."""
    writer = ChunkIndex(str(lancedb))
    rows = _rows(_CORPUS, seed=1)
    writer.upsert(rows, [])
    reader = ChunkIndex(str(lancedb), warm_min_rows=1)
    assert _search(reader.snapshot(), []) == set(_CORPUS)
    return writer, reader, rows


def test_a_new_version_withholds_what_it_withdrew_at_once_and_adds_rows_once_loaded(
    tmp_path: Path,
) -> None:
    writer, reader, rows = _loaded_reader(tmp_path / "lancedb")
    first = reader.snapshot().version
    narrowed = _rows(["c1"], seed=1, acls=[["group:legal"]], texts=["text of c1"])
    added = _rows(["c8"], seed=3, texts=["text of c8"])
    # c1 moves to a restricted group, c0 is deleted, c2 is written again as it was (a
    # rewrite moves a row, as compaction does: it stays served) and c8 is new.
    writer.upsert(
        pa.concat_tables([_hashed(narrowed, ["c1 legal"]), rows.slice(2, 1), added]), ["c0"]
    )

    serving = reader.snapshot()

    assert serving.version == first  # citations name the version the rows were read from
    assert _search(serving, []) == set(_CORPUS) - {"c0", "c1"}
    assert _search(serving, ["group:legal"]) == set(_CORPUS) - {"c0", "c1"}
    assert _text_search(serving, "text of c1", []) & {"c0", "c1"} == set()
    assert serving.rows_by_key(["c0", "c1", "c2"], None, ["chunk_id"]).keys() == {"c2"}
    assert not serving.mentions("c0", access_clause([]))

    assert reader.loaded(timeout=60)
    loaded = reader.snapshot()
    assert loaded.version == writer.table().version
    assert _search(loaded, []) == set(_CORPUS) - {"c0", "c1"} | {"c8"}
    assert _search(loaded, ["group:legal"]) == set(_CORPUS) - {"c0"} | {"c8"}


def test_a_version_that_changes_most_rows_is_loaded_by_the_search_that_reads_it(
    tmp_path: Path,
) -> None:
    writer, reader, rows = _loaded_reader(tmp_path / "lancedb")
    writer.upsert(_hashed(rows, [f"{key} edited" for key in _CORPUS]), [])

    snapshot = reader.snapshot()

    assert snapshot.version == writer.table().version
    assert _search(snapshot, []) == set(_CORPUS)
    assert reader.loaded(timeout=0)


def test_a_failed_background_load_reaches_the_next_search(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer, reader, _ = _loaded_reader(tmp_path / "lancedb")
    writer.upsert(_rows(["c8"], seed=3), ["c0"])

    def unreadable(*_: object, **__: object) -> None:
        raise OSError("data file unreadable")

    monkeypatch.setattr(tables.TableSnapshot, "_read_rows_and_vectors", unreadable)
    assert _search(reader.snapshot(), []) == set(_CORPUS) - {"c0"}
    assert reader.loaded(timeout=60)

    with pytest.raises(OSError, match="data file unreadable"):
        _search(reader.snapshot(), [])

    monkeypatch.undo()
    assert _search(reader.snapshot(), []) == set(_CORPUS) - {"c0"} | {"c8"}


def test_a_row_whose_access_narrowed_is_withheld_even_under_its_old_row_hash(
    tmp_path: Path,
) -> None:
    writer, reader, _ = _loaded_reader(tmp_path / "lancedb")
    writer.upsert(_rows(["c3"], seed=1, acls=[["group:legal"]], texts=["text of c3"]), [])

    assert "c3" not in _search(reader.snapshot(), [])
    assert reader.loaded(timeout=60)
    assert "c3" not in _search(reader.snapshot(), [])
    assert "c3" in _search(reader.snapshot(), ["group:legal"])


def _embedded(rows: pa.Table, texts: list[str]) -> pa.Table:
    """`rows` with these texts as what was embedded and what keyword search reads."""
    at = rows.schema.get_field_index("text_embed")
    return rows.set_column(at, "text_embed", pa.array(texts, pa.string()))


def test_a_new_version_carries_the_postings_over_and_ranks_as_a_fresh_reader_does(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The background load analyses only what the new version added: its postings equal a
    fresh reader's of that version, so every caller's keyword scores are the same."""
    lancedb = tmp_path / "lancedb"
    keys = [f"c{n}" for n in range(30)]
    words = ["leave", "travel", "expense", "laptop", "badge", "pager", "hotel", "train"]
    texts = [f"{words[n % 8]} policy {words[(n * 3) % 8]} rule {n}" for n in range(30)]
    writer = ChunkIndex(str(lancedb))
    rows = _embedded(
        _rows(keys, seed=1, acls=[["group:hr"] if n % 4 else [] for n in range(30)]), texts
    )
    writer.upsert(rows, [])
    reader = ChunkIndex(str(lancedb), warm_min_rows=1)
    assert "c4" in _text_search(reader.snapshot(), "leave policy", ["group:hr"])
    edited = _hashed(
        _embedded(_rows(["c4"], seed=1), ["sabbatical after five years"]), ["c4 edited"]
    )
    added = _embedded(_rows(["c30", "c31"], seed=3), ["sabbatical request form", "pager duty"])
    writer.upsert(pa.concat_tables([edited, rows.slice(7, 1), added]), ["c0", "c9"])
    reader.snapshot()

    with caplog.at_level("INFO", logger="lorehouse.search.snapshot"):
        assert reader.loaded(timeout=60)
    loaded = reader.snapshot()
    fresh = ChunkIndex(str(lancedb)).snapshot()
    assert loaded.version == fresh.version == writer.table().version

    assert any("postings carried over" in r.getMessage() for r in caplog.records)
    ours, theirs = loaded._bm25_index(), fresh._bm25_index()
    for field, postings in theirs.fields.items():
        for part, array in postings.arrays().items():
            assert np.array_equal(ours.fields[field].arrays()[part], array), (field, part)
    for groups in ([], ["group:hr"]):
        for query in ("sabbatical", "leave policy", "pager duty rule"):
            assert loaded.text_ranking(query, access_clause(groups), 10) == fresh.text_ranking(
                query, access_clause(groups), 10
            )
    assert _text_search(loaded, "sabbatical", []) == {"c4", "c30"}
    assert "c4" not in _text_search(loaded, "leave", ["group:hr"])
