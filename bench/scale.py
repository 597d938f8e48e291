"""How a build grows with the corpus: wall time per stage, peak memory, store sizes, search.

For each size a corpus of generated policy documents (bench/reindex.py's generator, fixed
seed) is indexed into fresh stores by `lorehouse materialize` in its own process, as a user
or the nightly job would run it, then indexed again with no change. For each run:

* wall time, and each stage's seconds from its asset metadata (read from the run's Dagster
  instance afterwards);
* peak memory of the run's whole process tree (the run and its parse workers), sampled
  every 100 ms: summed RSS, and summed PSS, which counts pages the forked workers share once;
* the DuckDB file and the LanceDB folder sizes;
* after the full build, search p50 over generated questions (default hybrid retrieval).

Offline defaults: extractive enrichment, the bundled MiniLM int8 embedder. Run from the
repository root (sizes take roughly 0.3 s per document for a full build on 2 cores):

    .venv/bin/python bench/scale.py --sizes 2000 20000 [--json bench/scale.json]

A build longer than the machine stays up can be finished with `--resume --workdir DIR`: the
corpus and stores in DIR are kept, the interrupted run's time (its Dagster run, from start to
last event) and memory (every sample is appended to `memory-N.tsv` in DIR as it is taken)
are read back, and the rest of the build runs as the crash-safe reindex would run it after a
crash. The full build's figures are then the two runs' sums and peaks.

A build may also be paused, to give the machine to other work for a while: stop the whole
process tree, this script included (`kill -STOP`), and continue it later (`kill -CONT`). The
memory samples then stop too, and every gap of over PAUSE_GAP_SECONDS between two samples is
time the build did not run: it is taken out of the wall time and of the stage it fell in, and
reported as `paused_seconds`.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psutil
from machine import machine_info, write_raw_numbers  # bench/machine.py, beside this script
from reindex import _CITIES, _TOPICS, STAGES, generate_corpus

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

#: The indexing stages and their checks; the eval assets score the sample corpus only.
SELECTION = "not group:evals"
QUERIES = 50
#: Samples come every 0.1-1 s (reading a large tree's memory maps takes a while), so a gap
#: this long between two of them means the build and its sampler were stopped.
PAUSE_GAP_SECONDS = 10.0


def paused_seconds(times: Sequence[float], start: float, end: float) -> float:
    """Seconds of [start, end] inside gaps of over PAUSE_GAP_SECONDS between sample `times`
    (sorted): how long a build was stopped in that span."""
    return sum(
        max(0.0, min(after, end) - max(before, start))
        for before, after in itertools.pairwise(times)
        if after - before > PAUSE_GAP_SECONDS
    )


class PeakRss:
    """Samples the memory of a process and its descendants until stopped: summed RSS, and
    summed PSS, which counts pages shared by forked workers once (the memory the run costs).
    """

    def __init__(self, pid: int, interval: float = 0.1, log: Path | None = None) -> None:
        self.peak = 0
        self.peak_pss = 0
        #: (wall clock time, PSS bytes) of every sample, to find each stage's peak.
        self.samples: list[tuple[float, int]] = []
        self._root = psutil.Process(pid)
        self._interval = interval
        #: Every sample as `time<TAB>rss<TAB>pss` (bytes), written as it is taken, so the
        #: memory of a run that is killed before it ends is still known (`--resume`).
        self._log = log.open("a", buffering=1) if log else None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._done.is_set():
            total = pss = 0
            try:
                for process in [self._root, *self._root.children(recursive=True)]:
                    try:
                        memory = process.memory_full_info()
                    except (psutil.NoSuchProcess, psutil.ZombieProcess):
                        continue
                    total += memory.rss
                    pss += getattr(memory, "pss", memory.rss)
            except psutil.NoSuchProcess:
                return
            self.peak = max(self.peak, total)
            self.peak_pss = max(self.peak_pss, pss)
            now = time.time()
            self.samples.append((now, pss))
            if self._log:
                self._log.write(f"{now:.2f}\t{total}\t{pss}\n")
            self._done.wait(self._interval)

    def stop(self) -> tuple[int, int]:
        self._done.set()
        self._thread.join()
        if self._log:
            self._log.close()
        return self.peak, self.peak_pss


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def materialize(
    source: Path, data_dir: Path, log: Path, memory_log: Path | None = None
) -> dict[str, Any]:
    """One `lorehouse materialize` of the indexing stages in a child process."""
    env = {
        **os.environ,
        "LOREHOUSE_SOURCE_URI": str(source),
        "LOREHOUSE_DATA_DIR": str(data_dir),
        "DAGSTER_HOME": str(data_dir / "dagster_home"),
    }
    (data_dir / "dagster_home").mkdir(parents=True, exist_ok=True)
    command = [str(Path(sys.executable).parent / "lorehouse"), "materialize", "--select", SELECTION]
    started, started_at = time.perf_counter(), time.time()
    with log.open("a") as output:
        child = subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=output, stderr=output)
        sampler = PeakRss(child.pid, log=memory_log)
        code = child.wait()
        peak, peak_pss = sampler.stop()
    wall = time.perf_counter() - started
    if code != 0:
        raise SystemExit(f"materialize of {source} failed ({code}); see {log}")
    metadata, spans = _latest_run(data_dir / "dagster_home")
    times = [at for at, _ in sampler.samples]
    paused = paused_seconds(times, started_at, started_at + wall)
    stage_peaks = {
        label: round(
            max(
                (pss for at, pss in sampler.samples if spans[asset][0] <= at <= spans[asset][1]),
                default=0,
            )
            / 2**20,
            1,
        )
        for asset, label in STAGES.items()
        if asset in spans
    }
    return {
        "stage_peak_pss_mib": stage_peaks,
        # Whether a stage's memory ramps with the documents it has done or stays level.
        "stage_pss_series_mib": {
            label: _series(sampler.samples, spans[asset])
            for asset, label in STAGES.items()
            if asset in spans
        },
        "wall_seconds": round(wall - paused, 2),
        "paused_seconds": round(paused, 1),
        "peak_rss_mib": round(peak / 2**20, 1),
        "peak_pss_mib": round(peak_pss / 2**20, 1),
        "stage_seconds": {
            label: round(
                metadata.get(asset, {}).get("seconds", 0)
                - (paused_seconds(times, *spans[asset]) if asset in spans else 0.0),
                1,
            )
            for asset, label in STAGES.items()
        },
        "chunks": metadata["chunks"]["dagster/row_count"],
        "embedded": metadata["chunk_embeddings"]["embedded"],
        "duckdb_mib": round(_size(data_dir / "lorehouse.duckdb") / 2**20, 1),
        "lancedb_mib": round(_size(data_dir / "lancedb") / 2**20, 1),
    }


def _series(
    samples: list[tuple[float, int]], span: tuple[float, float], points: int = 20
) -> list[float]:
    """The peak PSS (MiB) of each of `points` equal slices of a stage's time."""
    start, end = span
    inside = [(at, pss) for at, pss in samples if start <= at <= end]
    if not inside or end <= start:
        return []
    width = (end - start) / points
    peaks = [0] * points
    for at, pss in inside:
        slot = min(points - 1, int((at - start) / width))
        peaks[slot] = max(peaks[slot], pss)
    return [round(peak / 2**20, 1) for peak in peaks if peak]


