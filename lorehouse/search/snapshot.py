"""One version of a LanceDB table as searches read it: its rows, vectors and BM25 postings
loaded once, and every ranking, predicate mask, passage and row lookup a search asks of it.

One class, `TableSnapshot`, holds most of this module and is longer than the others: its
methods share what a version loads and derives (rows, normalised vectors, postings, masks,
passage divisions), each built once per version and reused by every search after, and a
search asks one snapshot everything so that it shows one version. The readers that make
snapshots are in `lorehouse.search.tables`.
"""

from __future__ import annotations

import copy
import hashlib
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, overload

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lorehouse.search import ann
from lorehouse.search.bm25 import BM25Index
from lorehouse.search.passages import passage_runs
from lorehouse.search.postings import POSTINGS_PARTS, FieldPostings
from lorehouse.search.snapshot_files import SnapshotFiles, regrouped

if TYPE_CHECKING:
    import faiss
    import lancedb

    from lorehouse.search.tables import TableReader

logger = logging.getLogger(__name__)

MODEL_KEY = b"lorehouse.embedding_model"


DIMENSION_KEY = b"lorehouse.embedding_dimension"


LAYOUT_KEY = b"lorehouse.layout"


# Row masks of access and filter predicates kept per table version (a few KB each at 100k rows).
_CACHED_MASKS = 64


# With an ANN index, candidates proposed per result asked (and at least), rescored with the
# full vectors: the index ranks by quantized distances, which alone miss some of the exact
# nearest rows, and rescoring more candidates than asked finds them again
# (tests/unit/test_vector_search.py). Extra row ids cost the index little beside the
# search itself.
_ANN_CANDIDATES_PER_RESULT = 2


_ANN_MIN_CANDIDATES = 100


# Allowed rows up to which a mapped-index search scores each of them instead of probing the
# index (a filter on a few documents): exact, and cheaper than reading lists that hold few
# of them; also bounded by a quarter of the codes a probe reads.
_EXACT_MAX_ALLOWED = 20_000


# From this share of rows allowed, the ANN index is searched unfiltered and the mask applied.
_POSTFILTER_MIN_SHARE = 0.5


# Columns of a search result a snapshot does not keep with its rows (the vectors are kept
# apart, normalised).
_NOT_HELD = ("vector", "_distance")


#: The most of a version's rows a newer version may delete or change for searches to go on
#: reading the rest while the newer one loads: past it they would miss too much of the corpus
#: (a re-enrichment, a change of access for everyone), and the first search waits instead.
_MAX_WITHHELD_SHARE = 0.25

#: What makes two versions' rows the same row: its key, the hash of every stored column
#: (access included) and the embed key (model and embedded text, so the vector). The access
#: list is compared as well, where the table has one: whatever wrote a row, one whose access
#: changed is never served as it was.
_SAME_ROW_COLUMNS = ("row_hash", "embed_key")
_ACCESS_COLUMN = "acl"


# Passage divisions kept per table version, one per word budget asked for.
_CACHED_PASSAGE_BUDGETS = 4


def best_by_position(scores: np.ndarray, positions: np.ndarray, count: int) -> np.ndarray:
    """Indexes of the `count` highest `scores`; of rows tied with the last one kept, those
    of the lowest `positions`. Which candidates were proposed, and in what order, then
    changes nothing: rows with equal vectors (a document stored twice) tie exactly."""
    last = -np.partition(-scores, count - 1)[count - 1]
    above = np.flatnonzero(scores > last)
    tied = np.flatnonzero(scores == last)
    tied = tied[np.argsort(positions[tied], kind="stable")[: count - len(above)]]
    return np.concatenate([above, tied])


