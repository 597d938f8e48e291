"""A searched table version's snapshot in files the host's processes map: one copy for every
API worker, the same results as a snapshot held in memory, and a new version never served
an old one's rows or vectors."""

from __future__ import annotations

import pickle
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import lorehouse.search.snapshot_files as snapshot_files
from lorehouse.search.filters import access_clause
from lorehouse.stores.lance_index import ChunkIndex
from tests.unit.test_vector_search import CHUNKS_PER_DOCUMENT, DIMENSION, _table_rows

ROWS = 400


def _vectors(seed: int, rows: int = ROWS) -> np.ndarray:
    vectors = np.random.default_rng(seed).standard_normal((rows, DIMENSION))
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def _index(path: Path, cache: Path | None) -> ChunkIndex:
    return ChunkIndex(str(path), ann_min_rows=100_000, snapshot_folder=cache)


def _files(cache: Path) -> list[tuple[str, str]]:
    """(version folder, file name) of every snapshot file under `cache`."""
    return sorted((p.parent.name, p.name) for p in cache.glob("*/*"))


def _nearest(index: ChunkIndex, query: np.ndarray, where: str | None = None) -> list[str]:
    rows = index.snapshot().vector_search(query, where, 10, ["chunk_id"])
    return [row["chunk_id"] for row in rows]


def test_a_second_process_maps_the_vectors_the_first_wrote_and_finds_the_same_rows(
    tmp_path: Path,
) -> None:
    restricted = np.arange(ROWS) % 7 == 0
    _index(tmp_path / "lancedb", None).upsert(_table_rows(_vectors(1), restricted), [])
    cache = tmp_path / "cache"
    query = _vectors(2, 1)[0]
    outsider = access_clause([])
    held = _index(tmp_path / "lancedb", None)
    expected = (_nearest(held, query), _nearest(held, query, outsider))
    assert not isinstance(held.snapshot()._unit_vectors, np.memmap)

    first = _index(tmp_path / "lancedb", cache)
    assert (_nearest(first, query), _nearest(first, query, outsider)) == expected
    written = _files(cache)
    names = ["rowids.json", "rowids.order.npy", "rowids.sorted.npy", "rows.arrow"]
    assert [name for _, name in written] == [*names, "vectors.npy"]
    assert isinstance(first.snapshot()._unit_vectors, np.memmap)
    # Another process (an API worker) maps the same files: it reads no vector of its own...
    script = (
        "import sys, numpy as np\n"
        "from lorehouse.stores.lance_index import ChunkIndex\n"
        f"index = ChunkIndex({str(tmp_path / 'lancedb')!r}, ann_min_rows=100_000, "
        f"snapshot_folder=__import__('pathlib').Path({str(cache)!r}))\n"
        "snapshot = index.snapshot()\n"
        "snapshot._load()\n"
        "vectors = snapshot._unit_vectors\n"
        "import pyarrow as pa\n"
        "print(isinstance(vectors, np.memmap), vectors.filename, "
        "pa.total_allocated_bytes(), snapshot._rows.nbytes)\n"
    )
    found = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout.split()
    assert found[0] == "True" and Path(found[1]).parent.parent == cache
    # ... and the rows the first wrote: none of them read into the process's own memory.
    assert int(found[2]) < int(found[3]) / 10
    assert _files(cache) == written


def test_a_new_version_gets_its_own_file_and_the_old_one_goes_once_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    index = _index(tmp_path / "lancedb", cache)
    vectors = _vectors(3)
    index.upsert(_table_rows(vectors, np.zeros(ROWS, dtype=bool)), [])
    query = vectors[5]
    assert _nearest(index, query)[0] == "c00005"
    before = {folder for folder, _ in _files(cache)}
    # The row moves far from the query: a search of the new version must not score the old.
    moved = vectors.copy()
    moved[5] = -moved[5]
    index.upsert(_table_rows(moved, np.zeros(ROWS, dtype=bool)).slice(5, 1), [])
    monkeypatch.setattr(snapshot_files, "STALE_AFTER", 0.0)
    assert _nearest(index, query)[0] != "c00005"
    after = {folder for folder, _ in _files(cache)}
    assert len(after) == 1 and not after & before


