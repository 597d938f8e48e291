"""A corpus too large for one run, built partition by partition: each partition's cost, and
the projection of the whole build to N pods.

Generates a corpus (bench/reindex.py's generator, fixed seed), takes the inventory once
(`lorehouse materialize --select raw_documents`), then builds index partitions one run each
(`lorehouse materialize --partitions pNNN`, one core, as a pod per partition would run it),
recording each run's wall time, peak memory and documents. Every finished partition is
appended to `partitions.jsonl` in --workdir as it ends, so a bench that is stopped resumes
with the next partition, and the partition it was in resumes crash-safe from its last batch.

`--edit` then edits one Markdown document of the first partition, takes the inventory again
(what the source sensor's run does) and reruns that partition: the run that makes one edit
searchable, whose time is the build side of a publish's freshness (the serving side is
bench/new_version.py's, the publish bench/merge_scale.py's).

`--concurrency C` runs C partitions at once (C one-core pods). `--limit K` builds the first
K partitions only: the projection takes the median seconds per document of those built,
times the corpus, spread over N pods. The merges that follow are
measured at 100,000 and 1,000,000 chunks by bench/merge_scale.py.

    .venv/bin/python bench/partition_build.py --documents 100000 --partitions 256 \\
        --limit 3 --workdir /var/tmp/partition-build --json bench/partition_build.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from machine import machine_info, write_raw_numbers  # bench/machine.py, beside this script
from partition_runs import ONE_CORE
from reindex import generate_corpus
from scale import PeakRss

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
PODS = (1, 8, 32, 128)


def _run(args: list[str], env: dict[str, str], log: Path) -> dict[str, float]:
    """One `lorehouse` run in a child process: its wall time and peak memory."""
    command = [str(Path(sys.executable).parent / "lorehouse"), *args]
    started = time.perf_counter()
    with log.open("a") as output:
        child = subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=output, stderr=output)
        sampler = PeakRss(child.pid)
        code = child.wait()
        peak, peak_pss = sampler.stop()
    if code != 0:
        raise SystemExit(f"`lorehouse {' '.join(args)}` failed ({code}); see {log}")
    return {
        "wall_seconds": round(time.perf_counter() - started, 1),
        "peak_rss_mib": round(peak / 2**20, 1),
        "peak_pss_mib": round(peak_pss / 2**20, 1),
    }


def _documents_by_partition(data_dir: Path) -> dict[str, int]:
    digests = json.loads((data_dir / "partitions" / "inventory" / "digests.json").read_text())
    return {key: int(value.split(":", 1)[0]) for key, value in digests["digests"].items()}


def _one_edit(
    data_dir: Path, source: Path, key: str, env: dict[str, str], log: Path
) -> dict[str, Any]:
    """Edits one Markdown document of partition `key` (a sentence appended), takes the
    inventory again and reruns the partition: each run's wall time and peak memory."""
    import duckdb

    from lorehouse.stores.partitions import bucket_of_key, bucket_sql

    partitions = int(env["LOREHOUSE_INDEX_PARTITIONS"])
    with duckdb.connect(str(data_dir / "lorehouse.duckdb"), read_only=True) as connection:
        found = connection.execute(
            "SELECT rel_path FROM documents_raw WHERE file_type = 'md' AND "
            f"{bucket_sql('doc_id', partitions)} = ? ORDER BY rel_path LIMIT 1",
            [bucket_of_key(key)],
        ).fetchone()
    if found is None:
        raise SystemExit(f"no Markdown document in partition {key}")
    path = source / found[0]
    edits = path.read_text().count("Edited for the freshness bench") + 1
    with path.open("a") as document:
        document.write(f"\n\nEdited for the freshness bench, edit {edits}.\n")
    inventory = _run(["materialize", "--select", "raw_documents"], env, log)
    rerun = _run(["materialize", "--partitions", key], env, log)
    row = {"partition": key, "document": found[0], "inventory": inventory, "partition_run": rerun}
    print(json.dumps({"one_edit": row}), file=sys.stderr)
    return row