class TableSnapshot:
    """One version of a table, held for searching it: every query of a search asks one.

    What a query needs beyond LanceDB itself is built on first use and kept for the version:

    * **The rows**, every column but the vector, and the vectors as one normalised float32
      matrix (1.5 KB a row at 384 dimensions). Reading even a few rows back from LanceDB
      costs more than the rest of a search, whatever the table size; from memory the rows a
      search shows cost next to nothing.
    * **BM25 postings** of the text columns (see `lorehouse.search.bm25`).
    * **Lookups** of rows by key (and by text, for `holders`) and passage divisions.
    * **Predicate masks.** The rows matching an access or filter predicate, asked of LanceDB
      (the one evaluator of predicates) once per predicate; most callers share a handful.

    With a snapshot folder (`TableReader.snapshot_folder`, the default), all but the masks are
    files every process of the host maps (`SnapshotFiles`): `--workers N` hold one copy in
    the page cache, and a process holds of its own what does not grow with the table
    beyond its bounded caches. Without one, each process holds them in memory.

    Vector search, without a vector index (below the ANN threshold), is one matrix-vector
    product with the mask applied: exact like LanceDB's flat scan, without that scan's cost
    per query, which grows with the table.
    With the index, the IVF_HNSW_SQ search proposes twice the asked number of candidates (at
    least 100) by quantized distance and the product rescores them with the full vectors,
    which is what LanceDB's `refine_factor` does by reading the vectors back from disk.
    """

    def __init__(self, owner: TableReader, pinned: lancedb.table.Table, version: int) -> None:
        self.version = version
        self.key_column = owner.key_column
        self.text_columns = owner.text_columns
        self.derived_text_fields = owner.derived_text_fields
        self.analyzer = owner.analyzer
        self._table = pinned
        #: The folder this host's processes share each version's snapshot files in; None:
        #: each process holds its own copy.
        self._snapshot_folder = owner.snapshot_folder
        self._files: SnapshotFiles | None = None
        self.metadata: dict[bytes, bytes] = pinned.schema.metadata or {}
        #: What proposes a vector search's candidates: "mapped" (`lorehouse.search.ann`),
        #: "lancedb" (LanceDB's index) or None (every row scored).
        self.ann_engine = _engine_for(owner.neighbours, pinned)
        self._neighbour_search = owner.neighbours
        #: The mapped index, built (or mapped) at the first search that needs it.
        self._neighbours: ann.NeighbourIndex | None = None
        #: Another version's mapped index whose training this one's reuses (`warm_like`).
        self._trained_like: faiss.IndexIVF | None = None
        self._lock = threading.Lock()
        #: Held while arrays derived from the rows are computed: once per version.
        self._derive_lock = threading.Lock()
        self._row_count: int | None = None
        self._rows: pa.Table | None = None
        self._batches: list[pa.RecordBatch] = []
        self._batch_starts = np.zeros(1, dtype=np.int64)
        self._derived: dict[str, dict[str, np.ndarray]] = {}
        self._unit_vectors: np.ndarray | None = None
        self._row_order = np.empty(0, dtype=np.int64)
        self._sorted_row_ids = np.empty(0, dtype=np.uint64)
        self._bm25: BM25Index | None = None
        self._masks: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._passages: dict[int, PassageRuns] = {}
        #: The rows a search may read; None: all. A snapshot served while a newer version
        #: loads withholds the rows that version deleted or changed (`withholding_changes`).
        self._served: np.ndarray | None = None
        #: Each row's recorded language as codes, and the languages, once asked for.
        self._languages: tuple[np.ndarray, list[str]] | None = None
        #: scope -> each language's share of the scope's rows (None: none recorded).
        self._language_shares: dict[str, dict[str, float] | None] = {}

    @property
    def vector_indexed(self) -> bool:
        """Whether vector search goes through an ANN index (else it scores every row)."""
        return self.ann_engine is not None

    # -- what is held in memory ------------------------------------------------------------------

    def _load(self) -> None:
        """Reads (or maps) the rows and their vectors once. What only some searches need
        (BM25 postings, key lookups) is built on first use: a search of sentence windows
        never ranks them by BM25 nor reads them by key."""
        with self._lock:
            if self._row_count is not None:
                return
            arrow, self._unit_vectors = self._read_rows_and_vectors(
                max(1, self._table.count_rows())
            )
            self._rows = arrow
            self._batches = arrow.to_batches()
            lengths = [batch.num_rows for batch in self._batches]
            self._batch_starts = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])
            self._row_count = arrow.num_rows
        # Row ids -> positions, for what LanceDB answers by row id (masks, ANN results).
        order = self._arrays("rowids", self._row_id_order)
        self._row_order, self._sorted_row_ids = order["order"], order["sorted"]

    def _row_id_order(self) -> dict[str, np.ndarray]:
        assert self._rows is not None
        row_ids = self._rows["_rowid"].to_numpy()
        order = np.argsort(row_ids, kind="stable")
        return {"order": order, "sorted": row_ids[order]}

    def _arrays(
        self, name: str, compute: Callable[[], Mapping[str, np.ndarray]]
    ) -> dict[str, np.ndarray]:
        """The arrays `name` derived from this version's rows: from the host's snapshot
        folder where there is one (computed by the first process to ask), else computed
        here; kept for the version either way. `compute` must not derive others: the
        host's lock is held while it runs."""
        found = self._derived.get(name)
        if found is not None:
            return found
        with self._derive_lock:
            found = self._derived.get(name)
            if found is None:
                files = self._files
                found = dict(compute()) if files is None else files.arrays(name, compute)
                self._derived[name] = found
        return found

    def _bm25_index(self, like: TableSnapshot | None = None) -> BM25Index:
        """The BM25 postings of the text columns, built (or mapped) on first use; carried
        over from `like`'s (a loaded older version, `warm_like`) where it can be."""
        self._load()
        if self._bm25 is None:
            assert self.text_columns, "no text columns"
            name = self._bm25_name()
            arrays = self._arrays(name, lambda: self._bm25_arrays(like))
            fields = {
                field: FieldPostings.from_arrays(
                    {part: arrays[f"{field}.{part}"] for part in POSTINGS_PARTS}
                )
                for field in self._bm25_fields()
            }
            index = BM25Index(_KeyColumn(self), fields, self.analyzer)
            with self._lock:
                self._bm25 = self._bm25 or index
        return self._bm25

    def _bm25_name(self) -> str:
        # Postings of another analyzer (other languages) are other arrays.
        return "bm25" if self.analyzer.name == "en" else f"bm25.{self.analyzer.name}"

    def _bm25_fields(self) -> list[str]:
        return [*self.text_columns, *(name for name, _, _ in self.derived_text_fields)]

    def _bm25_arrays(self, previous: TableSnapshot | None) -> dict[str, np.ndarray]:
        """Every field's postings as arrays named `field.part`: carried over from
        `previous`'s where it can be, else built from every row's texts."""
        assert self._rows is not None
        if previous is not None:
            started = time.perf_counter()
            carried = self._carried_bm25_arrays(previous)
            if carried is not None:
                arrays, added = carried
                logger.info(
                    "%s version %d: BM25 postings carried over from version %d, %d of %d "
                    "rows analysed (%.1f s)",
                    self._table.name,
                    self.version,
                    previous.version,
                    added,
                    self._rows.num_rows,
                    time.perf_counter() - started,
                )
                return arrays
        arrays: dict[str, np.ndarray] = {}
        texts, languages = self._bm25_texts(self._rows)
        for field, values in texts.items():
            postings = FieldPostings.build(values, self.analyzer, languages)
            arrays.update({f"{field}.{part}": a for part, a in postings.arrays().items()})
        return arrays

    def _bm25_texts(
        self, rows: pa.Table
    ) -> tuple[dict[str, list[str | None]], list[str | None] | None]:
        """(field -> each of `rows`' texts for it, each row's recorded language or None)."""
        texts = {name: rows[name].to_pylist() for name in self.text_columns}
        for name, column, derive in self.derived_text_fields:
            texts[name] = [derive(value) for value in rows[column].to_pylist()]
        # Each row read in the language its chunk recorded: told once, when it was cut.
        languages = rows["language"].to_pylist() if "language" in rows.column_names else None
        return texts, languages

    def _carried_bm25_arrays(
        self, previous: TableSnapshot
    ) -> tuple[dict[str, np.ndarray], int] | None:
        """(the postings arrays, the rows analysed) of this version, carried over from
        `previous`'s postings (`FieldPostings.carried`); None where they cannot be: it has
        none, its rows lack the columns that say a row is unchanged, a row is held twice, or
        most rows are new (analysing them all is then the cheaper way).

        A row is unchanged when its key, row hash and embed key are (`_SAME_ROW_COLUMNS`):
        the row hash covers every stored column, so its texts, path and language too.
        """
        assert self._rows is not None
        old_arrays = previous._derived.get(self._bm25_name())
        old_rows = previous._rows
        columns = [self.key_column, *_SAME_ROW_COLUMNS]
        if (
            old_arrays is None
            or old_rows is None
            or any(c not in t.column_names for t in (old_rows, self._rows) for c in columns)
        ):
            return None
        found = pc.index_in(
            _same_row_keys(self._rows, columns), value_set=_same_row_keys(old_rows, columns)
        )
        matched = found.is_valid().to_numpy(zero_copy_only=False)
        olds = found.drop_null().to_numpy().astype(np.int64)
        added = np.flatnonzero(~matched)
        if len(np.unique(olds)) != len(olds) or 2 * len(added) > len(matched):
            return None
        new_of_old = np.full(old_rows.num_rows, -1, dtype=np.int64)
        new_of_old[olds] = np.flatnonzero(matched)
        del olds, matched, found
        texts, languages = self._bm25_texts(self._rows.take(pa.array(added, pa.int64())))
        arrays: dict[str, np.ndarray] = {}
        for field, values in texts.items():
            older = FieldPostings.from_arrays(
                {part: old_arrays[f"{field}.{part}"] for part in POSTINGS_PARTS}
            )
            postings = FieldPostings.carried(
                older,
                new_of_old,
                FieldPostings.build(values, self.analyzer, languages),
                added,
                self._rows.num_rows,
            )
            arrays.update({f"{field}.{part}": a for part, a in postings.arrays().items()})
        return arrays, len(added)

    def _read_rows_and_vectors(self, limit: int) -> tuple[pa.Table, np.ndarray]:
        """Every row with its row id, without the vector, and the unit vectors in row order,
        the rows in groups of `regrouped`'s size either way.

        With a snapshot folder, both are files every process of the host maps
        (`SnapshotFiles`): the first process to load a version writes them, the others map
        them, so `--workers N` share one copy through the page cache instead of holding N,
        and pages no search touches are never read in.
        """
        width = self._table.schema.field("vector").type.list_size
        schema = self._held_schema()
        if self._snapshot_folder is not None:
            files = SnapshotFiles.of(self._snapshot_folder, self._table)
            shared = files.load(
                limit, schema, width, lambda out: self._held_batches(limit, out, schema)
            )
            if shared is not None:
                self._files = files
                return shared
        unit_vectors = np.zeros((limit, width), dtype=np.float32)
        batches = regrouped(self._held_batches(limit, unit_vectors, schema), schema)
        kept = pa.Table.from_batches(list(batches), schema)
        return kept, unit_vectors[: kept.num_rows]

    def _held_schema(self) -> pa.Schema:
        """The schema of the rows a snapshot holds: the table's columns but the vector,
        then the row id."""
        schema = self._table.schema
        fields = [schema.field(n) for n in schema.names if n not in _NOT_HELD]
        return pa.schema([*fields, pa.field("_rowid", pa.uint64())])

    def _held_batches(
        self, limit: int, out: np.ndarray, schema: pa.Schema
    ) -> Iterator[pa.RecordBatch]:
        """The rows, read from the table batch by batch, each batch's unit vectors copied
        into `out` (a preallocated matrix, or a file's mapping) and the rest of the batch
        yielded, as `schema` (`_held_schema`) orders the columns.

        Nothing is kept here: reading the whole table first held more than twice what is
        kept, at its peak, and the caller writes each batch to a file or keeps it.
        """
        width = out.shape[1]
        filled = 0
        columns = schema.names
        reader = self._table.search().with_row_id(True).limit(limit).to_batches()
        for batch in reader:
            if filled + batch.num_rows > len(out):
                return  # more rows than counted: the caller sees the count differ
            vectors = batch.column("vector").flatten().to_numpy(zero_copy_only=False)
            block = out[filled : filled + batch.num_rows]
            block[:] = vectors.reshape(-1, width)
            # Normalised a batch at a time: the norms of the whole matrix at once would take
            # a temporary as large as the matrix.
            norms = np.linalg.norm(block, axis=1, keepdims=True)
            np.divide(block, norms, out=block, where=norms > 0)
            filled += batch.num_rows
            yield batch.select(columns)

    def mask(self, where: str | None) -> np.ndarray:
        """The rows matching `where` as a boolean mask over this version's rows."""
        return self._predicate(where)[0]

    def _predicate(self, where: str | None) -> tuple[np.ndarray, np.ndarray]:
        """(mask, positions of the rows it excludes) of `where`, asked of LanceDB once."""
        self._load()
        assert self._row_count is not None
        with self._lock:
            cached = self._masks.get(where or "")
        if cached is not None:
            return cached
        mask = np.ones(self._row_count, dtype=bool)
        if where:
            # Row ids alone, through Lance's scanner: LanceDB's query API reads at least one
            # column (with none selected, all of them), and reading a million keys to drop
            # them took ten times as long and left the process holding what they took.
            dataset = self._table.to_lance()
            found = dataset.to_table(columns=[], filter=where, with_row_id=True)
            matching = found["_rowid"].to_numpy()
            mask[:] = False
            mask[self._positions_of(matching)] = True
        if self._served is not None:
            mask &= self._served
        found = (mask, np.flatnonzero(~mask))
        with self._lock:
            if len(self._masks) >= _CACHED_MASKS:
                self._masks.pop(next(iter(self._masks)))
            self._masks[where or ""] = found
        return found

    # -- a newer version --------------------------------------------------------------------

    @property
    def row_count(self) -> int | None:
        """Rows of this version; None until a search loaded them."""
        return self._row_count

    def withholding_changes(
        self, newer: lancedb.table.Table, max_withheld_share: float = _MAX_WITHHELD_SHARE
    ) -> TableSnapshot | None:
        """This loaded snapshot less every row `newer` (a later version) does not hold as it
        is here: what searches read while `newer`'s own snapshot loads (`TableReader.snapshot`).

        A row is kept when `newer` holds a row with the same key, row hash and embed key: the
        same row, wherever compaction moved it. A row deleted, edited, moved to another
        group or narrowed in access is withheld from every query at once (masks, BM25
        statistics, lookups); a row `newer` adds appears with its snapshot. Reads three
        short columns of `newer`, not its rows and vectors.

        None when it would not serve: never loaded, another model or layout, or more than
        `max_withheld_share` of the rows withheld.
        """
        rows = self._rows
        if rows is None or (newer.schema.metadata or {}) != self.metadata:
            return None
        columns = [self.key_column, *_SAME_ROW_COLUMNS]
        if any(name not in rows.column_names for name in columns):
            return None
        if _ACCESS_COLUMN in rows.column_names:
            columns.append(_ACCESS_COLUMN)
        held = newer.to_lance().to_table(columns=columns)
        kept = pc.is_in(_same_row_keys(rows, columns), value_set=_same_row_keys(held, columns))
        served = kept.to_numpy(zero_copy_only=False).astype(bool)
        withheld = len(served) - int(served.sum())
        if withheld > max_withheld_share * max(1, len(served)):
            return None
        view = copy.copy(self)  # the loaded rows and what was derived of them, shared
        view._masks = {}
        view._language_shares = {}
        view._served = served
        return view

    def warm_like(self, *replaced: TableSnapshot) -> dict[str, float]:
        """Loads this version and builds what the snapshots it replaces had built (postings,
        lookups, passage divisions, the masks of the callers searching): the first search
        after the swap finds them ready instead of building them itself.

        Returns the seconds each step took, for the load's log line: what a new version
        costs before it is searched is the freshness of every publish."""
        steps: dict[str, float] = {}
        clock = time.perf_counter()

        def lap(step: str) -> None:
            nonlocal clock
            now = time.perf_counter()
            steps[step] = round(now - clock, 2)
            clock = now

        self._load()
        lap("rows and vectors")
        if any(old._bm25 is not None for old in replaced) and self.text_columns:
            self._bm25_index(
                like=next(
                    (old for old in replaced if old._bm25 is not None and old._rows is not None),
                    None,
                )
            )
            lap("postings")
        derived = {name for old in replaced for name in list(old._derived)}
        for name in sorted(derived):
            if name.startswith("find."):
                column = name.removeprefix("find.")
                self._arrays(name, lambda column=column: self._digest_order(column))
        lap("lookups")
        for budget in {budget for old in replaced for budget in list(old._passages)}:
            self.passages(budget)
        lap("passages")
        wheres: dict[str, None] = {}
        for old in replaced:
            with old._lock:
                wheres.update(dict.fromkeys(old._masks))
        for where in list(wheres)[-_CACHED_MASKS:]:
            self._predicate(where or None)
        lap("masks")
        built = next((old._neighbours for old in replaced if old._neighbours is not None), None)
        if built is not None and self.ann_engine == "mapped":
            self._trained_like = built.index
            self._neighbour_index()
            lap("vector index")
        return steps

    def _positions_of(self, row_ids: np.ndarray) -> np.ndarray:
        """Positions in this snapshot's rows of LanceDB row ids of the same version."""
        return self._row_order[np.searchsorted(self._sorted_row_ids, row_ids)]

    # -- queries ---------------------------------------------------------------------------------

    def embedding_model(self) -> tuple[str, int]:
        """(model name, dimension) the stored vectors were made with."""
        return self.metadata[MODEL_KEY].decode(), int(self.metadata[DIMENSION_KEY])

    def vector_search(
        self, vector: np.ndarray, where: str | None, limit: int, columns: Sequence[str]
    ) -> list[dict]:
        """Nearest rows by cosine distance (as `_distance`, 1 - cosine), filtered first."""
        positions, cosines = self._nearest(vector, where, limit)
        found = self._take(positions.tolist(), columns)
        for row, cosine in zip(found, cosines.tolist(), strict=True):
            row["_distance"] = 1.0 - cosine
        return found

    def vector_ranking(
        self, vector: np.ndarray, where: str | None, limit: int, column: str | None = None
    ) -> list[tuple[str, float]]:
        """(value of `column`, default the key; cosine) of the nearest rows, best first:
        `vector_search` without a dict per row, for a leg that ranks ids: a question's chunk
        and sentence-window searches would build hundreds of dicts to read two values of
        each."""
        positions, cosines = self._nearest(vector, where, limit)
        keys = self._values(column or self.key_column, positions)
        return list(zip(keys, cosines.tolist(), strict=True))

    def _nearest(
        self, vector: np.ndarray, where: str | None, limit: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """(positions, cosines) of the `limit` nearest rows matching `where`, best first and
        ties in row order."""
        nothing = (np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32))
        norm = float(np.linalg.norm(vector))
        if norm == 0.0 or limit <= 0:
            return nothing
        allowed, hidden = self._predicate(where)
        assert self._unit_vectors is not None
        unit_query = np.asarray(vector, dtype=np.float32) / norm
        rows = None
        if self.ann_engine == "mapped":
            rows = self._mapped_candidates(unit_query, allowed, limit)
        elif self.ann_engine == "lancedb":
            rows = self._ann_candidates(vector, where, allowed, limit)
        if rows is not None:
            # Candidates proposed by the ANN index (or every allowed row of a narrow
            # predicate), rescored exactly.
            scores = self._unit_vectors[rows] @ unit_query
            count = min(limit, len(rows))
        else:
            rows = None
            scores = self._unit_vectors @ unit_query
            scores[hidden] = -np.inf
            count = min(limit, len(scores) - len(hidden))
        if count <= 0:
            return nothing
        if count >= len(scores):
            best = np.arange(len(scores))
        else:
            best = best_by_position(scores, np.arange(len(scores)) if rows is None else rows, count)
        positions = best if rows is None else rows[best]
        order = np.lexsort((positions, -scores[best]))
        return positions[order], scores[best[order]]

    def _mapped_candidates(
        self, unit_query: np.ndarray, allowed: np.ndarray, limit: int
    ) -> np.ndarray:
        """Positions of the candidates for the `limit` nearest allowed rows: the mapped
        index's, searched with the caller's mask as a prefilter, so no row outside it is
        proposed; or every allowed row where few are (a filter on a document), which is
        exact and cheaper than probing lists that hold few of them."""
        wanted = max(_ANN_CANDIDATES_PER_RESULT * limit, _ANN_MIN_CANDIDATES)
        permitted = int(np.count_nonzero(allowed))
        index = self._neighbour_index()
        # A full vector costs about four codes to score.
        if permitted <= min(_EXACT_MAX_ALLOWED, index.rows_probed(len(allowed)) / 4):
            return np.flatnonzero(allowed)
        rows = index.search(unit_query, allowed, wanted)
        if len(rows) < min(limit, permitted):
            # The probed lists held too few of the caller's rows: all of them are scored.
            return np.flatnonzero(allowed)
        return rows

    def _neighbour_index(self) -> ann.NeighbourIndex:
        """This version's mapped index: from the host's snapshot folder where there is one
        (built by the first process to ask, mapped by the others), else built here."""
        found = self._neighbours
        if found is not None:
            return found
        self._load()
        with self._derive_lock:
            if self._neighbours is None:
                assert self._unit_vectors is not None
                assert self._neighbour_search is not None
                vectors, trained = self._unit_vectors, self._trained_like
                files = self._files
                path = None
                if files is not None:
                    path = files.index_file(
                        ann.INDEX_FILE, lambda out: ann.write(ann.build(vectors, trained), out)
                    )
                index = None if path is None else ann.open_mapped(path)
                if index is None:
                    index = ann.build(vectors, trained)
                self._neighbours = ann.NeighbourIndex(index, self._neighbour_search.probes)
                self._trained_like = None
        return self._neighbours

    def _ann_candidates(
        self, vector: np.ndarray, where: str | None, allowed: np.ndarray, limit: int
    ) -> np.ndarray:
        """Positions of the rows the ANN index proposes for the `limit` nearest allowed ones.

        When most rows are allowed (an access filter, every caller), the index is searched
        unfiltered for enough extra candidates and the mask applied after, which costs less
        per query than LanceDB's prefilter. A narrow predicate (a filter on one document), or
        too few candidates left after the mask, uses the prefilter.
        """
        wanted = max(_ANN_CANDIDATES_PER_RESULT * limit, _ANN_MIN_CANDIDATES)
        share = float(allowed.mean()) if len(allowed) else 0.0
        if share >= _POSTFILTER_MIN_SHARE:
            # Restricted rows cluster (a document's chunks are alike), so a fifth more.
            rows = self._ann_search(vector, None, math.ceil(1.2 * wanted / share))
            rows = rows[allowed[rows]]
            if len(rows) >= min(limit, int(allowed.sum())):
                return rows[:wanted]
        rows = self._ann_search(vector, where, wanted)
        # The same predicate on the same version: the mask keeps every row, and it stays the
        # one word on access, whichever way the rows were found.
        return rows[allowed[rows]]

    def _ann_search(self, vector: np.ndarray, where: str | None, limit: int) -> np.ndarray:
        """Positions of the ANN index's `limit` nearest rows (matching `where` if given)."""
        query = self._table.search(vector, vector_column_name="vector").distance_type("cosine")
        if where:
            query = query.where(where, prefilter=True)
        # Row ids alone: asking for the key column too costs a read of those rows, a large
        # part of the search.
        arrow = query.select(["_distance"]).with_row_id(True).limit(limit).to_arrow()
        return self._positions_of(arrow["_rowid"].to_numpy())

    def text_ranking(
        self,
        text: str,
        where: str | None,
        limit: int,
        fields: Sequence[str] | Mapping[str, float] | None = None,
        scope: str | None = None,
        question_word_weight: float = 1.0,
    ) -> list[tuple[str, float]]:
        """(key, BM25 score) of the best rows matching `where`, without reading the rows.

        The BM25 statistics are those of the rows matching `scope` (default: `where`), so
        pass the caller's access clause as `scope` and access plus filters as `where`: a
        filter narrows the results without changing how terms are weighted, and rows outside
        the caller's access change neither. Each field weighs 1 unless a mapping says; the
        query's question words ("how", "do", "I") weigh `question_word_weight`.
        """
        allowed = self.mask(where)
        visible = allowed if scope is None or scope == where else self.mask(scope)
        weights = (
            fields
            if isinstance(fields, Mapping)
            else dict.fromkeys(fields or self.text_columns, 1.0)
        )
        return self._bm25_index().search(
            text, weights, visible, allowed, limit, question_word_weight
        )

    def language_share(self, language: str, scope: str | None) -> float:
        """The share of the rows matching `scope` (the caller's access clause) that their
        chunks record as in `language`; 1.0 for a table that records none or a scope that
        matches no row (a caller who may read nothing is told nothing of languages)."""
        shares = self.language_shares(scope)
        return shares.get(language, 0.0) if shares else 1.0

    def main_language(self, scope: str | None) -> str | None:
        """The language most rows matching `scope` record; None for a table that records
        none or a scope that matches no row."""
        shares = self.language_shares(scope)
        if not shares:
            return None
        return max(sorted(shares), key=lambda language: shares[language])

    def language_shares(self, scope: str | None) -> dict[str, float] | None:
        """Each recorded language's share of the rows matching `scope`; None for a table that
        records none, {} for a scope that matches no row.

        Asked by every hybrid search of a deployment of several languages, so it is kept per
        scope: the few callers' scopes a server sees cost one pass each.
        """
        key = scope or ""
        with self._lock:
            if key in self._language_shares:
                return self._language_shares[key]
        allowed = self.mask(scope)
        codes, names = self._language_codes()
        shares: dict[str, float] | None = None
        if codes is not None:
            counts = np.bincount(codes[allowed & (codes >= 0)], minlength=len(names))
            visible = int(np.count_nonzero(allowed))
            shares = {
                name: int(count) / visible
                for name, count in zip(names, counts, strict=True)
                if count
            }
        with self._lock:
            if len(self._language_shares) >= _CACHED_MASKS:
                self._language_shares.pop(next(iter(self._language_shares)))
            self._language_shares[key] = shares
        return shares

    def _language_codes(self) -> tuple[np.ndarray | None, list[str]]:
        """Each row's recorded language as a small integer, and the languages they number;
        (None, []) for a table that records none."""
        self._load()
        assert self._rows is not None
        if "language" not in self._rows.column_names:
            return None, []
        with self._lock:
            held = self._languages
        if held is None:
            encoded = pc.dictionary_encode(self._rows["language"].combine_chunks())
            codes = encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False)
            held = (codes, [str(name) for name in encoded.dictionary.to_pylist()])
            with self._lock:
                self._languages = held
        return held

    def mentions(self, phrase: str, scope: str | None) -> bool:
        """Whether a row matching `scope` (the caller's access clause) holds `phrase` in its
        text columns; see `BM25Index.mentions`."""
        return self._bm25_index().mentions(phrase, self.mask(scope))

    def text_search(
        self,
        text: str,
        where: str | None,
        limit: int,
        columns: Sequence[str],
        fields: Sequence[str] | Mapping[str, float] | None = None,
        scope: str | None = None,
        question_word_weight: float = 1.0,
    ) -> list[dict]:
        """`text_ranking` with the rows read; each row carries its score as `_score`."""
        ranked = self.text_ranking(text, where, limit, fields, scope, question_word_weight)
        found = self.rows_by_key([key for key, _ in ranked], where, columns)
        return [{**found[key], "_score": score} for key, score in ranked if key in found]

    def rows_by_key(
        self, keys: Sequence[str], where: str | None, columns: Sequence[str]
    ) -> dict[str, dict]:
        """key -> row for the `keys` whose rows match `where` (others are left out)."""
        if not keys:
            return {}
        allowed = self.mask(where)
        found = self._find(self.key_column, keys)
        rows = [row for key in dict.fromkeys(keys) for row in found.get(key, ())[:1]]
        rows = [row for row in rows if allowed[row]]
        return {row[self.key_column]: row for row in self._take(rows, columns)}

    def holders(self, column: str, values: Iterable[str], where: str) -> dict[str, bool]:
        """value -> whether a row holding it in `column` matches `where`, for those of
        `values` some row of this version holds (whole values only)."""
        wanted = sorted({value for value in values if value is not None})
        if not wanted:
            return {}
        allowed = self.mask(where)
        return {
            value: bool(allowed[rows].any()) for value, rows in self._find(column, wanted).items()
        }

    def _find(self, column: str, values: Sequence[str]) -> dict[str, list[int]]:
        """value -> positions of the rows holding it in `column`, ascending, for the values
        some row holds: a binary search of the column's sorted value digests, each hit
        checked against the row itself (so a digest shared by two values finds only the
        one asked)."""
        self._load()
        lookup = self._arrays(f"find.{column}", lambda: self._digest_order(column))
        digests, order = lookup["digests"], lookup["order"]
        asked = _digests(values)
        lefts = np.searchsorted(digests, asked, side="left")
        rights = np.searchsorted(digests, asked, side="right")
        candidates = [order[left:right] for left, right in zip(lefts, rights, strict=True)]
        held = self._values(column, np.concatenate([np.empty(0, np.int64), *candidates]))
        found: dict[str, list[int]] = {}
        at = 0
        for value, rows in zip(values, candidates, strict=True):
            for row in rows.tolist():
                if held[at] == value:
                    found.setdefault(value, []).append(row)
                at += 1
        return {value: sorted(rows) for value, rows in found.items()}

    def _digest_order(self, column: str) -> dict[str, np.ndarray]:
        assert self._rows is not None
        digests = _digests(self._rows[column].to_pylist())
        order = np.argsort(digests, kind="stable")
        return {"digests": digests[order], "order": order}

    def passages(self, max_words: int) -> PassageRuns:
        """key -> the keys of its passage, in reading order: each document's rows divided
        into runs of consecutive rows up to `max_words` (lorehouse/search/passages.py). Computed on
        first use per budget and kept with this version, which no write changes."""
        self._load()
        with self._lock:
            cached = self._passages.get(max_words)
        if cached is not None:
            return cached
        # Counted first: arrays are never derived while others are (one lock holds both).
        words = self._arrays("words", self._word_counts)["words"]
        found = PassageRuns(
            self, self._arrays(f"passages.{max_words}", lambda: self._runs(max_words, words))
        )
        with self._lock:
            if len(self._passages) >= _CACHED_PASSAGE_BUDGETS:
                self._passages.pop(next(iter(self._passages)))
            self._passages[max_words] = found
        return found

    def _runs(self, max_words: int, words: np.ndarray) -> dict[str, np.ndarray]:
        """The passage runs as arrays: `members` (positions, run after run), `starts` (where
        each run begins in it, and its end) and `run_of` (each position's run)."""
        assert self._rows is not None
        runs = passage_runs(
            self._rows["doc_id"].to_pylist(),
            self._rows["position"].to_pylist(),
            self._rows["is_table"].to_pylist(),
            words.tolist(),
            max_words,
        )
        members = np.fromiter((row for run in runs for row in run), np.int64, len(words))
        starts = np.zeros(len(runs) + 1, dtype=np.int64)
        np.cumsum([len(run) for run in runs], out=starts[1:])
        run_of = np.empty(len(words), dtype=np.int32)
        run_of[members] = np.repeat(np.arange(len(runs), dtype=np.int32), np.diff(starts))
        return {"members": members, "starts": starts, "run_of": run_of}

    def _word_counts(self) -> dict[str, np.ndarray]:
        """Each row's words of embedded text, counted once per version for every budget."""
        assert self._rows is not None
        texts = self._rows["text_embed"].to_pylist()
        return {"words": np.fromiter((len(t.split()) for t in texts), np.int32, len(texts))}

    def _take(self, rows: Sequence[int] | np.ndarray, columns: Sequence[str]) -> list[dict]:
        """Rows by position, as dicts of `columns`, in the order asked."""
        names = list(dict.fromkeys([self.key_column, *columns]))
        found: list[dict] = [{}] * len(rows)
        for batch, places, local in self._by_batch(rows):
            for place, row in zip(places, batch.select(names).take(local).to_pylist(), strict=True):
                found[place] = row
        return found

    def _values(self, name: str, rows: Sequence[int] | np.ndarray) -> list:
        """One column's values at positions `rows`, in the order asked: a search reads its
        hits' values alone, whichever rows the snapshot holds."""
        found: list = [None] * len(rows)
        for batch, places, local in self._by_batch(rows):
            for place, value in zip(
                places, batch.column(name).take(local).to_pylist(), strict=True
            ):
                found[place] = value
        return found

    def _by_batch(
        self, rows: Sequence[int] | np.ndarray
    ) -> Iterator[tuple[pa.RecordBatch, list[int], pa.Array]]:
        """(batch, places in `rows`, positions within the batch) for each batch `rows` fall
        in: a take from one batch reads that batch alone, where a take from the whole table
        would first join its batches into one copy."""
        self._load()
        positions = np.asarray(rows, dtype=np.int64)
        if not len(positions):
            return
        batch_of = np.searchsorted(self._batch_starts, positions, side="right") - 1
        for index in np.unique(batch_of).tolist():
            places = np.flatnonzero(batch_of == index)
            local = positions[places] - self._batch_starts[index]
            yield self._batches[index], places.tolist(), pa.array(local, pa.int64())


