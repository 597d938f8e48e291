"""What keeping the feature tables costs a run: incremental sync against a whole rebuild.

The features stage (`lorehouse/stages/features.py`) keeps `documents`, `chunk_faqs` and
`chunk_keywords` equal to what the stage tables say. This fills a DuckDB store with
generated stage-table rows (per document 2.75 chunks, as in `bench/scale.py`'s corpus; per
chunk 10 keywords and one FAQ, as LLM enrichment writes), then times, on the same file:

* **rebuild**: every feature table deleted and inserted whole in one transaction (what the
  stage did before it synced per document), with nothing changed;
* **sync, no change**: `run_document_features` when no document changed (the nightly case);
* **sync, 1 % edited**: after 1 % of the documents got new keywords and summaries.

Each figure is the best of `--repeat` runs. Run from the repository root:

    .venv/bin/python bench/features.py --sizes 20000 100000 [--json OUT]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from machine import machine_info, write_raw_numbers  # bench/machine.py, beside this script

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))


def fill(store: Any, documents: int) -> None:
    """Stage-table rows for `documents` generated documents."""
    with store.connect() as connection:
        connection.execute(
            "INSERT INTO documents_raw SELECT 'd' || i, 'file:///corpus', 'policies/' || i || "
            "'.md', 'md', 3000, md5(i::VARCHAR), now(), ['public'], now() "
            f"FROM range({documents}) t(i)"
        )
        connection.execute(
            "INSERT INTO documents_parsed SELECT 'd' || i, md5(i::VARCHAR), 'Policy ' || i, "
            "repeat('word ', 400), '{}', 1, 'markdown', '1', 1.0, [], now() "
            f"FROM range({documents}) t(i)"
        )
        # 3 chunks for three documents in four, 2 for the fourth: 2.75 on average.
        connection.execute(
            "INSERT INTO chunks SELECT 'c' || i || '-' || j, 'd' || i, j, ['Rules'], "
            "repeat('text ', 120), repeat('text ', 120), 1, 1, false, 150, ['public'], "
            f"md5(i::VARCHAR || j), now() FROM range({documents}) t(i), range(3) s(j) "
            "WHERE j < 2 OR i % 4 <> 0"
        )
        connection.execute(
            "INSERT INTO enriched_chunks SELECT chunk_id, doc_id, 'summary of ' || chunk_id, "
            "['What does ' || chunk_id || ' say?'], "
            "list_transform(range(10), lambda k: 'keyword ' || chunk_id || ' ' || k), "
            "'extractive', 'bundled', 'v1', 'enriched', NULL FROM chunks"
        )
        connection.execute(
            "INSERT INTO document_enrichment (doc_id, summary, generated_title, "
            "enrichment_mode, model, status, error) SELECT 'd' || i, 'summary ' || i, NULL, "
            f"'extractive', 'bundled', 'enriched', NULL FROM range({documents}) t(i)"
        )


def edit(store: Any, documents: int, share: float, round_: int) -> None:
    """New keywords and summaries for every 1/share-th document."""
    step = max(1, round(1 / share))
    with store.connect() as connection:
        connection.execute(
            f"UPDATE enriched_chunks SET keywords = ['edited {round_}'] "
            f"WHERE CAST(substr(doc_id, 2) AS INTEGER) % {step} = 0"
        )
        connection.execute(
            f"UPDATE document_enrichment SET summary = 'edited {round_}' "
            f"WHERE CAST(substr(doc_id, 2) AS INTEGER) % {step} = 0"
        )


def best(seconds: list[float]) -> float:
    return round(min(seconds), 3)


def measure(documents: int, repeat: int) -> dict[str, Any]:
    from lorehouse.stages.features import _FRESH, FEATURE_TABLES, run_document_features
    from lorehouse.stores.duckdb_store import DuckDBStore

    rebuild = [
        statement
        for table in FEATURE_TABLES
        for statement in (f"DELETE FROM {table}", f"INSERT INTO {table} {_FRESH[table]}")
    ]
    with tempfile.TemporaryDirectory(prefix="lorehouse-features-") as folder:
        path = Path(folder) / "lorehouse.duckdb"
        store = DuckDBStore(path)
        fill(store, documents)
        started = time.perf_counter()
        counts = run_document_features(store)
        first = time.perf_counter() - started
        timings: dict[str, list[float]] = {"rebuild": [], "no_change": [], "edited": []}
        for round_ in range(repeat):
            started = time.perf_counter()
            store.execute_in_transaction(rebuild)
            timings["rebuild"].append(time.perf_counter() - started)
            started = time.perf_counter()
            run_document_features(store)
            timings["no_change"].append(time.perf_counter() - started)
            edit(store, documents, 0.01, round_)
            started = time.perf_counter()
            run_document_features(store)
            timings["edited"].append(time.perf_counter() - started)
        size_mib = path.stat().st_size / 2**20
    return {
        "documents": documents,
        "rows": counts,
        "first_sync_seconds": round(first, 3),
        "rebuild_seconds": best(timings["rebuild"]),
        "no_change_seconds": best(timings["no_change"]),
        "edited_seconds": best(timings["edited"]),
        "duckdb_mib": round(size_mib, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[20000, 100000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None, help="also write raw numbers here")
    args = parser.parse_args()

    results = [measure(size, args.repeat) for size in args.sizes]
    print(
        "| documents | keyword rows | first sync s | rebuild s | sync, no change s "
        "| ratio to rebuild | sync, 1 % edited s | ratio to rebuild |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        rebuild = r["rebuild_seconds"]
        print(
            f"| {r['documents']:,} | {r['rows']['chunk_keywords']:,} "
            f"| {r['first_sync_seconds']:.2f} | {rebuild:.2f} "
            f"| {r['no_change_seconds']:.2f} | {r['no_change_seconds'] / rebuild:.2f}x "
            f"| {r['edited_seconds']:.2f} | {r['edited_seconds'] / rebuild:.2f}x |"
        )
    info = machine_info(["duckdb"])
    print(f"\n{info['cpu_count']} cores, Python {info['python']}, {info['platform']}")
    if args.json:
        write_raw_numbers(args.json, {"machine": info, "results": results})


if __name__ == "__main__":
    main()