def _latest_run(
    home: Path,
) -> tuple[dict[str, dict[str, Any]], dict[str, tuple[float, float]]]:
    """The stages' metadata, and when each stage's step started and ended, from the instance."""
    import dagster as dg

    with dg.DagsterInstance.from_config(str(home)) as instance:
        run = instance.get_runs(limit=1)[0]
        spans = _step_spans(instance.all_logs(run.run_id))
        found = {}
        for asset in [*STAGES, "chunks", "chunk_embeddings"]:
            event = instance.get_latest_materialization_event(dg.AssetKey(asset))
            if event and event.asset_materialization:
                found[asset] = {k: v.value for k, v in event.asset_materialization.metadata.items()}
        return found, spans


def _step_spans(records: list[Any]) -> dict[str, tuple[float, float]]:
    """When each stage's step started and ended; a step that never ended ends at the run's
    last event (a run killed in the middle of it)."""
    spans: dict[str, list[float]] = {}
    for record in records:
        event = record.dagster_event
        if event is None or event.step_key not in STAGES:
            continue
        if event.event_type_value == "STEP_START":
            spans[event.step_key] = [record.timestamp, float("inf")]
        elif event.event_type_value in ("STEP_SUCCESS", "STEP_FAILURE"):
            spans.setdefault(event.step_key, [0.0, 0.0])[1] = record.timestamp
    last = records[-1].timestamp if records else 0.0
    return {step: (start, min(end, last)) for step, (start, end) in spans.items()}


