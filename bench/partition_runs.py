"""Partition runs side by side: throughput at each concurrency, and the same stores.

For one generated corpus (bench/reindex.py's generator), each concurrency C builds fresh
stores the way a cluster would: `lorehouse materialize --select raw_documents` (the
inventory), then the index partitions split into C contiguous ranges, each range a
`lorehouse materialize --partitions FIRST...LAST` process of its own (one parser process and
one embedding thread each, as a pod with one core would run it), all C at once, each
publishing its partitions into what search reads as it goes (one publish at a time, the
others waiting for the shared stores' lease); then one `lorehouse materialize`, which finds
every partition current and has only the whole index's maintenance left. A last build
with one partition (`LOREHOUSE_INDEX_PARTITIONS=1`) and a plain `lorehouse materialize` is
the unpartitioned reference. Each row has a checksum of the final
chunk ids, texts and vectors (rounded to 1e-4, below the run-to-run noise of the float
arithmetic), which must be the reference's.

Used by `bench/scale.py --concurrency 1 2`.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
#: One core per partition run: parse pool, embedding threads and BLAS all single.
ONE_CORE = {
    "LOREHOUSE_WORKERS": "1",
    "LOREHOUSE_EMBED_THREADS": "1",
    "OMP_NUM_THREADS": "1",
}


def _lorehouse(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    command = [str(Path(sys.executable).parent / "lorehouse"), *args]
    with log.open("a") as output:
        return subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=output, stderr=output)


def _wait(children: list[subprocess.Popen], log: Path) -> None:
    for child in children:
        if child.wait() != 0:
            raise SystemExit(f"a lorehouse run failed ({child.returncode}); see {log}")


def ranges(keys: list[str], concurrency: int) -> list[str]:
    """`keys` in `concurrency` contiguous ranges of near-equal size, as FIRST...LAST."""
    size, extra = divmod(len(keys), concurrency)
    found, start = [], 0
    for index in range(concurrency):
        end = start + size + (index < extra)
        found.append(f"{keys[start]}...{keys[end - 1]}")
        start = end
    return found


def store_checksum(data_dir: Path) -> str:
    """A digest of every chunk's id, embedded text and vector in the LanceDB table search reads."""
    import lancedb

    table = lancedb.connect(str(data_dir / "lancedb")).open_table("chunks").to_arrow()
    order = np.argsort(np.array(table["chunk_id"].to_pylist()))
    ids, texts = table["chunk_id"].to_pylist(), table["text_embed"].to_pylist()
    vectors = np.array(table["vector"].to_pylist(), dtype=np.float32)
    digest = hashlib.sha256()
    for row in order:
        digest.update(ids[row].encode())
        digest.update(texts[row].encode())
        digest.update(np.round(vectors[row], 4).tobytes())
    return digest.hexdigest()[:16]


def _chunks(data_dir: Path) -> int:
    import duckdb

    with duckdb.connect(str(data_dir / "lorehouse.duckdb"), read_only=True) as connection:
        (count,) = connection.execute("SELECT count(*) FROM chunks").fetchone() or (0,)
    return int(count)


def build(
    source: Path, data_dir: Path, documents: int, concurrency: int, partitions: int
) -> dict[str, Any]:
    """One build as described above; figures for its row."""
    from lorehouse.stores.partitions import partition_keys

    env = {
        **os.environ,
        **ONE_CORE,
        "LOREHOUSE_SOURCE_URI": str(source),
        "LOREHOUSE_DATA_DIR": str(data_dir),
        "LOREHOUSE_INDEX_PARTITIONS": str(partitions),
    }
    log = data_dir.parent / f"{data_dir.name}.log"
    data_dir.mkdir(parents=True)
    started = time.perf_counter()
    _wait([_lorehouse(["materialize", "--select", "raw_documents"], env, log)], log)
    inventoried = time.perf_counter()
    children = [
        _lorehouse(["materialize", "--partitions", part], env, log)
        for part in ranges(partition_keys(partitions), concurrency)
    ]
    _wait(children, log)
    built = time.perf_counter()
    _wait([_lorehouse(["materialize", "--select", "not group:evals"], env, log)], log)
    ended = time.perf_counter()
    return {
        "concurrency": concurrency,
        "partitions": partitions,
        "documents": documents,
        "chunks": _chunks(data_dir),
        "wall_s": round(ended - started, 2),
        "inventory_s": round(inventoried - started, 2),
        "partition_runs_s": round(built - inventoried, 2),
        "merge_s": round(ended - built, 2),
        "documents_per_s": round(documents / (built - inventoried), 3),
        "store_checksum": store_checksum(data_dir),
    }


def measure(
    source: Path, workdir: Path, documents: int, concurrencies: list[int], partitions: int
) -> list[dict[str, Any]]:
    """One row per concurrency, then the one-partition reference; ratios against C=1."""
    rows = []
    for concurrency in concurrencies:
        print(f"[{documents}] {concurrency} partition runs at once...", file=sys.stderr)
        rows.append(build(source, workdir / f"c{concurrency}", documents, concurrency, partitions))
    print(f"[{documents}] one partition, one run...", file=sys.stderr)
    reference = build(source, workdir / "unpartitioned", documents, 1, 1)
    baseline = rows[0]["documents_per_s"]
    for row in rows:
        row["throughput_ratio"] = round(row["documents_per_s"] / baseline, 3)
        row["equals_unpartitioned"] = row["store_checksum"] == reference["store_checksum"]
    reference["throughput_ratio"] = round(reference["documents_per_s"] / baseline, 3)
    reference["equals_unpartitioned"] = True
    return [*rows, reference]


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| concurrency | partitions | documents | chunks | partition runs s | merge s | wall s "
        "| documents/s | throughput vs 1 | checksum | equals unpartitioned |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    lines += [
        f"| {r['concurrency']} | {r['partitions']} | {r['documents']} | {r['chunks']} "
        f"| {r['partition_runs_s']} | {r['merge_s']} | {r['wall_s']} | {r['documents_per_s']} "
        f"| {r['throughput_ratio']} | `{r['store_checksum']}` | {r['equals_unpartitioned']} |"
        for r in rows
    ]
    return "\n".join(lines)
