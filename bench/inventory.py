"""What the inventory stage costs a run as the corpus grows: time and memory.

The inventory lists the source, hashes the files that changed and swaps the new inventory
into `documents_raw`. This runs `lorehouse.stages.inventory.run_inventory` over a generated
source held in memory (no disk reads, so the figures are the stage's own work: N files in
folders of 1,000, one `_access.json` per 10 folders, a `.meta.json` beside one document in
100), each case in a fresh process on the same store, in order:

* **first build**: an empty store, every file read and hashed;
* **no change**: the nightly case, every file trusted from its size and time;
* **1 % touched**: one file in 100 with a new modification time (read again, same bytes).

Per case: wall seconds, and the process's peak RSS above what it held before the call
(DuckDB works in the same process, so its memory is counted). `--code DIR` imports
Lorehouse from another checkout, to compare two versions of the stage in one session.
Run from the repository root:

    .venv/bin/python bench/inventory.py --sizes 100000 1000000 [--code ../old] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
CASES = ("first build", "no change", "1 % touched")
BASE_TIME = datetime(2026, 1, 1, tzinfo=UTC)


class GeneratedSource:
    """A source of `documents` small Markdown files that exist only in memory."""

    uri = "memory://bench"

    def __init__(self, documents: int, touched: bool = False) -> None:
        self.documents = documents
        self.touched = touched

    def list_files(self) -> Iterator[Any]:
        from lorehouse.sources.base import SourceFile

        for index in range(self.documents):
            folder = index // 1000
            path = f"team-{folder:04d}/policy-{index:07d}.md"
            moved = timedelta(days=1) if self.touched and index % 100 == 7 else timedelta()
            modified = BASE_TIME + timedelta(seconds=index) + moved
            yield SourceFile(path, 200 + index % 500, modified)
            if index % 100 == 3:
                yield SourceFile(path + ".meta.json", 30, BASE_TIME)
            if index % 1000 == 0 and folder % 10 == 0:
                yield SourceFile(f"team-{folder:04d}/_access.json", 30, BASE_TIME)

    def read_bytes(self, rel_path: str) -> bytes:
        if rel_path.endswith(".json"):
            return json.dumps({"groups": ["staff", rel_path.split("/")[0]]}).encode()
        return f"# {rel_path}\n\nThe policy text of {rel_path}.\n".encode()

    def file_uri(self, rel_path: str) -> str:
        return f"{self.uri}/{rel_path}"


def child(case: str, documents: int, folder: Path) -> dict[str, Any]:
    """One case in this (fresh) process: seconds and peak RSS above the start."""
    import psutil

    from lorehouse.stages.inventory import run_inventory
    from lorehouse.stores.duckdb_store import DuckDBStore

    store = DuckDBStore(folder / "lorehouse.duckdb")
    source = GeneratedSource(documents, touched=case == "1 % touched")
    before = psutil.Process().memory_info().rss
    started = time.perf_counter()
    report = run_inventory(source, store, max_file_bytes=1 << 20)
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {
        "case": case,
        "documents": report.documents,
        "hashed": report.hashed,
        "seconds": round(seconds, 2),
        "peak_rss_above_start_mib": round((peak - before) / 2**20, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000])
    parser.add_argument("--code", type=Path, default=REPO_ROOT, help="checkout to import")
    parser.add_argument("--json", type=Path, help="write the raw figures here")
    parser.add_argument("--child", nargs=3, metavar=("CASE", "SIZE", "FOLDER"))
    args = parser.parse_args()
    if args.child:
        case, size, folder = args.child
        print(json.dumps(child(case, int(size), Path(folder))))
        return
    from machine import machine_info, write_raw_numbers  # bench/machine.py, beside this

    environment = {**os.environ, "PYTHONPATH": str(args.code.resolve())}
    results = []
    print("| documents | case | files hashed | seconds | peak RSS above start MiB |")
    print("|---:|---|---:|---:|---:|")
    for size in args.sizes:
        with tempfile.TemporaryDirectory(prefix="lorehouse-inventory-") as folder:
            for case in CASES:
                out = subprocess.run(
                    [sys.executable, __file__, "--child", case, str(size), folder],
                    check=True,
                    capture_output=True,
                    text=True,
                    env=environment,
                ).stdout
                result = json.loads(out.strip().splitlines()[-1])
                results.append(result)
                print(
                    f"| {size} | {case} | {result['hashed']} | {result['seconds']} "
                    f"| {result['peak_rss_above_start_mib']} |",
                    flush=True,
                )
    if args.json:
        write_raw_numbers(
            args.json,
            {"code": str(args.code), "machine": machine_info(["duckdb"]), "results": results},
        )


if __name__ == "__main__":
    main()