def _memory_samples(memory_log: Path) -> list[tuple[float, int, int]]:
    """(time, RSS, PSS) of every sample `PeakRss` appended to a memory log."""
    if not memory_log.exists():
        return []
    rows = (line.split("\t") for line in memory_log.read_text().splitlines() if line)
    return [(float(at), int(rss), int(pss)) for at, rss, pss in rows]


def interrupted_runs(home: Path, memory_log: Path, margin: float = 60.0) -> dict[str, Any]:
    """What the build's runs that never finished cost: wall time from each run's first to
    its last event, each stage's time (both without the time they were paused), and the peak
    memory sampled while they ran (from `margin` seconds before the first event, when the
    process was importing, to as long after the last, when it was killed)."""
    import dagster as dg

    with dg.DagsterInstance.from_config(str(home)) as instance:
        runs = [r for r in instance.get_runs() if r.status != dg.DagsterRunStatus.SUCCESS]
        logs = [instance.all_logs(run.run_id) for run in runs]
    if not runs:
        raise SystemExit(f"nothing to resume: every run in {home} finished")
    samples = _memory_samples(memory_log)
    times = [at for at, _, _ in samples]
    windows = [(records[0].timestamp, records[-1].timestamp) for records in logs if records]
    paused = sum(paused_seconds(times, start, end) for start, end in windows)
    stage_seconds = dict.fromkeys(STAGES.values(), 0.0)
    stage_peaks = dict.fromkeys(STAGES.values(), 0)
    for records in logs:
        for step, (start, end) in _step_spans(records).items():
            label = STAGES[step]
            stage_seconds[label] += end - start - paused_seconds(times, start, end)
            inside = [pss for at, _, pss in samples if start <= at <= end]
            stage_peaks[label] = max(stage_peaks[label], *inside, 0)
    during = [
        (rss, pss)
        for at, rss, pss in samples
        if any(start - margin <= at <= end + margin for start, end in windows)
    ]
    return {
        "runs": len(runs),
        "wall_seconds": round(sum(end - start for start, end in windows) - paused, 2),
        "paused_seconds": round(paused, 1),
        "stage_seconds": {label: round(value, 1) for label, value in stage_seconds.items()},
        "stage_peak_pss_mib": {label: round(v / 2**20, 1) for label, v in stage_peaks.items()},
        "samples": len(during),
        "peak_rss_mib": round(max((rss for rss, _ in during), default=0) / 2**20, 1),
        "peak_pss_mib": round(max((pss for _, pss in during), default=0) / 2**20, 1),
    }


def finished_after(before: dict[str, Any], rest: dict[str, Any]) -> dict[str, Any]:
    """A full build that ran as interrupted runs and the run that finished it: times added
    up, memory the higher of the two."""
    total = dict(rest)
    total["wall_seconds"] = round(before["wall_seconds"] + rest["wall_seconds"], 2)
    total["paused_seconds"] = round(before["paused_seconds"] + rest["paused_seconds"], 1)
    total["stage_seconds"] = {
        label: round(before["stage_seconds"].get(label, 0.0) + seconds, 1)
        for label, seconds in rest["stage_seconds"].items()
    }
    total["stage_peak_pss_mib"] = {
        label: max(before["stage_peak_pss_mib"].get(label, 0.0), peak)
        for label, peak in rest["stage_peak_pss_mib"].items()
    }
    for key in ("peak_rss_mib", "peak_pss_mib"):
        total[key] = max(before[key], rest[key])
    total["interrupted"] = before
    total["finishing_run"] = rest
    return total


def search_p50(data_dir: Path, queries: int = QUERIES) -> float:
    """Median ms of the default search over generated questions, after one warm-up query."""
    from lorehouse.settings import Settings
    from lorehouse.wiring import Lorehouse

    retriever = Lorehouse(Settings(data_dir=data_dir)).retriever()
    rng = random.Random(5)
    questions = [
        f"Who approves {rng.choice(_TOPICS)} requests in {rng.choice(_CITIES)}?"
        for _ in range(queries + 1)
    ]
    retriever.search(questions[0])
    timings = []
    for question in questions[1:]:
        started = time.perf_counter()
        retriever.search(question)
        timings.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(timings), 2)


