"""Peak memory of a build's vector indexing: the index built at the end, or between batches.

Why this benchmark exists: building LanceDB's IVF_HNSW_SQ index holds about 2.6 KB per row it
covers, so a build that indexes the whole table at its end peaks in proportion to the corpus,
whatever its batch size. The embedding stage therefore folds rows into the index between
batches (`LanceTable.index_new_vectors`): a first index when the table reaches `ann_min_rows`,
then a delta index each time that many rows are outside it. This script writes a sentence-window
sized table (384-d vectors) batch by batch, as the embedding stage does, both ways, each in its
own process, and reports the build's peak RSS (sampled every 20 ms; the recall check after it
is not counted), how far indexing rose above the writes alone, the time, and the recall@10
and median latency of vector searches of the finished table (exact rescoring of the ANN
candidates, as every search does).

Vectors are random unit vectors around 300 gaussian centres (fixed seed); texts are the row ids.

    .venv/bin/python bench/index_memory.py [--rows 100000,200000] [--batch 3500]
        [--ann-min-rows 50000] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import psutil
from machine import (  # bench/machine.py, beside this script
    machine_info,
    measure_grid,
    write_raw_numbers,
)

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from lorehouse.settings import DEFAULT_ANN_INDEX_MIN_ROWS  # noqa: E402

DIMENSION = 384
CENTRES = 300
QUERIES = 100


def _vectors(rng: np.random.Generator, centres: np.ndarray, rows: int) -> np.ndarray:
    picked = centres[rng.integers(0, len(centres), rows)]
    vectors = picked + 0.35 * rng.standard_normal((rows, DIMENSION)).astype(np.float32)
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def build(mode: str, rows: int, batch: int, ann_min_rows: int, folder: Path) -> dict[str, Any]:
    """One build in this process: returns its peak RSS, indexing's rise and recall@10."""
    import pyarrow as pa

    from lorehouse.search.ann import NeighbourSearch
    from lorehouse.search.filters import access_clause
    from lorehouse.settings import DEFAULT_SEARCH_ANN_PROBES
    from lorehouse.stores.lance_index import ChunkIndex, chunk_schema

    schema = chunk_schema(DIMENSION, "bench-384")
    # LanceDB's own index is what this measures the build of, and what its searches read.
    index = ChunkIndex(
        str(folder),
        ann_min_rows=ann_min_rows,
        neighbours=NeighbourSearch(
            ann_min_rows, probes=DEFAULT_SEARCH_ANN_PROBES, engine="lancedb"
        ),
    )
    rng = np.random.default_rng(0)
    centres = rng.standard_normal((CENTRES, DIMENSION)).astype(np.float32)
    process = psutil.Process()
    #: [peak since the last reset, peak of the whole build]
    peak = [0, 0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            rss = process.memory_info().rss
            peak[0] = max(peak[0], rss)
            peak[1] = max(peak[1], rss)
            done.wait(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    rise = 0
    index_seconds = 0.0
    started = time.perf_counter()
    for start in range(0, rows, batch):
        count = min(batch, rows - start)
        vectors = _vectors(rng, centres, count)
        ids = [f"c{i:07d}" for i in range(start, start + count)]
        columns = {"chunk_id": ids, "doc_id": ids, "acl": [[]] * count, "text_embed": ids}
        arrays = [
            pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), DIMENSION)
            if field.name == "vector"
            else pa.array(columns.get(field.name, [None] * count), type=field.type)
            for field in schema
        ]
        index.upsert(pa.Table.from_arrays(arrays, schema=schema), [])
        if mode == "between batches":
            level = peak[0] = process.memory_info().rss
            step_started = time.perf_counter()
            if index.index_new_vectors():
                index_seconds += time.perf_counter() - step_started
                rise = max(rise, peak[0] - level)
    level = peak[0] = process.memory_info().rss
    level_before_last_step = level
    step_started = time.perf_counter()
    index.refresh_indexes()
    index_seconds += time.perf_counter() - step_started
    rise = max(rise, peak[0] - level)
    done.set()
    sampler.join()
    seconds = time.perf_counter() - started
    stats = index.table().index_stats(
        next(i.name for i in index.table().list_indices() if list(i.columns) == ["vector"])
    )
    # Recall of the finished index against exact search, over the vectors written (made again
    # from the same seed: holding them during the build would add to what is measured).
    rng = np.random.default_rng(0)
    rng.standard_normal((CENTRES, DIMENSION))
    every = np.concatenate(
        [_vectors(rng, centres, min(batch, rows - start)) for start in range(0, rows, batch)]
    )
    snapshot = index.snapshot()
    queries = _vectors(np.random.default_rng(1), centres, QUERIES)
    snapshot.vector_search(queries[0], access_clause([]), 10, ["chunk_id"])  # loads the snapshot
    found = 0
    latencies: list[float] = []
    for query in queries:
        exact = set(np.argsort(-(every @ query))[:10].tolist())
        asked = time.perf_counter()
        hits = snapshot.vector_search(query, access_clause([]), 10, ["chunk_id"])
        latencies.append(time.perf_counter() - asked)
        found += len(exact & {int(hit["chunk_id"][1:]) for hit in hits})
    return {
        "mode": mode,
        "rows": rows,
        "batch_rows": batch,
        "peak_rss_mib": round(peak[1] / 2**20, 1),
        "indexing_rise_mib": round(rise / 2**20, 1),
        "rss_before_last_index_step_mib": round(level_before_last_step / 2**20, 1),
        "index_seconds": round(index_seconds, 1),
        "build_seconds": round(seconds, 1),
        "delta_indexes": int(getattr(stats, "num_indices", 1) or 1),
        "recall_at_10": round(found / (10 * QUERIES), 3),
        "vector_search_p50_ms": round(1000 * float(np.median(latencies)), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="100000,200000", help="table sizes, comma-separated")
    parser.add_argument("--batch", type=int, default=3500, help="rows written per batch")
    parser.add_argument(
        "--ann-min-rows",
        type=int,
        default=DEFAULT_ANN_INDEX_MIN_ROWS,
        help="rows from which the table gets an ANN index (LOREHOUSE_ANN_INDEX_MIN_ROWS)",
    )
    parser.add_argument("--json", type=Path, default=None, help="also write raw numbers here")
    parser.add_argument(
        "--child", nargs=3, metavar=("MODE", "ROWS", "FOLDER"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.child:
        mode, rows, folder = args.child
        print(json.dumps(build(mode, int(rows), args.batch, args.ann_min_rows, Path(folder))))
        return
    print(
        "| rows | indexing | peak RSS MiB | RSS before last index step MiB "
        "| indexing rise MiB | index s | build s | indexes | recall@10 | search p50 ms |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    results = measure_grid(
        __file__,
        [int(size) for size in args.rows.split(",")],
        ("at the end", "between batches"),
        ["--batch", str(args.batch), "--ann-min-rows", str(args.ann_min_rows)],
        "lorehouse-index-memory-",
        _cells,
    )
    if args.json:
        write_raw_numbers(
            args.json, {"machine": machine_info(["lancedb", "numpy"]), "results": results}
        )


def _cells(result: dict[str, Any]) -> list[object]:
    return [
        f"{result['rows']:,}",
        result["mode"],
        f"{result['peak_rss_mib']:,}",
        f"{result['rss_before_last_index_step_mib']:,}",
        f"{result['indexing_rise_mib']:,}",
        result["index_seconds"],
        result["build_seconds"],
        result["delta_indexes"],
        result["recall_at_10"],
        result["vector_search_p50_ms"],
    ]


if __name__ == "__main__":
    main()
