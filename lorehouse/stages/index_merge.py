"""The index merge: the partitions' search rows into the shared LanceDB tables, indexed.

Vectors are computed per partition (`run_embedding` on a partition's store and its own
LanceDB folder), so the model calls, most of a build, spread over partition runs. The shared
tables search reads are then the union of the partitions' rows: this stage copies, table by
table and partition by partition, only the rows whose content differs from what the shared
table holds (the row hash covers the text, the access list and every other column), deletes
the rows of documents that left, and refreshes the search indexes once at the end. No model
is called here.

Those are many commits, so search does not read the tables' latest versions: the merge
publishes the version of every table at its end, in one commit, and searches read the
published versions (`lorehouse.search.versions.PublishedVersions`). Until then, and after a
merge stopped before its end, they read what the last finished merge published.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa

from lorehouse.models import PUBLIC_GROUP
from lorehouse.stages.progress import ProgressCallback
from lorehouse.stores.duckdb_store import DuckDBStore
from lorehouse.stores.lance_index import ChunkIndex, IndexState, LanceTable
from lorehouse.stores.partitions import (
    BUSY_PARTITION_WAIT_SECONDS,
    PartitionLayout,
    PartitionsBehind,
    bucket_of,
    bucket_of_key,
    merged_digests,
    partition_is_indexed,
)

if TYPE_CHECKING:
    import lancedb

#: The tables of an index, by name: each partition's and the shared one's.
TABLES: dict[str, Callable[[ChunkIndex], LanceTable]] = {
    "chunks": lambda index: index,
    "sentences": ChunkIndex.sentences,
    "documents": ChunkIndex.documents,
    "token_vectors": ChunkIndex.token_vectors,
}
#: The search tables that carry access lists, each with the feature-store table and key
#: column its rows' access is checked against while their partition is behind.
ACCESS_CHECKED: dict[str, tuple[str, str]] = {
    "chunks": ("chunks", "chunk_id"),
    "sentences": ("chunks", "chunk_id"),
    "documents": ("documents", "doc_id"),
}
#: Changes with what the merge compares and copies, so the asset shows as changed code.
INDEX_MERGE_VERSION = "rows-by-hash-2"
#: Rows copied per commit: a commit's memory follows this, not the partition's size.
ROWS_PER_COMMIT = 5_000


@dataclass
class IndexMergeReport:
    """What the merge copied and removed, per table, for asset metadata."""

    model: str = ""
    copied: dict[str, int] = field(default_factory=dict)
    deleted: dict[str, int] = field(default_factory=dict)
    rebuilt: list[str] = field(default_factory=list)
    rows: int = 0
    seconds: float = 0.0
    index_steps: int = 0
    indexes: list[IndexState] = field(default_factory=list)
    #: table name -> the version published for searches (None: not built).
    published: dict[str, int | None] = field(default_factory=dict)
    #: Partitions left as the last merge took them: their run is not done.
    behind: list[str] = field(default_factory=list)
    #: table -> rows of partitions behind left out of search: their access list changed.
    withheld: dict[str, int] = field(default_factory=dict)
    #: "partition/table" compared row by row: the ones that changed since the last merge.
    compared: list[str] = field(default_factory=list)


def run_index_merge(
    store: DuckDBStore,
    index: ChunkIndex,
    partitions: Mapping[str, ChunkIndex],
    layout: PartitionLayout,
    on_progress: ProgressCallback | None = None,
    whole: bool = True,
) -> IndexMergeReport:
    """Makes each shared table hold the partitions' rows for the documents the feature store
    lists, then publishes their versions to searches.

    Only partitions whose search rows are those of the stage tables the feature store took
    from them are read (`current_partitions`); the others (their run queued, running, failed
    or killed) keep the rows the last merge took, so no partition waits for another. Of those
    read, only the ones that changed since the last index merge are compared row by row, so a
    merge after one edited document reads one partition's keys. A new model or layout is
    the exception: every partition must hold it before the tables are replaced, and until
    then `PartitionsBehind` is raised, changing nothing, while searches keep the old index.

    `whole` is False when `partitions` is not every partition (one publishing its own run's
    rows): a new model or layout is then never taken, since the tables are replaced only
    with every partition's rows; `PartitionsBehind` says so before anything is written.
    """
    started = time.perf_counter()
    report = IndexMergeReport()
    merged = merged_digests(store)
    current, report.behind = current_partitions(partitions, layout, merged)
    if not whole:
        _refuse_replacement(index, current)
    taken = store.index_merges()
    shared_tables = [table_of(index) for table_of in TABLES.values()]
    if index.published_versions() is None:
        # A database built before publishing: what its searches read until now is published
        # first, so that a merge stopped from here on leaves them reading it.
        index.publish(shared_tables)
    doc_ids = store.document_ids_for_index()
    by_bucket: dict[int, set[str]] = {}
    for doc_id in doc_ids:
        by_bucket.setdefault(bucket_of(doc_id, layout.partitions), set()).add(doc_id)
    # Partitions some of whose rows leave the shared tables here (documents the feature store
    # no longer lists, rows withheld): compared whole the next time they are taken, since
    # their rows may come back without their partition changing.
    touched = set(report.behind) | {
        layout.keys[bucket_of(doc_id, layout.partitions)]
        for doc_id in _documents_leaving(index, doc_ids)
    }
    steps = len(TABLES) * max(1, len(current))
    done = 0
    withheld_chunks: list[str] = []
    for name, table_of in TABLES.items():
        shared = table_of(index)
        sources = {key: table_of(p) for key, p in current.items() if table_of(p).exists()}
        if not sources:
            done += max(1, len(current))
            report.deleted[name] = shared.delete_documents_except(doc_ids)
            continue
        model_of = {key: source.embedding_model()[0] for key, source in sources.items()}
        models = set(model_of.values())
        if len(models) > 1:
            # A model change under way, partition by partition: nothing is replaced until
            # the last partition holds the new vectors.
            held = shared.embedding_model()[0] if shared.exists() else None
            old = sorted(key for key, m in model_of.items() if m == held) or sorted(model_of)
            raise PartitionsBehind(
                f"partitions {', '.join(old)} still hold {name} vectors of {held}, the others "
                f"of {', '.join(sorted(models - {held}))}: searches keep the current index "
                "until every partition's vectors are of one model; materialize the rest"
            )
        (model,) = models
        if name == "chunks":
            report.model = model
        if shared.exists() and not shared.is_current(model):
            if report.behind:
                raise PartitionsBehind(
                    f"partitions {', '.join(report.behind)} do not hold {model}'s vectors "
                    "yet; searches keep the current index until every partition does"
                )
            # A new model or layout: replaced in one commit, so search never mixes two.
            shared.replace_all(_streamed([source.table() for source in sources.values()]))
            report.rebuilt.append(name)
            taken = {}
        else:
            for key, source in sources.items():
                done += 1
                if taken.get((key, name)) == merged[key]:
                    continue  # unchanged since the last index merge took it
                wanted = by_bucket.get(bucket_of_key(key), set())
                copied, deleted = _merge_table(shared, source, wanted)
                report.copied[name] = report.copied.get(name, 0) + copied
                report.deleted[name] = report.deleted.get(name, 0) + deleted
                report.index_steps += shared.index_new_vectors()
                report.compared.append(f"{key}/{name}")
                if on_progress is not None:
                    on_progress(done, steps)
        report.deleted[name] = report.deleted.get(name, 0) + shared.delete_documents_except(doc_ids)
        if name in ACCESS_CHECKED and report.behind:
            behind_docs = sorted(
                doc for key in report.behind for doc in by_bucket.get(bucket_of_key(key), ())
            )
            stale = _stale_access(shared, store, name, behind_docs)
            if name == "chunks":
                withheld_chunks = stale
            shared.delete_keys(stale)
            report.withheld[name] = len(stale)
        elif name == "token_vectors":
            # Read by chunk id only for chunks a search returned, but gone with their chunk.
            shared.delete_keys(withheld_chunks)
        if shared.exists():
            shared.refresh_indexes()
    report.published = index.publish(shared_tables)
    # Recorded once published: a merge stopped before its end compares them all again.
    store.record_index_merges(
        {(key, name): merged[key] for key in current if key not in touched for name in TABLES},
        replace=bool(report.rebuilt),
        forget=sorted(touched),
    )
    report.rows = index.count()
    if index.exists():
        report.indexes = index.index_state()
    report.seconds = time.perf_counter() - started
    return report


#: Rows a batch of a table replaced with every partition's rows carries.
_REPLACE_BATCH_ROWS = 8192


def _streamed(tables: Sequence[lancedb.table.Table]) -> pa.RecordBatchReader:
    """Every table's rows, one batch at a time, under the first table's schema: a new model
    or layout replaces a shared table in bounded memory, whatever the corpus size."""
    schema = tables[0].schema

    def batches() -> Iterator[pa.RecordBatch]:
        for table in tables:
            for batch in table.to_lance().to_batches(batch_size=_REPLACE_BATCH_ROWS):
                yield batch.select(schema.names).cast(schema)

    return pa.RecordBatchReader.from_batches(schema, batches())


def _refuse_replacement(index: ChunkIndex, partitions: Mapping[str, ChunkIndex]) -> None:
    """Raises `PartitionsBehind` if a table of `partitions` holds another model or layout
    than the shared one: only a merge of every partition replaces a shared table."""
    for table_of in TABLES.values():
        shared = table_of(index)
        if not shared.exists():
            continue
        for key, partition in partitions.items():
            source = table_of(partition)
            if source.exists() and not shared.is_current(source.embedding_model()[0]):
                raise PartitionsBehind(
                    f"partition {key} holds {shared.name} of another model or layout than "
                    "the shared index: search_index replaces the shared tables once every "
                    "partition holds it, and searches keep the current index until then"
                )


def current_partitions(
    partitions: Mapping[str, ChunkIndex], layout: PartitionLayout, merged: Mapping[str, str]
) -> tuple[dict[str, ChunkIndex], list[str]]:
    """(the partitions whose rows may be read, pinned at their current versions; the keys of
    the others).

    A partition is current while its embedding run's record matches what the feature store
    merged from it. Checked, then its tables pinned, then checked again: an embedding run
    clears its record before it writes a row (`forget_indexed`), so a record still there
    after the pin means the pinned versions hold no row of a run that started since.
    """
    current: dict[str, ChunkIndex] = {}
    behind: list[str] = []
    for key, partition in sorted(partitions.items()):
        wait = BUSY_PARTITION_WAIT_SECONDS
        if not partition_is_indexed(layout, key, merged.get(key), wait):
            behind.append(key)
            continue
        for table_of in TABLES.values():
            table = table_of(partition)
            if table.exists():
                table.table().checkout(table.table().version)
        if not partition_is_indexed(layout, key, merged.get(key), wait):
            behind.append(key)
            continue
        current[key] = partition
    return current, behind


def _documents_leaving(index: ChunkIndex, doc_ids: Sequence[str]) -> list[str]:
    """The documents the shared chunks table holds that the feature store does not list."""
    if not index.exists():
        return []
    import pyarrow.compute as pc

    held = pc.unique(index.column_values("doc_id"))
    listed = pa.array(list(doc_ids), pa.string())
    return pc.filter(held, pc.invert(pc.is_in(held, value_set=listed))).to_pylist()


def _stale_access(
    shared: LanceTable, store: DuckDBStore, name: str, doc_ids: Sequence[str]
) -> list[str]:
    """The keys of the shared rows of `doc_ids` (documents of partitions behind) whose
    access list is not the one the feature store now holds for their chunk or document, or
    whose chunk it no longer holds: they are deleted. The feature store takes a partition's
    stage tables before its vectors are done, so a narrowed access list is in it while the
    search rows still carry the old one: those rows leave search until the partition's run
    is done, rather than show the passage to people its owners took it from."""
    duckdb_table, by = ACCESS_CHECKED[name]
    expected = store.access_lists(duckdb_table, by, doc_ids)
    held = shared.access_of(doc_ids, by)
    return sorted(
        key
        for key, (value, acl) in held.items()
        if value not in expected or _groups(acl) != _groups(expected[value])
    )


def _groups(acl: Sequence[str]) -> list[str]:
    """An access list as the groups it names: public rows carry PUBLIC_GROUP in LanceDB and
    nothing in DuckDB."""
    return sorted(group for group in acl if group != PUBLIC_GROUP)


def _merge_table(shared: LanceTable, source: LanceTable, wanted: set[str]) -> tuple[int, int]:
    """Copies the rows of `source` (one partition's table) for the documents in `wanted`
    whose content the shared table does not hold, and deletes shared rows of those documents
    that the partition no longer has. Returns (copied, deleted)."""
    offered = {k: row for k, row in source.stored_keys().items() if row.doc_id in wanted}
    held = shared.stored_keys(sorted(wanted)) if wanted else {}
    changed = [
        key
        for key, row in offered.items()
        if key not in held
        or held[key].row_hash != row.row_hash
        or held[key].embed_key != row.embed_key
    ]
    stale = [key for key in held if key not in offered]
    if not changed:
        shared.delete_keys(stale)
        return 0, len(stale)
    for start in range(0, len(changed), ROWS_PER_COMMIT):
        rows = source.rows_with_keys(changed[start : start + ROWS_PER_COMMIT])
        last = start + ROWS_PER_COMMIT >= len(changed)
        shared.upsert(rows, stale if last else [])
    return len(changed), len(stale)
