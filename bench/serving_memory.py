"""Memory of API worker processes searching one index: vectors shared through a mapped file,
against each process holding its own copy.

Why: every API process keeps a searched table version's unit vectors (1.5 KB a row at 384
dimensions) to score or rescore them. With `--workers N` each held its own copy; with
`LOREHOUSE_SEARCH_SHARED_VECTORS` (the default) they map one file (`SharedVectors`), which
the page cache holds once. This bench writes a chunk table of random unit vectors, then, for
each mode, starts N worker processes at once that each load the table's snapshot and run
vector searches (exact scoring, every row: the most pages a search can touch), and reads
each process's RSS, USS (memory only it holds) and PSS (its share of what it maps with
others) from /proc. Run the modes in one invocation: the ratio is the figure.

    .venv/bin/python bench/serving_memory.py --rows 100000 300000 --workers 2 [--json F]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine import machine_info, write_raw_numbers  # noqa: E402

DIMENSION = 384
SEARCHES = 50
BATCH = 50_000


def generate(path: Path, rows: int) -> None:
    """A chunks table of `rows` random unit vectors, written in batches."""
    from lorehouse.stores.lance_index import ChunkIndex, chunk_schema

    index = ChunkIndex(str(path), ann_min_rows=10**9)
    schema = chunk_schema(DIMENSION, "bench-random")
    rng = np.random.default_rng(5)
    for start in range(0, rows, BATCH):
        count = min(BATCH, rows - start)
        vectors = rng.standard_normal((count, DIMENSION)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        ids = [f"c{i:08d}" for i in range(start, start + count)]
        columns = {
            "chunk_id": ids,
            "doc_id": [f"d{i // 3:08d}" for i in range(start, start + count)],
            "acl": [[] for _ in ids],
            "text_embed": ids,
            "embed_key": ids,
            "row_hash": ids,
        }
        arrays = [
            pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), DIMENSION)
            if field.name == "vector"
            else pa.array(columns.get(field.name, [None] * count), type=field.type)
            for field in schema
        ]
        index.upsert(pa.Table.from_arrays(arrays, schema=schema), [])


def worker(path: str, cache: str | None, ready: str, go: str) -> None:
    """One API worker: loads the snapshot, searches, reports its memory, waits to be told
    to stop (so every worker's pages are mapped while the others are measured)."""
    from lorehouse.stores.lance_index import ChunkIndex

    index = ChunkIndex(path, ann_min_rows=10**9, vector_cache=Path(cache) if cache else None)
    snapshot = index.snapshot()
    rng = np.random.default_rng(9)
    started = time.perf_counter()
    for _ in range(SEARCHES):
        snapshot.vector_ranking(rng.standard_normal(DIMENSION).astype(np.float32), None, 10)
    seconds = (time.perf_counter() - started) / SEARCHES
    Path(ready).write_text(json.dumps({"search_ms": round(seconds * 1000, 2)}))
    while not Path(go).exists():
        time.sleep(0.05)


def _memory(pid: int) -> dict[str, float]:
    """RSS, USS and PSS in MiB from /proc/PID/smaps_rollup."""
    fields: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name in ("Rss", "Pss", "Private_Clean", "Private_Dirty"):
            fields[name] = int(rest.split()[0]) / 1024
    return {
        "rss": round(fields["Rss"], 1),
        "pss": round(fields["Pss"], 1),
        "uss": round(fields["Private_Clean"] + fields["Private_Dirty"], 1),
    }


def measure(path: Path, cache: Path | None, workers: int, scratch: Path) -> dict[str, Any]:
    go = scratch / "go"
    go.unlink(missing_ok=True)
    readies = [scratch / f"ready-{n}" for n in range(workers)]
    for ready in readies:
        ready.unlink(missing_ok=True)
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--worker",
                str(path),
                str(cache or ""),
                str(ready),
                str(go),
            ]
        )
        for ready in readies
    ]
    try:
        while not all(ready.exists() for ready in readies):
            if any(p.poll() not in (None, 0) for p in processes):
                raise SystemExit("a worker failed")
            time.sleep(0.1)
        each = [_memory(p.pid) for p in processes]
        searches = [json.loads(ready.read_text())["search_ms"] for ready in readies]
    finally:
        go.write_text("")
        for process in processes:
            process.wait(timeout=60)
    return {
        "workers": each,
        "rss_total": round(sum(w["rss"] for w in each), 1),
        "pss_total": round(sum(w["pss"] for w in each), 1),
        "search_ms": searches,
    }


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3] or None, sys.argv[4], sys.argv[5])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000, 300_000])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as folder:
        scratch = Path(folder)
        for rows in args.rows:
            path = scratch / f"lancedb-{rows}"
            generate(path, rows)
            for mode, cache in (("own copy", None), ("shared", scratch / f"cache-{rows}")):
                found = measure(path, cache, args.workers, scratch)
                results.append({"rows": rows, "mode": mode, **found})
                print(json.dumps(results[-1]), flush=True)
    print("| rows | vectors | RSS per worker MiB | USS per worker MiB | PSS all workers MiB |")
    print("|---:|---|---|---|---:|")
    for r in results:
        rss = " / ".join(f"{w['rss']:.0f}" for w in r["workers"])
        uss = " / ".join(f"{w['uss']:.0f}" for w in r["workers"])
        print(f"| {r['rows']:,} | {r['mode']} | {rss} | {uss} | {r['pss_total']:.0f} |")
    if args.json:
        machine = machine_info(["lancedb", "numpy"])
        write_raw_numbers(args.json, {"machine": machine, "runs": results})


if __name__ == "__main__":
    main()
