"""The nearest-neighbour index over a table version's unit vectors, in a file every process
of the host maps.

Why not LanceDB's own vector index at query time: each process keeps the index pages it has
read in its own cache (LanceDB's index cache), so every API worker holds its own copy, and
the copy grows with the table (about 0.65 KB a chunk for IVF_HNSW_SQ); a cache bound below
the index's size makes every search read partitions again, many times slower. An IVF index
with 8-bit scalar-quantized codes, written by faiss into the version's snapshot folder and
opened with `IO_FLAG_MMAP_IFC`, is mapped instead: its codes sit in the page cache once for
every worker, as the unit vectors and postings do (`lorehouse.search.snapshot_files`), and a
search reads in only the inverted lists it probes.

faiss rather than code of our own: it is the maintained library for exactly this (k-means
training, quantized inverted lists, filtered search with an id bitmap, zero-copy mapping of
its own files), and its IVF search over a bitmap of the rows a caller may read is a true
prefilter, so no restricted row is ever proposed.

The index ranks candidates by quantized inner product; the snapshot rescores them with the
full unit vectors, so the distances a search returns are exact.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import faiss

logger = logging.getLogger(__name__)

#: The index's file in a version's snapshot folder.
INDEX_FILE = "neighbours.faiss"
#: Training rows per inverted list: enough for k-means to place each centroid, and a bound on
#: the sample's memory (faiss itself warns below 39).
_TRAINING_ROWS_PER_LIST = 40
#: Rows handed to faiss per `add`: the quantized copy of a batch is built in memory.
_ADD_BATCH_ROWS = 65_536
#: A trained index is reused for a new version while its list count is within this factor of
#: the count the new version's size calls for: a version differs from the one before it by a
#: few documents, and training is most of a build.
_RETRAIN_FACTOR = 2.0


def list_count(rows: int) -> int:
    """Inverted lists for `rows` vectors: the square root, as LanceDB's IVF default, so a
    probe reads about sqrt(rows) codes whatever the table's size."""
    return max(1, min(65_536, round(math.sqrt(rows))))


@dataclass(frozen=True)
class NeighbourIndex:
    """One version's IVF index, mapped or held, searched with a caller's row mask."""

    index: faiss.IndexIVF
    #: Inverted lists searched per query (at most the index's list count).
    probes: int

    @property
    def lists(self) -> int:
        return int(self.index.nlist)

    def rows_probed(self, rows: int) -> float:
        """About how many of `rows` codes a search reads."""
        return rows * min(self.probes, self.lists) / self.lists

    def search(self, query: np.ndarray, allowed: np.ndarray, limit: int) -> np.ndarray:
        """Positions (row numbers of the vectors it was built from) of the `limit` rows of
        `allowed` nearest `query` by quantized inner product, best first; fewer when the
        probed lists hold fewer allowed rows."""
        import faiss

        bits = np.packbits(allowed, bitorder="little")
        params = faiss.SearchParametersIVF(
            sel=faiss.IDSelectorBitmap(len(allowed), faiss.swig_ptr(bits)),
            nprobe=min(self.probes, self.lists),
        )
        query = np.ascontiguousarray(query.reshape(1, -1), dtype=np.float32)
        _, found = self.index.search(query, limit, params=params)
        positions = found[0]
        return positions[positions >= 0].astype(np.int64)


def build(vectors: np.ndarray, trained: faiss.IndexIVF | None = None) -> faiss.IndexIVF:
    """An IVF index with 8-bit codes over `vectors` (unit rows), ids their row numbers.

    `trained`: another version's index, whose centroids and code ranges are reused when its
    list count suits this table's size (a few documents changed), which skips training.
    """
    import faiss

    rows, width = vectors.shape
    lists = list_count(rows)
    reusable = trained is not None and trained.d == width and _suits(trained.nlist, lists)
    if reusable:
        assert trained is not None
        index = _empty_copy(trained)
    else:
        quantizer = faiss.IndexFlatIP(width)
        index = faiss.IndexIVFScalarQuantizer(
            quantizer, width, lists, faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT
        )
        index.train(_training_sample(vectors, lists))
    for start in range(0, rows, _ADD_BATCH_ROWS):
        index.add(np.ascontiguousarray(vectors[start : start + _ADD_BATCH_ROWS]))
    return index


def write(index: faiss.IndexIVF, path: Path) -> None:
    """Writes `index` to `path`; faiss's I/O errors (a full disk) raised as OSError."""
    import faiss

    try:
        faiss.write_index(index, str(path))
    except RuntimeError as error:
        raise OSError(f"cannot write {path}: {error}") from error


def open_mapped(path: Path) -> faiss.IndexIVF | None:
    """The index written at `path`, its inverted lists mapped rather than read: every process
    that opens it shares one copy in the page cache. None (logged) where faiss cannot read
    it: the caller builds its own."""
    import faiss

    try:
        return faiss.read_index(str(path), faiss.IO_FLAG_MMAP_IFC | faiss.IO_FLAG_READ_ONLY)
    except RuntimeError as error:
        logger.warning("search index %s not mapped, built per process: %s", path, error)
        return None


def _suits(lists: int, wanted: int) -> bool:
    return wanted / _RETRAIN_FACTOR <= lists <= wanted * _RETRAIN_FACTOR


def _empty_copy(index: faiss.IndexIVF) -> Any:
    """A trained index like `index` with no rows: its coarse quantizer and code ranges, none
    of its (possibly mapped) inverted lists."""
    import faiss

    empty = faiss.IndexIVFScalarQuantizer(
        faiss.IndexFlatIP(index.d),
        index.d,
        index.nlist,
        faiss.ScalarQuantizer.QT_8bit,
        faiss.METRIC_INNER_PRODUCT,
    )
    centroids = index.quantizer.reconstruct_n(0, index.nlist)
    empty.quantizer.add(centroids)
    ivf_sq = faiss.downcast_index(index)
    empty.sq.trained = ivf_sq.sq.trained
    empty.is_trained = True
    return empty


def _training_sample(vectors: np.ndarray, lists: int) -> np.ndarray:
    """Rows to train on, spread over the table with a fixed seed (so two processes building
    one version train alike), copied out of the mapped matrix."""
    rows = len(vectors)
    wanted = min(rows, _TRAINING_ROWS_PER_LIST * lists)
    picked = np.sort(np.random.default_rng(0).choice(rows, size=wanted, replace=False))
    return np.ascontiguousarray(vectors[picked], dtype=np.float32)


@dataclass(frozen=True)
class NeighbourSearch:
    """When and how a reader's vector searches go through an ANN index (the deployment's
    `ann_index_min_rows`, `search_ann_engine` and `search_ann_probes`, from the wiring)."""

    #: Rows from which a table version is searched through the index; below, exactly.
    min_rows: int
    #: Inverted lists of the mapped index read per search.
    probes: int
    #: "mapped": this module's index in the snapshot files; "lancedb": LanceDB's own.
    engine: str = "mapped"

    def engine_for(self, rows: int, lancedb_indexed: bool) -> str | None:
        """What proposes a vector search's candidates over a table of `rows` rows: the
        mapped index from `min_rows` rows; LanceDB's where that is the engine and the table
        has its index (`lancedb_indexed`); None where every row is scored."""
        if self.engine == "lancedb":
            return "lancedb" if lancedb_indexed else None
        return "mapped" if rows >= self.min_rows else None