def projection(
    inventory_seconds: float, seconds_per_document: float, documents: int, partitions: int
) -> dict[int, float]:
    """Hours for the inventory and every partition on N pods, partitions of equal size."""
    per_partition = seconds_per_document * documents / partitions
    return {
        pods: round((inventory_seconds + math.ceil(partitions / pods) * per_partition) / 3600, 2)
        for pods in PODS
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=256)
    parser.add_argument("--limit", type=int, default=3, help="partitions to build")
    parser.add_argument(
        "--concurrency", type=int, default=1, help="partition runs at once, one core each"
    )
    parser.add_argument("--workdir", type=Path, required=True, help="kept: resumes from here")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--edit", action="store_true", help="then rerun the first partition after one edit"
    )
    args = parser.parse_args()

    from lorehouse.offline import apply_offline_environment
    from lorehouse.stores.partitions import partition_keys

    apply_offline_environment()
    workdir: Path = args.workdir
    source, data_dir, log = workdir / "corpus", workdir / "data", workdir / "runs.log"
    done_path, state_path = workdir / "partitions.jsonl", workdir / "state.json"
    workdir.mkdir(parents=True, exist_ok=True)
    state = json.loads(state_path.read_text()) if state_path.exists() else {}
    if "generated" not in state:
        started = time.perf_counter()
        generate_corpus(source, args.documents)
        state["generated"] = round(time.perf_counter() - started, 1)
        state_path.write_text(json.dumps(state))
    env = {
        **os.environ,
        **ONE_CORE,
        "LOREHOUSE_SOURCE_URI": str(source),
        "LOREHOUSE_DATA_DIR": str(data_dir),
        "LOREHOUSE_INDEX_PARTITIONS": str(args.partitions),
        "DAGSTER_HOME": str(data_dir / "dagster_home"),
    }
    (data_dir / "dagster_home").mkdir(parents=True, exist_ok=True)
    if "inventory" not in state:
        state["inventory"] = _run(["materialize", "--select", "raw_documents"], env, log)
        state_path.write_text(json.dumps(state))
        print(f"inventory: {state['inventory']}", file=sys.stderr)
    counts = _documents_by_partition(data_dir)
    done = (
        [json.loads(line) for line in done_path.read_text().splitlines()]
        if (done_path.exists())
        else []
    )
    todo = [
        key
        for key in partition_keys(args.partitions)[: args.limit]
        if key not in {row["partition"] for row in done}
    ]
    recorded = threading.Lock()

    def build(key: str) -> None:
        row = {"partition": key, "documents": counts[key], "concurrency": args.concurrency}
        row |= _run(["materialize", "--partitions", key], env, log)
        row["seconds_per_document"] = round(row["wall_seconds"] / max(1, row["documents"]), 3)
        with recorded:
            with done_path.open("a") as out:
                out.write(json.dumps(row) + "\n")
            done.append(row)
            print(json.dumps(row), file=sys.stderr)

    # Partition runs write only their own files, so several run at once, as pods would.
    with ThreadPoolExecutor(max_workers=args.concurrency) as pool:
        for finished in [pool.submit(build, key) for key in todo]:
            finished.result()

    per_document = statistics.median(row["seconds_per_document"] for row in done)
    result: dict[str, Any] = {
        "documents": args.documents,
        "partitions": args.partitions,
        "generate_seconds": state["generated"],
        "inventory": state["inventory"],
        "partitions_built": done,
        "median_seconds_per_document": per_document,
        "projected_hours_by_pods": projection(
            state["inventory"]["wall_seconds"], per_document, args.documents, args.partitions
        ),
    }
    if args.edit:
        result["one_edit"] = _one_edit(
            data_dir, source, partition_keys(args.partitions)[0], env, log
        )
    if args.json:
        write_raw_numbers(args.json, {"machine": machine_info(["dagster", "lancedb"]), **result})
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