def measure(documents: int, workdir: Path, resume: bool = False) -> dict[str, Any]:
    source = workdir / f"corpus-{documents}"
    data_dir = workdir / f"data-{documents}"
    log = workdir / f"run-{documents}.log"
    memory_log = workdir / f"memory-{documents}.tsv"
    if resume:
        if not (data_dir / "dagster_home").exists():
            raise SystemExit(f"nothing to resume in {data_dir}: run without --resume first")
        before = interrupted_runs(data_dir / "dagster_home", memory_log)
        print(
            f"[{documents}] finishing the build ({before['runs']} run(s) cut short)...",
            file=sys.stderr,
        )
        full = finished_after(before, materialize(source, data_dir, log, memory_log))
    else:
        generate_corpus(source, documents)
        print(f"[{documents}] full build...", file=sys.stderr)
        full = materialize(source, data_dir, log, memory_log)
    full["search_p50_ms"] = search_p50(data_dir)
    print(f"[{documents}] no-change rerun...", file=sys.stderr)
    unchanged = materialize(source, data_dir, log, memory_log)
    return {
        "documents": documents,
        "full": full,
        "no_change": unchanged,
        "no_change_ratio": round(unchanged["wall_seconds"] / full["wall_seconds"], 4),
    }


def _table(results: list[dict[str, Any]]) -> str:
    lines = [
        "| documents | chunks | run | wall s | parse s | chunk s | enrich s | embed s "
        "| peak RSS MiB | peak PSS MiB | PSS MiB parse / chunk / enrich / embed "
        "| DuckDB MiB | LanceDB MiB | search p50 ms | ratio to full |",
        "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|",
    ]
    for result in results:
        for run in ("full", "no_change"):
            figures = result[run]
            stages = figures["stage_seconds"]
            ratio = figures["wall_seconds"] / result["full"]["wall_seconds"]
            lines.append(
                f"| {result['documents']} | {figures['chunks']} | {run.replace('_', ' ')} "
                f"| {figures['wall_seconds']:.1f} | {stages['parse']:.1f} "
                f"| {stages['chunk']:.1f} | {stages['enrich']:.1f} | {stages['embed']:.1f} "
                f"| {figures['peak_rss_mib']:.0f} | {figures['peak_pss_mib']:.0f} "
                f"| {' / '.join(f'{v:.0f}' for v in figures['stage_peak_pss_mib'].values())} "
                f"| {figures['duckdb_mib']:.1f} "
                f"| {figures['lancedb_mib']:.1f} | {figures.get('search_p50_ms', '')} "
                f"| {ratio:.3f} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000], help="corpus sizes")
    parser.add_argument("--json", type=Path, default=None, help="also write raw numbers here")
    parser.add_argument("--workdir", type=Path, default=None, help="keep corpora and stores here")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="finish builds cut short in --workdir, adding the cut runs' time and memory",
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        nargs="+",
        default=None,
        help="instead: partition runs side by side at each of these concurrencies "
        "(bench/partition_runs.py); one row per concurrency plus the unpartitioned reference",
    )
    parser.add_argument("--partitions", type=int, default=16, help="with --concurrency")
    args = parser.parse_args()
    if args.concurrency:
        _concurrency(args)
        return
    if args.resume and args.workdir is None:
        parser.error("--resume needs the --workdir of the build to finish")

    from lorehouse.offline import apply_offline_environment

    apply_offline_environment()
    results = []
    info = machine_info(["dagster", "lancedb", "duckdb", "onnxruntime"])
    with tempfile.TemporaryDirectory() as scratch:
        workdir = args.workdir or Path(scratch)
        workdir.mkdir(parents=True, exist_ok=True)
        for size in args.sizes:
            results.append(measure(size, workdir, resume=args.resume))
            print(_table(results), file=sys.stderr)
            if args.json:  # after every size: a large size may run for hours
                write_raw_numbers(args.json, {"machine": info, "results": results})
    print(_table(results))
    print(f"\n{info['cpu_count']} cores, Python {info['python']}, {info['platform']}")


def _concurrency(args: argparse.Namespace) -> None:
    """`--concurrency`: partition runs side by side, written as a list of rows."""
    import partition_runs  # bench/partition_runs.py, beside this script

    from lorehouse.offline import apply_offline_environment

    apply_offline_environment()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as scratch:
        workdir = args.workdir or Path(scratch)
        for size in args.sizes:
            source = workdir / f"corpus-{size}"
            generate_corpus(source, size)
            rows += partition_runs.measure(
                source, workdir / f"runs-{size}", size, args.concurrency, args.partitions
            )
            print(partition_runs.table(rows), file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    print(partition_runs.table(rows))


if __name__ == "__main__":
    main()