def test_a_torn_or_unwritable_file_leaves_searches_reading_from_memory(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    index = _index(tmp_path / "lancedb", cache)
    vectors = _vectors(4)
    index.upsert(_table_rows(vectors, np.zeros(ROWS, dtype=bool)), [])
    assert _nearest(index, vectors[9])[0] == "c00009"
    (vectors_file,) = cache.glob("*/vectors.npy")
    vectors_file.write_bytes(vectors_file.read_bytes()[:1000])  # a file cut short
    again = _index(tmp_path / "lancedb", cache)
    assert _nearest(again, vectors[9])[0] == "c00009"  # read from the table, written again
    assert vectors_file.stat().st_size > 1000
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the folder would be")
    unwritable = _index(tmp_path / "lancedb", blocked / "vectors")
    assert _nearest(unwritable, vectors[9])[0] == "c00009"
    assert not isinstance(unwritable.snapshot()._unit_vectors, np.memmap)


WORDS = ["leave", "parental", "hotel", "night", "budget", "pager", "security", "travel"]


def _text_rows(vectors: np.ndarray, restricted: np.ndarray) -> pa.Table:
    """`_table_rows` with text: each row a few of WORDS, so BM25 scopes and passages differ
    between callers, and some rows holding the same text."""
    rows = _table_rows(vectors, restricted)
    rng = np.random.default_rng(8)
    texts = [
        " ".join(rng.choice(WORDS, size=int(rng.integers(3, 30))).tolist())
        for _ in range(rows.num_rows)
    ]
    texts[3] = texts[10]  # one text held by two rows
    replaced = {
        "text_embed": pa.array(texts),
        "text_chat": pa.array(texts),
        "position": pa.array(np.arange(rows.num_rows) % CHUNKS_PER_DOCUMENT, pa.int32()),
        "is_table": pa.array((np.arange(rows.num_rows) % 11 == 0).tolist()),
    }
    for name, values in replaced.items():
        field = rows.schema.field(name)
        rows = rows.set_column(rows.schema.get_field_index(name), field, values.cast(field.type))
    return rows


def _reads(index: ChunkIndex) -> dict:
    """What searches read of a snapshot beside vectors: BM25 rankings and mentions for two
    callers, rows by key, passages, holders of texts."""
    snapshot = index.snapshot()
    outsider, insider = access_clause([]), access_clause(["security"])
    ranked = {
        (query, clause): snapshot.text_ranking(query, clause, 20, scope=clause)
        for query in ("parental leave", "hotel night budget", "security pager")
        for clause in (outsider, insider)
    }
    keys = [key for pairs in ranked.values() for key, _ in pairs[:5]] + ["c99999"]
    runs = snapshot.passages(40)
    texts = [row["text_chat"] for row in snapshot.rows_by_key(keys, None, ["text_chat"]).values()]
    return {
        "ranked": ranked,
        "rows": snapshot.rows_by_key(keys, outsider, ["doc_id", "text_chat", "acl"]),
        "passages": {key: runs.get(key) for key in keys},
        "holders": snapshot.holders("text_chat", [*texts, "no such text"], outsider),
        "mentions": [snapshot.mentions(w, outsider) for w in ("pager", "refund", "absent")],
    }


def test_a_mapped_snapshot_reads_what_one_held_in_memory_reads(tmp_path: Path) -> None:
    restricted = np.arange(ROWS) % 5 == 0
    _index(tmp_path / "lancedb", None).upsert(_text_rows(_vectors(6), restricted), [])
    cache = tmp_path / "cache"
    held = _reads(_index(tmp_path / "lancedb", None))
    assert held["ranked"][("security pager", access_clause(["security"]))]
    assert held["holders"] and "no such text" not in held["holders"]
    assert any(len(members or ()) > 1 for members in held["passages"].values())
    assert held["passages"]["c99999"] is None and "c99999" not in held["rows"]
    assert _reads(_index(tmp_path / "lancedb", cache)) == held
    names = {name for _, name in _files(cache)}
    assert {"bm25.json", "passages.40.json", "find.chunk_id.json", "find.text_chat.json"} <= names
    # Another process maps the postings and lookups the first wrote, and reads the same.
    script = (
        "import pickle, sys\n"
        "from pathlib import Path\n"
        "from tests.unit.test_snapshot_files import _index, _reads\n"
        f"index = _index(Path({str(tmp_path / 'lancedb')!r}), Path({str(cache)!r}))\n"
        "sys.stdout.buffer.write(pickle.dumps(_reads(index)))\n"
    )
    found = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, check=True, cwd=Path.cwd()
    ).stdout
    assert pickle.loads(found) == held
    assert {name for _, name in _files(cache)} == names