class _KeyColumn(Sequence[str]):
    """A snapshot's key column as a sequence, read a value at a time: BM25 reads the keys of
    the rows it returns, never the column."""

    def __init__(self, snapshot: TableSnapshot) -> None:
        self._snapshot = snapshot

    def __len__(self) -> int:
        return self._snapshot._row_count or 0

    def take(self, rows: Sequence[int]) -> list[str]:
        """The keys of `rows`, in the order asked."""
        return self._snapshot._values(self._snapshot.key_column, rows)

    @overload
    def __getitem__(self, row: int) -> str: ...

    @overload
    def __getitem__(self, row: slice) -> list[str]: ...

    def __getitem__(self, row: int | slice) -> str | list[str]:
        if isinstance(row, slice):
            return self._snapshot._values(self._snapshot.key_column, range(len(self))[row])
        return self._snapshot._values(self._snapshot.key_column, [row])[0]


class PassageRuns:
    """One word budget's passage of each row of a snapshot, looked up by key."""

    def __init__(self, snapshot: TableSnapshot, arrays: Mapping[str, np.ndarray]) -> None:
        self._snapshot = snapshot
        self._members = arrays["members"]
        self._starts = arrays["starts"]
        self._run_of = arrays["run_of"]

    def get(self, key: str, default: tuple[str, ...] | None = None) -> tuple[str, ...] | None:
        """The keys of the passage holding the row `key`, in reading order."""
        rows = self._snapshot._find(self._snapshot.key_column, [key]).get(key)
        if not rows:
            return default
        run = int(self._run_of[rows[0]])
        members = self._members[self._starts[run] : self._starts[run + 1]]
        return tuple(self._snapshot._values(self._snapshot.key_column, members))

    def __getitem__(self, key: str) -> tuple[str, ...]:
        found = self.get(key)
        if found is None:
            raise KeyError(key)
        return found


