"""What a full offline build costs against the bare model on the same corpus's chunk texts.

The embedding model is the one cost a build cannot avoid: every chunk text goes through it
once. Everything else (parsing, chunking, enrichment, sentence windows, token vectors,
document profiles, writes, merges) is overhead on top of it, and this script says how much,
as a ratio measured in the same run on the same machine:

* build: `lorehouse materialize --select "not group:evals"` of a source folder into fresh
  stores, in a child process, as a user runs it. Its wall time, and the seconds of its steps
  from the first partitioned stage to the end of `search_index` (process start and imports
  excluded: a partition run of hundreds of documents does not notice them);
* raw model: in a fresh child process, the bundled model's `embed(texts, batch_size=64)`
  over the distinct chunk texts (`text_embed`) the build stored, after one untimed warm-up
  call.

With `--also-without-windows` the same corpus is built a second time with
`LOREHOUSE_INDEX_SENTENCE_WINDOWS=false`, against the same raw-model figure.

Run from the repository root (the default source is the Sourcegraph handbook of the shared
corpus; about 2 minutes on 2 cores, 3 with the second build):

    .venv/bin/python bench/build_cost.py [--source DIR] [--partitions 1] \
        [--also-without-windows] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from machine import machine_info, write_raw_numbers  # bench/machine.py, beside this script

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SOURCE = REPO_ROOT.parent / "shared" / "corpus" / "handbook-sourcegraph" / "content"
SELECTION = "not group:evals"
#: The steps a build's time is counted over, in the order they run.
BUILD_STEPS = (
    "parsed_documents",
    "chunks",
    "enriched_chunks",
    "chunk_embeddings",
    "merged_partitions",
    "document_features",
    "search_index",
)

_RAW_MODEL = """
import json, sys, time
import duckdb
from lorehouse.wiring import Lorehouse
with duckdb.connect(sys.argv[1], read_only=True) as db:
    texts = sorted({row[0] for row in db.sql("select text_embed from chunks").fetchall()})
embedder = Lorehouse().bundled_model()
embedder.embed(texts[:64], batch_size=64)
started = time.perf_counter()
embedder.embed(texts, batch_size=64)
print(json.dumps({"texts": len(texts), "seconds": time.perf_counter() - started}))
"""


def build(
    source: Path, data_dir: Path, partitions: int, log: Path, windows: bool = True
) -> dict[str, Any]:
    """One `lorehouse materialize` in a child process: wall time and each step's span."""
    home = data_dir / "dagster_home"
    home.mkdir(parents=True)
    env = {
        **os.environ,
        "LOREHOUSE_SOURCE_URI": str(source),
        "LOREHOUSE_DATA_DIR": str(data_dir),
        "LOREHOUSE_INDEX_PARTITIONS": str(partitions),
        "DAGSTER_HOME": str(home),
    }
    if not windows:
        env["LOREHOUSE_INDEX_SENTENCE_WINDOWS"] = "false"
    command = [str(Path(sys.executable).parent / "lorehouse"), "materialize", "--select", SELECTION]
    started = time.perf_counter()
    with log.open("w") as output:
        code = subprocess.call(command, cwd=REPO_ROOT, env=env, stdout=output, stderr=output)
    wall = time.perf_counter() - started
    if code != 0:
        raise SystemExit(f"materialize of {source} failed ({code}); see {log}")
    spans = _step_spans(home)
    missing = [step for step in BUILD_STEPS if step not in spans]
    if missing:
        raise SystemExit(f"the build ran no step for {', '.join(missing)}; see {log}")
    return {
        "wall_seconds": round(wall, 2),
        "steps_seconds": round(spans["search_index"][1] - spans["parsed_documents"][0], 2),
        "step_seconds": {step: round(end - start, 2) for step, (start, end) in spans.items()},
    }


def _step_spans(home: Path) -> dict[str, tuple[float, float]]:
    """When each build step started and ended, from the run's own Dagster instance."""
    import dagster as dg

    with dg.DagsterInstance.from_config(str(home)) as instance:
        run = instance.get_runs(limit=1)[0]
        spans: dict[str, list[float]] = {}
        for record in instance.all_logs(run.run_id):
            event = record.dagster_event
            if event is None or event.step_key not in BUILD_STEPS:
                continue
            if event.event_type_value == "STEP_START":
                spans[event.step_key] = [record.timestamp, record.timestamp]
            elif event.event_type_value == "STEP_SUCCESS":
                spans[event.step_key][1] = record.timestamp
    return {step: (start, end) for step, (start, end) in spans.items()}


def raw_model(data_dir: Path) -> dict[str, Any]:
    """The bundled model alone over the build's distinct chunk texts, in a fresh process."""
    output = subprocess.check_output(
        [sys.executable, "-c", _RAW_MODEL, str(data_dir / "lorehouse.duckdb")],
        cwd=REPO_ROOT,
        env=os.environ,
        text=True,
    )
    found = json.loads(output.strip().splitlines()[-1])
    return {"texts": found["texts"], "seconds": round(found["seconds"], 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--partitions", type=int, default=1, help="LOREHOUSE_INDEX_PARTITIONS")
    parser.add_argument(
        "--also-without-windows",
        action="store_true",
        help="build a second time without sentence windows",
    )
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    if not args.source.is_dir():
        raise SystemExit(f"no source folder at {args.source}")
    with tempfile.TemporaryDirectory(prefix="lorehouse-build-cost-") as work:
        data_dir = Path(work) / "data"
        built = build(args.source.resolve(), data_dir, args.partitions, Path(work) / "build.log")
        model = raw_model(data_dir)
        without = None
        if args.also_without_windows:
            without = build(
                args.source.resolve(),
                Path(work) / "without-windows",
                args.partitions,
                Path(work) / "build-without-windows.log",
                windows=False,
            )
    result = {
        "source": str(args.source),
        "partitions": args.partitions,
        "build": built,
        "raw_model": model,
        "steps_vs_raw": round(built["steps_seconds"] / model["seconds"], 2),
        "wall_vs_raw": round(built["wall_seconds"] / model["seconds"], 2),
        "machine": machine_info(
            ["dagster", "onnxruntime", "lancedb", "duckdb", "scikit-learn", "yake"]
        ),
    }
    if without:
        result["build_without_windows"] = without
        result["steps_vs_raw_without_windows"] = round(
            without["steps_seconds"] / model["seconds"], 2
        )
    print(json.dumps(result, indent=2))
    if args.json:
        write_raw_numbers(args.json, result)


if __name__ == "__main__":
    main()