def test_the_ann_index_is_written_once_and_every_other_process_maps_it(tmp_path: Path) -> None:
    """Past the ANN threshold the first process writes the version's IVF index beside its
    vectors; another process maps that file (its own memory holds none of the codes) and
    proposes the same rows, never one outside the caller's access."""
    from lorehouse.search import ann

    rows = 4000
    centres = np.random.default_rng(8).standard_normal((40, DIMENSION))
    noise = np.random.default_rng(9).standard_normal((rows, DIMENSION))
    vectors = centres[np.arange(rows) % 40] + 0.4 * noise
    vectors = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)
    restricted = np.arange(rows) // CHUNKS_PER_DOCUMENT % 5 == 0
    cache = tmp_path / "cache"
    search = ann.NeighbourSearch(min_rows=1000, probes=8)
    first = ChunkIndex(str(tmp_path / "lancedb"), neighbours=search, snapshot_folder=cache)
    first.upsert(_table_rows(vectors, restricted), [])
    outsider = access_clause([])
    query = vectors[17] + 0.05
    expected = _nearest(first, query, outsider)
    assert first.snapshot().ann_engine == "mapped"
    (index_file,) = cache.glob(f"*/{ann.INDEX_FILE}")
    written = index_file.stat().st_mtime_ns
    assert all(not restricted[int(key[1:])] for key in expected)
    script = (
        "import pathlib, numpy as np, resource\n"
        "from lorehouse.search.ann import NeighbourSearch\n"
        "from lorehouse.search.filters import access_clause\n"
        "from lorehouse.stores.lance_index import ChunkIndex\n"
        f"index = ChunkIndex({str(tmp_path / 'lancedb')!r}, "
        "neighbours=NeighbourSearch(min_rows=1000, probes=8), "
        f"snapshot_folder=pathlib.Path({str(cache)!r}))\n"
        f"query = np.array({query.tolist()!r}, dtype=np.float32)\n"
        "rows = index.snapshot().vector_search(query, access_clause([]), 10, ['chunk_id'])\n"
        "maps = [line for line in open('/proc/self/maps') if line.rstrip().endswith("
        f"{ann.INDEX_FILE!r})]\n"
        "print(' '.join(row['chunk_id'] for row in rows))\n"
        "print(len(maps))\n"
    )
    found = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert found[0].split() == expected
    assert int(found[1]) >= 1, "the index's codes were read into memory, not mapped"
    assert index_file.stat().st_mtime_ns == written, "a second process wrote the index again"


def test_the_rows_file_is_written_group_by_group_while_the_rows_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The process that writes a version's files holds one group of rows at a time, not the
    version's rows: at a million chunks those are gigabytes."""
    monkeypatch.setattr(snapshot_files, "BATCH_ROWS", 50)
    schema = pa.schema([("chunk_id", pa.string()), ("_rowid", pa.uint64())])
    written_before: list[int] = []

    def read_with_vectors(out: np.ndarray) -> Iterator[pa.RecordBatch]:
        for start in range(0, ROWS, 20):
            written_before.append(
                sum(path.stat().st_size for path in tmp_path.glob(".*/rows.arrow"))
            )
            out[start : start + 20] = start
            ids = range(start, start + 20)
            yield pa.record_batch(
                [pa.array([f"c{i}" for i in ids]), pa.array(ids, pa.uint64())], schema=schema
            )

    files = snapshot_files.SnapshotFiles(tmp_path, "chunks", "v1")
    mapped = files.load(ROWS, schema, 4, read_with_vectors)
    assert mapped is not None
    rows, vectors = mapped
    assert rows["chunk_id"].to_pylist() == [f"c{i}" for i in range(ROWS)]
    # Read 20 rows at a time, kept in groups of at least 50.
    assert [batch.num_rows for batch in rows.to_batches()] == [60] * 6 + [40]
    assert vectors[399].tolist() == [380.0] * 4 and isinstance(vectors, np.memmap)
    # Groups reached the file while later rows were still to be read.
    assert 0 < written_before[len(written_before) // 2] < written_before[-1]