def _same_row_keys(rows: pa.Table, columns: Sequence[str]) -> pa.Array:
    """Each row's `columns` joined into one string, for matching rows across versions (a
    list column's values joined first, in their order)."""
    values = [
        pc.binary_join(rows[name], "\x1e")
        if pa.types.is_list(rows.schema.field(name).type)
        else rows[name]
        for name in columns
    ]
    joined = pc.binary_join_element_wise(
        *values, "\x1f", null_handling="replace", null_replacement=""
    )
    return joined.combine_chunks() if isinstance(joined, pa.ChunkedArray) else joined


def _digests(values: Iterable[str | None]) -> np.ndarray:
    """An 8-byte BLAKE2b digest of each value (0 for None), the same in every process."""
    return np.fromiter(
        (
            0
            if value is None
            else int.from_bytes(hashlib.blake2b(value.encode(), digest_size=8).digest(), "little")
            for value in values
        ),
        dtype=np.uint64,
    )


def _engine_for(neighbours: ann.NeighbourSearch | None, pinned: lancedb.table.Table) -> str | None:
    """What proposes the candidates of a vector search of `pinned`: the mapped index from
    `neighbours.min_rows` rows; LanceDB's index where the engine is "lancedb" and the table
    has one; else nothing (every row scored)."""
    if neighbours is None:
        return None
    if neighbours.engine == "lancedb":
        indexed = any(list(i.columns) == ["vector"] for i in pinned.list_indices())
        return neighbours.engine_for(0, indexed)
    return neighbours.engine_for(pinned.count_rows(), False)
