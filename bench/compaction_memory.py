"""Peak memory of the embedding stage's last step on the token-vector table: compaction.

Why this benchmark exists: at 10,000 documents `bench/scale.py` found the build's peak in the
embedding stage's last step, about 500 MiB above the level its batches held, and that step
does three whole-table things per table: delete the rows of documents that are gone, create
missing scalar indexes, and `optimize` (compaction, index update, old-version cleanup). The
token-vector table is by far the largest (a chunk's packed token vectors are about 60 KB, 3.4
GB at 10,000 documents), so this script isolates its `refresh_indexes` on a table written
as the stage writes it: commits of 512 rows (`batch_size * 8`), each in its own
`merge_insert`. Then one document's three chunks are written again, as a nightly reindex
after an edit does, and the same step runs twice: what it rewrites and holds then is what
every later reindex pays. It also measures compacting after every batch, the obvious way to
bound the build's last step, to show what that costs.

Each build runs in its own process; peak RSS is sampled every 20 ms. Rows are random bytes
of 30-90 KB (fixed seed), keyed as the stage keys them.

    .venv/bin/python bench/compaction_memory.py [--rows 28160,56320] [--commit-rows 512]
        [--row-bytes 60000] [--modes "at the end"] [--json OUT]
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

AT_THE_END = "at the end"
EVERY_BATCH = "every batch"


def build(mode: str, rows: int, commit_rows: int, row_bytes: int, folder: Path) -> dict[str, Any]:
    """One table written and refreshed in this process: peaks, times and bytes on disk."""
    import pyarrow as pa

    from lorehouse.stores.lance_index import ChunkIndex, token_vector_schema

    table = ChunkIndex(str(folder)).token_vectors()
    schema = token_vector_schema(384, "bench-384/tokens-int8")
    rng = np.random.default_rng(0)
    payload = rng.integers(0, 255, size=2 * row_bytes, dtype=np.uint8).tobytes()
    process = psutil.Process()
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], process.memory_info().rss)
            done.wait(0.02)

    threading.Thread(target=sample, daemon=True).start()
    write_seconds = 0.0
    for start in range(0, rows, commit_rows):
        count = min(commit_rows, rows - start)
        sizes = rng.integers(row_bytes // 2, row_bytes * 3 // 2, size=count).tolist()
        batch = [
            {**row, "vector": payload[size % 997 : size % 997 + size]}
            for row, size in zip(_rows(start, count), sizes, strict=True)
        ]
        started = time.perf_counter()
        table.upsert(pa.Table.from_pylist(batch, schema=schema), [])
        if mode == EVERY_BATCH and start + count < rows:
            table.refresh_indexes()
        write_seconds += time.perf_counter() - started
    writes_peak, level = peak[0], process.memory_info().rss
    peak[0] = 0
    started = time.perf_counter()
    table.refresh_indexes()
    last_step_seconds = time.perf_counter() - started
    last_step_peak = peak[0]
    on_disk = sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())
    # A nightly reindex after one document changed: its three chunks written again, then the
    # same last step, twice (a step may leave what it found to the next).
    edited = [{**row, "vector": payload[: row_bytes // 2]} for row in _rows(start=99, count=3)]
    table.upsert(pa.Table.from_pylist(edited, schema=schema), [])
    rerun_rise, rerun_written, rerun_seconds = 0, 0, 0.0
    for _ in range(2):
        data_before = _data_bytes(folder)
        level_before = process.memory_info().rss
        peak[0] = 0
        started = time.perf_counter()
        table.refresh_indexes()
        rerun_seconds += time.perf_counter() - started
        rerun_rise = max(rerun_rise, peak[0] - level_before)
        rerun_written += max(0, _data_bytes(folder) - data_before)
    done.set()
    return {
        "mode": mode,
        "rows": rows,
        "commit_rows": commit_rows,
        "row_bytes": row_bytes,
        "writes_peak_rss_mib": round(writes_peak / 2**20),
        "rss_before_last_step_mib": round(level / 2**20),
        "last_step_peak_rss_mib": round(last_step_peak / 2**20),
        "last_step_rise_mib": round((last_step_peak - level) / 2**20),
        "write_seconds": round(write_seconds, 1),
        "last_step_seconds": round(last_step_seconds, 1),
        "on_disk_mib": round(on_disk / 2**20),
        "after_one_edit_rise_mib": round(rerun_rise / 2**20),
        "after_one_edit_written_mib": round(rerun_written / 2**20),
        "after_one_edit_seconds": round(rerun_seconds, 1),
    }


def _rows(start: int, count: int) -> list[dict[str, str]]:
    """Keys of rows `start`..: three chunks a document, each keyed by its own id."""
    ids = [f"c{i:07d}" for i in range(start, start + count)]
    return [
        {"chunk_id": key, "doc_id": f"d{(start + n) // 3:06d}", "embed_key": key, "row_hash": key}
        for n, key in enumerate(ids)
    ]


def _data_bytes(folder: Path) -> int:
    """Bytes of the token table's data files (what a compaction writes)."""
    return sum(path.stat().st_size for path in folder.glob("*.lance/data/*"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="28160,56320", help="table sizes, comma-separated")
    parser.add_argument("--commit-rows", type=int, default=512, help="rows per commit")
    parser.add_argument("--row-bytes", type=int, default=60_000, help="mean bytes per row")
    parser.add_argument(
        "--modes",
        default=AT_THE_END,
        help=f'"{AT_THE_END}" and/or "{EVERY_BATCH}", comma-separated (the second is slow)',
    )
    parser.add_argument("--json", type=Path, default=None, help="also write raw numbers here")
    parser.add_argument(
        "--child", nargs=3, metavar=("MODE", "ROWS", "FOLDER"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.child:
        mode, rows, folder = args.child
        result = build(mode, int(rows), args.commit_rows, args.row_bytes, Path(folder))
        print(json.dumps(result))
        return
    print(
        "| rows | compaction | writes' peak RSS MiB | RSS before the last step MiB "
        "| last step's peak MiB | its rise MiB | writes s | last step s | on disk MiB "
        "| one document edited: rise MiB, written MiB, s |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---|")
    results = measure_grid(
        __file__,
        [int(size) for size in args.rows.split(",")],
        [m.strip() for m in args.modes.split(",")],
        ["--commit-rows", str(args.commit_rows), "--row-bytes", str(args.row_bytes)],
        "lorehouse-compaction-",
        _cells,
    )
    if args.json:
        write_raw_numbers(
            args.json, {"machine": machine_info(["lancedb", "pyarrow"]), "results": results}
        )


def _cells(result: dict[str, Any]) -> list[object]:
    return [
        f"{result['rows']:,}",
        result["mode"],
        f"{result['writes_peak_rss_mib']:,}",
        f"{result['rss_before_last_step_mib']:,}",
        f"{result['last_step_peak_rss_mib']:,}",
        f"{result['last_step_rise_mib']:,}",
        result["write_seconds"],
        result["last_step_seconds"],
        f"{result['on_disk_mib']:,}",
        f"{result['after_one_edit_rise_mib']:,}, {result['after_one_edit_written_mib']:,}, "
        f"{result['after_one_edit_seconds']}",
    ]


if __name__ == "__main__":
    main()
