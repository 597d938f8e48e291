"""Several processes upsert overlapping keys into one LanceDB table at once: are rows kept
once per key?

Partition runs that wrote straight into the shared tables, instead of one merge after them,
would each `merge_insert` their rows on the row key at the same time. Without a declared key,
Lance commits concurrent inserts of the same new key side by side (lance #4585): every key
two writers insert is stored twice. With the key column declared an unenforced primary key
(`lance-schema:unenforced-primary-key` field metadata), a commit that inserts a key another
one inserted since its read is a conflict, and the upsert is retried against the newer
version. This script measures both, at the installed lance and lancedb.

    .venv/bin/python bench/concurrent_merge_insert.py [--writers 4] [--keys 200] [--runs 3]

With `--replace`, each writer instead replaces one document's rows in one commit, as a
partition publishing its documents would: half its keys kept, half new, and the rows of its
document it no longer has deleted (`when_not_matched_by_source_delete`), all writers at once
on rows of the same fragments. Every document must end with exactly its writer's rows.

Exits 1 when the declared key still lets a key be stored twice, or a replacement loses or
keeps a row it should not.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import tempfile
import time
from importlib.metadata import version

import pyarrow as pa

#: The field metadata that declares a column the table's (unenforced) primary key.
PRIMARY_KEY = {b"lance-schema:unenforced-primary-key": b"true"}
#: Seconds the writers wait after they are started, so that all have imported lancedb and
#: upsert at the same moment.
START_DELAY = 10.0


def schema(declared: bool) -> pa.Schema:
    key = pa.field(
        "chunk_id", pa.string(), nullable=False, metadata=PRIMARY_KEY if declared else None
    )
    return pa.schema(
        [key, pa.field("writer", pa.string()), pa.field("vector", pa.list_(pa.float32(), 8))]
    )


def upsert(root: str, declared: bool, writer: int, keys: int, start: float) -> None:
    """One partition's upsert: `keys` keys, half of them also the next writer's."""
    import lancedb

    table = lancedb.connect(root).open_table("chunks")
    first = writer * keys // 2
    ids = [f"chunk-{n}" for n in range(first, first + keys)]
    rows = pa.table(
        {"chunk_id": ids, "writer": [f"w{writer}"] * keys, "vector": [[float(writer)] * 8] * keys},
        schema=schema(declared),
    )
    while time.time() < start:
        time.sleep(0.001)
    table.merge_insert("chunk_id").when_matched_update_all().when_not_matched_insert_all().execute(
        rows
    )


def replace_document(root: str, writer: int, keys: int, start: float) -> None:
    """One partition's publish of document `d{writer}`: keys keys/2.. 3*keys/2 of it, in one
    commit that also deletes its keys under keys/2."""
    import lancedb

    table = lancedb.connect(root).open_table("chunks")
    ids = [f"d{writer}-{n}" for n in range(keys // 2, keys + keys // 2)]
    rows = pa.table(
        {
            "chunk_id": ids,
            "doc": [f"d{writer}"] * keys,
            "writer": [f"w{writer}"] * keys,
            "vector": [[float(writer)] * 8] * keys,
        },
        schema=document_schema(),
    )
    while time.time() < start:
        time.sleep(0.001)
    (
        table.merge_insert("chunk_id")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .when_not_matched_by_source_delete(f"doc = 'd{writer}'")
        .execute(rows)
    )


def document_schema() -> pa.Schema:
    key = pa.field("chunk_id", pa.string(), nullable=False, metadata=PRIMARY_KEY)
    return pa.schema(
        [
            key,
            pa.field("doc", pa.string()),
            pa.field("writer", pa.string()),
            pa.field("vector", pa.list_(pa.float32(), 8)),
        ]
    )


def run_replace(writers: int, keys: int) -> tuple[int, int, list[int | None]]:
    """(rows wrong, rows stored, exit codes) of `writers` documents replaced at once, each
    seeded with `keys` rows in one shared table."""
    import lancedb

    root = tempfile.mkdtemp(prefix="lorehouse-replace-")
    seed = pa.table(
        {
            "chunk_id": [f"d{w}-{n}" for w in range(writers) for n in range(keys)],
            "doc": [f"d{w}" for w in range(writers) for _ in range(keys)],
            "writer": ["seed"] * (writers * keys),
            "vector": [[0.0] * 8] * (writers * keys),
        }
    )
    lancedb.connect(root).create_table("chunks", seed.cast(document_schema()))
    start = time.time() + START_DELAY
    processes = [
        multiprocessing.Process(target=replace_document, args=(root, n, keys, start))
        for n in range(writers)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join()
    stored = lancedb.connect(root).open_table("chunks").to_arrow().to_pylist()
    expected = {
        f"d{w}-{n}": f"w{w}" for w in range(writers) for n in range(keys // 2, keys + keys // 2)
    }
    keys_found = [row["chunk_id"] for row in stored]
    doubled = len(keys_found) - len(set(keys_found))
    kept = len(set(keys_found) - set(expected))
    lost = len(set(expected) - set(keys_found))
    stale = sum(
        1
        for row in stored
        if row["chunk_id"] in expected and row["writer"] != expected[row["chunk_id"]]
    )
    wrong = doubled + kept + lost + stale
    return wrong, len(stored), [process.exitcode for process in processes]


def run(declared: bool, writers: int, keys: int) -> tuple[int, int, list[int | None]]:
    """(rows stored, distinct keys, the writers' exit codes) of one concurrent upsert."""
    import lancedb

    root = tempfile.mkdtemp(prefix="lorehouse-upserts-")
    seed = pa.table({"chunk_id": ["seed"], "writer": ["seed"], "vector": [[0.0] * 8]})
    lancedb.connect(root).create_table("chunks", seed.cast(schema(declared)))
    start = time.time() + START_DELAY
    processes = [
        multiprocessing.Process(target=upsert, args=(root, declared, n, keys, start))
        for n in range(writers)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join()
    ids = lancedb.connect(root).open_table("chunks").to_arrow()["chunk_id"].to_pylist()
    return len(ids), len(set(ids)), [process.exitcode for process in processes]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--keys", type=int, default=200, help="keys each writer upserts")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--replace", action="store_true", help="each writer replaces one document's rows"
    )
    args = parser.parse_args()
    # Forked children would share lancedb's async runtime with the parent.
    multiprocessing.set_start_method("spawn")
    print(f"lance {version('pylance')}, lancedb {version('lancedb')}, {args.writers} writers")
    if args.replace:
        print(
            "| run | rows stored | rows expected | rows wrong (lost, left behind, doubled, stale) |"
        )
        print("|---:|---:|---:|---:|")
        failed = False
        for number in range(1, args.runs + 1):
            wrong, stored, codes = run_replace(args.writers, args.keys)
            if any(code != 0 for code in codes):
                print(f"a writer failed: exit codes {codes}", file=sys.stderr)
                return 1
            print(f"| {number} | {stored} | {args.writers * args.keys} | {wrong} |")
            failed |= wrong > 0
        return 1 if failed else 0
    print("| key column | run | rows stored | distinct keys | rows of a key stored again |")
    print("|---|---:|---:|---:|---:|")
    duplicated_with_key = False
    for declared in (False, True):
        for number in range(1, args.runs + 1):
            rows, distinct, codes = run(declared, args.writers, args.keys)
            if any(code != 0 for code in codes):
                print(f"a writer failed: exit codes {codes}", file=sys.stderr)
                return 1
            name = "declared primary key" if declared else "plain"
            print(f"| {name} | {number} | {rows} | {distinct} | {rows - distinct} |")
            duplicated_with_key |= declared and rows != distinct
    return 1 if duplicated_with_key else 0


if __name__ == "__main__":
    sys.exit(main())
