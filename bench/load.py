"""HTTP load: many concurrent clients on /v1/search and /v1/ask of a running `lorehouse serve`.

Why this benchmark exists: the other benchmarks time one call at a time inside one process. A
deployment answers many callers at once, through uvicorn, FastAPI's thread pool, one shared
ONNX embedder and one LanceDB connection, and that is where a service shows what it is made
of: requests queue behind each other, some fail only under concurrency, memory grows with
traffic. This script starts the real server as a subprocess, keeps a fixed number of clients
busy against it for a fixed time, and reports throughput, latency percentiles, every error by
kind, and the server's resident memory sampled every 0.5 s, so a reader sees how fast it
answers, whether it fails, and that its memory stays bounded.

Two phases, one after the other, on the same server:

* search: `--search-clients` (default 50) clients POST /v1/search {"query": q, "top_k": 8}
  for `--search-seconds` (default 60);
* ask: `--ask-clients` (default 10) clients POST /v1/ask {"question": q} for `--ask-seconds`
  (default 60).

Each client sends a request, waits for the response, records its latency and outcome, and sends
the next one until the phase ends: a closed loop, so throughput is what the server sustains
with that many callers, not an offered rate. Questions cycle through the golden set (`--golden`,
default evals/golden/sample_corpus.jsonl), each client starting at a different one. Before the first
phase a few untimed requests warm the server up and prove that both endpoints answer.

An error is a non-200 status, a transport error, a request taking longer than
`--request-timeout` (default 60 s), or a 200 whose body lacks the fields of the endpoint's
response ("hits"; "answer" and "citations"). No request starts after the phase's end; requests
in flight then get `--drain-seconds` to finish, after which they are cancelled and reported as
unfinished, not as errors. Throughput counts the responses received within the phase's
nominal duration; the latency percentiles are those of every 200 response of the phase.

The load generator shares the machine with the server. Latency is measured in the client, from
the call to the parsed response, so it includes any time the load generator itself waited for
the CPU; on a machine busy with other work, read it beside the CPU shares of server and load
generator and the load average printed with the results.

The server runs with default settings: offline, no API keys, extractive answers (no LLM).
LOREHOUSE_* variables of the calling shell are not passed on, and server and materialization
run in a scratch folder, so no `.env` is read either.

Run from the repository root:

    .venv/bin/python bench/load.py [--data-dir DIR] [--copies 1] [--copies-dir DIR]
        [--golden FILE] [--workers 1] [--server-env NAME=VALUE] [--search-clients 50]
        [--search-seconds 60] [--ask-clients 10] [--ask-seconds 60] [--client aiohttp]
        [--log-dir DIR] [--json OUT]

Without --data-dir the bundled sample corpus is first materialized into a temporary folder
with `lorehouse materialize`. Exit status: 0 when every request succeeded, 1 when any failed
(or a phase completed no request), 2 when the server could not be started or the hard
deadline (`--max-seconds`) was reached.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import aiohttp
import httpx
import psutil
import pyarrow as pa
import pyarrow.compute as pc
from machine import machine_info, write_raw_numbers  # bench/machine.py, beside this script

REPO_ROOT = Path(__file__).resolve().parent.parent
# The interpreter running this script sits beside the `lorehouse` entry point of its venv.
BIN = Path(sys.executable).parent
GOLDEN_SET = REPO_ROOT / "evals" / "golden" / "sample_corpus.jsonl"
DAGSTER_CONFIG = REPO_ROOT / "pipelines" / "dagster.yaml"
LIBRARIES = [
    "fastapi",
    "starlette",
    "uvicorn",
    "anyio",
    "lancedb",
    "duckdb",
    "onnxruntime",
    "tokenizers",
    "httpx",
]
# What the Makefile exports: third-party libraries stay off the network.
OFFLINE_ENVIRONMENT = {
    "HF_HUB_OFFLINE": "1",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "UNSTRUCTURED_DISABLE_NOTICE": "1",
    "DO_NOT_TRACK": "1",
    "DAGSTER_DISABLE_TELEMETRY": "1",
}
RSS_INTERVAL_SECONDS = 0.5
MIB = 1024 * 1024
SEARCH_TOP_K = 8
# Untimed requests before the first phase: opens the LanceDB files, fills caches.
WARM_UP_SEARCHES = 3
WARM_UP_ASKS = 1
# Between phases the server gets this long to finish work of cancelled requests.
SETTLE_SECONDS = 30.0
SETTLE_CPU_SHARE = 0.10  # of one core
ERROR_EXAMPLE_CHARS = 300
# An access log line of uvicorn: 127.0.0.1:40000 - "POST /v1/search HTTP/1.1" 200 OK
ACCESS_LINE = re.compile(r'"(?P<method>[A-Z]+) (?P<path>\S+) HTTP/[\d.]+" (?P<status>\d{3})')


class BenchError(RuntimeError):
    """The benchmark cannot run (store, server start-up); the message says why."""


class HardDeadline(BaseException):
    """Raised in the main thread when --max-seconds is over."""


# --------------------------------------------------------------------------------------------
# Store and server processes.
# --------------------------------------------------------------------------------------------


def subprocess_env(data_dir: Path, **extra: str) -> dict[str, str]:
    """The calling environment minus LOREHOUSE_* settings, plus the data dir and offline switches.

    Everything else a Lorehouse process reads keeps its default: offline, no API keys file,
    extractive answers.
    """
    env = {name: value for name, value in os.environ.items() if not name.startswith("LOREHOUSE_")}
    env.update(OFFLINE_ENVIRONMENT)
    env["LOREHOUSE_DATA_DIR"] = str(data_dir.resolve())
    env.update(extra)
    return env


def tail(path: Path, chars: int = 4000) -> str:
    if not path.exists():
        return ""
    return path.read_text(encoding="utf-8", errors="replace")[-chars:]


def stop_process_group(process: subprocess.Popen[bytes], grace_seconds: float = 10.0) -> None:
    """SIGTERM to the process group we started, SIGKILL if it is still there after the grace."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(grace_seconds)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


def materialize_sample(
    data_dir: Path, workdir: Path, log_dir: Path, timeout_seconds: float
) -> float:
    """Runs `lorehouse materialize` on the bundled sample corpus into `data_dir`; seconds taken."""
    dagster_home = data_dir / "dagster_home"
    dagster_home.mkdir(parents=True, exist_ok=True)
    shutil.copy(DAGSTER_CONFIG, dagster_home / "dagster.yaml")
    log_path = log_dir / "materialize.log"
    started = time.perf_counter()
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [str(BIN / "lorehouse"), "materialize"],
            cwd=workdir,
            env=subprocess_env(data_dir, DAGSTER_HOME=str(dagster_home)),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            code = process.wait(timeout_seconds)
        except subprocess.TimeoutExpired:
            stop_process_group(process)
            raise BenchError(
                f"lorehouse materialize took more than {timeout_seconds:.0f} s:\n{tail(log_path)}"
            ) from None
    if code != 0:
        raise BenchError(f"lorehouse materialize failed (exit {code}):\n{tail(log_path)}")
    return time.perf_counter() - started


# Columns that identify a row; a copy gets them suffixed so every copy is a row of its own.
_IDENTITY_COLUMNS = ("chunk_id", "doc_id", "sentence_id")


def replicate_store(source: Path, target: Path, copies: int) -> int:
    """`target` becomes a store holding `copies` copies of every row of `source`'s LanceDB
    tables (chunks, sentence windows, token vectors, documents), the first under its own ids
    and each other under ids suffixed `~k`; the DuckDB file is copied as it is. Returns the
    chunk count.

    A store of 10,000 chunks then costs a minute instead of embedding 10,000 chunks, with the
    vectors, texts and access lists of real documents. Search over it costs what search over
    that many distinct chunks costs; each hit has `copies - 1` twins, which changes nothing
    a load test measures.
    """
    from lorehouse.settings import Settings
    from lorehouse.stores.lance_index import (
        ChunkIndex,
        DocumentIndex,
        SentenceIndex,
        TokenVectorIndex,
    )
    from lorehouse.wiring import Lorehouse

    target.mkdir(parents=True, exist_ok=True)
    shutil.copy(source / "lorehouse.duckdb", target / "lorehouse.duckdb")
    chunks = ChunkIndex(str(source / "lancedb"))
    # Written as the deployment writes it: LanceDB's ANN index from its threshold on where
    # the deployment's engine reads it.
    copied = ChunkIndex(
        str(target / "lancedb"),
        Settings().ann_index_min_rows,
        neighbours=Lorehouse(Settings()).neighbour_search(),
    )
    for table_type in (ChunkIndex, DocumentIndex, SentenceIndex, TokenVectorIndex):
        original = chunks.sibling(table_type)
        if not original.exists():
            continue
        rows = original.table().to_arrow()
        replica = copied.sibling(table_type)
        # Streamed, one copy at a time and one commit: a million chunks with their windows
        # and token vectors are far more than memory holds at once.
        replica.replace_all(
            pa.RecordBatchReader.from_batches(
                rows.schema,
                (batch for k in range(copies) for batch in _copy_of(rows, k).to_batches()),
            )
        )
        replica.refresh_indexes()
    return copied.count()


def warm_snapshot(data_dir: Path, log_dir: Path) -> float:
    """One search in a process of its own, which writes the store's shared search snapshot
    (rows, vectors, postings, ANN index) as a deployment's first search does; the server's
    workers then map it. Without this the warm-up requests would wait for that first load
    (minutes at a million chunks) and time out. Returns its seconds."""
    log_path = log_dir / "warm-snapshot.log"
    started = time.perf_counter()
    with log_path.open("wb") as log:
        code = subprocess.run(
            [str(BIN / "lorehouse"), "search", "warm up", "--top-k", "1"],
            env=subprocess_env(data_dir),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            check=False,
        ).returncode
    if code != 0:
        raise BenchError(f"the first search of the copied store failed:\n{tail(log_path)}")
    return time.perf_counter() - started


def _copy_of(rows: pa.Table, k: int) -> pa.Table:
    """Copy `k` of `rows`: the first under its own ids, each other's suffixed `~k`."""
    if k == 0:
        return rows
    for name in _IDENTITY_COLUMNS:
        if name in rows.column_names:
            index = rows.schema.get_field_index(name)
            suffixed = pc.binary_join_element_wise(rows[name], f"~{k}", "")
            rows = rows.set_column(index, rows.schema.field(index), suffixed)
    return rows


def stored_chunks(data_dir: Path) -> int:
    """Chunks in the store's LanceDB index (the server's health check does not count them)."""
    from lorehouse.stores.lance_index import ChunkIndex

    return ChunkIndex(str(data_dir / "lancedb")).count()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    base_url: str
    stdout_path: Path
    stderr_path: Path


def start_server(
    data_dir: Path, workdir: Path, log_dir: Path, workers: int = 1, **settings: str
) -> Server:
    """`lorehouse serve` on 127.0.0.1 and a free port, run in `workdir`, logging to `log_dir`.

    `workers` server processes share the port (uvicorn's supervisor spawns them); `settings`
    are extra environment variables (LOREHOUSE_API_KEYS_FILE=..., say).

    Files, not pipes: under load uvicorn logs a line per request, and a pipe nobody reads
    would fill up and stall the server.
    """
    port = free_port()
    stdout_path, stderr_path = log_dir / "server.stdout.log", log_dir / "server.stderr.log"
    with stdout_path.open("wb") as stdout, stderr_path.open("wb") as stderr:
        process = subprocess.Popen(
            [
                *(str(BIN / "lorehouse"), "serve", "--host", "127.0.0.1", "--port", str(port)),
                *("--workers", str(workers)),
            ],
            cwd=workdir,
            env=subprocess_env(data_dir, **settings),
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
        )
    return Server(process, f"http://127.0.0.1:{port}", stdout_path, stderr_path)


def wait_until_healthy(server: Server, timeout_seconds: float) -> dict[str, Any]:
    """GET /healthz until it answers 200; the server's stderr in the error otherwise."""
    deadline = time.monotonic() + timeout_seconds
    last = "no answer"
    while True:
        try:
            response = httpx.get(f"{server.base_url}/healthz", timeout=5)
            if response.status_code == 200:
                return dict(response.json())
            last = f"HTTP {response.status_code}: {response.text[:500]}"
        except httpx.TransportError as error:
            last = f"{type(error).__name__}: {error}"
        code = server.process.poll()
        if code is not None:
            raise BenchError(
                f"lorehouse serve exited with {code} before /healthz answered 200:\n"
                f"{tail(server.stderr_path)}"
            )
        if time.monotonic() > deadline:
            raise BenchError(
                f"/healthz did not answer 200 within {timeout_seconds:.0f} s (last: {last}); "
                f"server stderr:\n{tail(server.stderr_path)}"
            )
        time.sleep(0.5)


def server_access_counts(server: Server) -> dict[str, int]:
    """Responses the server logged, by "METHOD path status" (warm-up requests included).

    Uvicorn logs a request when its response starts, so a request the client saw fail without
    a matching line here never got an answer from the application.
    """
    counts: Counter[str] = Counter()
    for line in tail(server.stdout_path, chars=500_000_000).splitlines():
        match = ACCESS_LINE.search(line)
        if match:
            counts[f"{match['method']} {match['path']} {match['status']}"] += 1
    return dict(counts.most_common())


def server_log_problems(server: Server) -> dict[str, Any]:
    """Tracebacks and ERROR/WARNING lines the server logged, with the first traceback."""
    text = tail(server.stderr_path, chars=50_000_000)
    lines = text.splitlines()
    first = next((i for i, line in enumerate(lines) if line.startswith("Traceback")), None)
    return {
        "tracebacks": sum(1 for line in lines if line.startswith("Traceback")),
        "error_lines": sum(1 for line in lines if line.startswith("ERROR")),
        "warning_lines": sum(1 for line in lines if line.startswith("WARNING")),
        "first_traceback": "\n".join(lines[max(0, first - 2) : first + 60])
        if first is not None
        else None,
    }


# --------------------------------------------------------------------------------------------
# Server resources: RSS and CPU time of the server process and its children.
# --------------------------------------------------------------------------------------------


class ResourceMonitor:
    """Samples the server's RSS (children included) every RSS_INTERVAL_SECONDS in a thread."""

    def __init__(self, pid: int) -> None:
        self.process = psutil.Process(pid)
        self.samples: list[tuple[float, int]] = []  # (time.monotonic(), RSS bytes)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def measure(self) -> tuple[int, float]:
        """RSS bytes and CPU seconds (user + system) of the server and its children, now."""
        rss, cpu = 0, 0.0
        try:
            processes = [self.process, *self.process.children(recursive=True)]
        except psutil.Error:
            return 0, 0.0
        for process in processes:
            with contextlib.suppress(psutil.Error):
                rss += process.memory_info().rss
                times = process.cpu_times()
                cpu += times.user + times.system
                if process is self.process:  # children it has already waited for
                    cpu += times.children_user + times.children_system
        return rss, cpu

    def sample(self) -> int:
        rss, _ = self.measure()
        if rss:
            self.samples.append((time.monotonic(), rss))
        return rss

    def _run(self) -> None:
        while not self._stop.wait(RSS_INTERVAL_SECONDS):
            self.sample()

    def start(self) -> None:
        self.sample()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def peak_between(self, start: float, end: float) -> int:
        return max((rss for t, rss in self.samples if start <= t <= end), default=0)

    def series_between(self, start: float, end: float) -> list[tuple[float, float]]:
        """(seconds after `start`, MiB) of the samples in the window."""
        return [
            (round(t - start, 2), round(rss / MIB, 1))
            for t, rss in self.samples
            if start <= t <= end
        ]

    async def settle(self, timeout_seconds: float = SETTLE_SECONDS) -> float:
        """Waits until the server is idle (under SETTLE_CPU_SHARE of a core); seconds waited."""
        started = time.monotonic()
        _, before = self.measure()
        while time.monotonic() - started < timeout_seconds:
            await asyncio.sleep(RSS_INTERVAL_SECONDS)
            _, now = self.measure()
            if now - before < SETTLE_CPU_SHARE * RSS_INTERVAL_SECONDS:
                break
            before = now
        return time.monotonic() - started


# --------------------------------------------------------------------------------------------
# Load phases.
# --------------------------------------------------------------------------------------------


@dataclass
class PhaseSpec:
    name: str
    path: str
    clients: int
    seconds: float
    bodies: list[dict[str, Any]]
    required_keys: tuple[str, ...]


@dataclass
class Outcome:
    """One completed request: when it was sent (s after the phase start), latency, outcome."""

    sent: float
    ms: float
    kind: str  # "ok", "HTTP <code>", an exception class name, or "missing <key>"


@dataclass
class PhaseResult:
    name: str
    endpoint: str
    clients: int
    seconds: float
    elapsed_seconds: float
    requests: int
    ok: int
    errors: int
    unfinished: int
    requests_in_window: int
    throughput: float
    latency_ms: dict[str, float | None]
    error_kinds: dict[str, int]
    error_examples: dict[str, str]
    rss_start_mib: float
    rss_peak_mib: float
    rss_end_mib: float
    server_cpu_seconds: float
    load_generator_cpu_seconds: float
    settle_seconds: float
    rss_samples_mib: list[tuple[float, float]] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def server_cpu_ms_per_request(self) -> float | None:
        """Server CPU per response (drain included): what a request costs whatever else the
        machine is doing, where req/s moves with the neighbours; cores / this = capacity."""
        return 1000 * self.server_cpu_seconds / self.requests if self.requests else None


def percentile(ordered: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile of sorted values; None without values."""
    if not ordered:
        return None
    return ordered[max(1, math.ceil(q / 100 * len(ordered))) - 1]


# The clients. The load generator shares the machine's cores with the server, so every
# millisecond of CPU it spends on a request is taken from the server being measured.
class HttpxClient:
    """httpx.AsyncClient: what most Python callers of the API use. Its HTTP handling runs in
    Python, so it takes more of the cores it shares with the server than aiohttp's compiled
    parser (docs/experiments/2026-11-28-lighter-load-generator.md)."""

    label = "httpx.AsyncClient"

    def __init__(self, base_url: str, connections: int, timeout_seconds: float) -> None:
        # One connection per client. Idle connections keep httpx's default expiry (5 s), as
        # any Python client of the API would: a connection the server closes while a request
        # is being written to it fails that request, and such a failure counts as an error.
        limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
        # httpx's own timeouts are per read; asyncio.timeout bounds the whole request.
        self._client = httpx.AsyncClient(
            base_url=base_url, limits=limits, timeout=httpx.Timeout(timeout_seconds)
        )

    async def post(self, path: str, body: dict[str, Any]) -> tuple[int, str]:
        response = await self._client.post(path, json=body)
        return response.status_code, response.text

    async def close(self) -> None:
        await self._client.aclose()


class AiohttpClient:
    """aiohttp's ClientSession, whose HTTP parser is compiled: the default, because it leaves
    the server more of the shared cores than httpx does."""

    label = "aiohttp.ClientSession"

    def __init__(self, base_url: str, connections: int, timeout_seconds: float) -> None:
        self._base_url = base_url
        # One connection per client, idle ones expiring after 5 s as httpx's do.
        connector = aiohttp.TCPConnector(
            limit=connections, limit_per_host=connections, keepalive_timeout=5
        )
        self._session = aiohttp.ClientSession(
            connector=connector, timeout=aiohttp.ClientTimeout(total=timeout_seconds)
        )

    async def post(self, path: str, body: dict[str, Any]) -> tuple[int, str]:
        async with self._session.post(self._base_url + path, json=body) as response:
            return response.status, await response.text()

    async def close(self) -> None:
        await self._session.close()


CLIENTS = {"aiohttp": AiohttpClient, "httpx": HttpxClient}


@contextlib.asynccontextmanager
async def open_client(
    kind: str, base_url: str, connections: int, timeout_seconds: float
) -> AsyncIterator[HttpxClient | AiohttpClient]:
    """The load generator's HTTP client of `kind` (see CLIENTS), closed on exit."""
    client = CLIENTS[kind](base_url, connections, timeout_seconds)
    try:
        yield client
    finally:
        await client.close()


def classify(status: int, text: str, required_keys: tuple[str, ...]) -> str:
    if status != 200:
        return f"HTTP {status}"
    try:
        payload = json.loads(text)
    except ValueError:
        return "invalid JSON"
    if not isinstance(payload, dict):
        return "invalid JSON"
    missing = [key for key in required_keys if key not in payload]
    return f"missing {','.join(missing)}" if missing else "ok"


async def run_phase(
    spec: PhaseSpec, base_url: str, monitor: ResourceMonitor, args: argparse.Namespace
) -> PhaseResult:
    """`spec.clients` closed-loop clients for `spec.seconds`, then the drain, then cancel."""
    outcomes: list[Outcome] = []
    examples: dict[str, str] = {}
    settle_seconds = await monitor.settle()
    rss_start, cpu_start = monitor.measure()
    load_cpu_start = time.process_time()
    async with open_client(args.client, base_url, spec.clients, args.request_timeout) as client:
        started = time.monotonic()
        stop_at = started + spec.seconds

        async def one_client(index: int) -> None:
            turn = 0
            while time.monotonic() < stop_at:
                body = spec.bodies[(index + turn * spec.clients) % len(spec.bodies)]
                turn += 1
                sent = time.monotonic()
                try:
                    async with asyncio.timeout(args.request_timeout):
                        status, text = await client.post(spec.path, body)
                    kind = classify(status, text, spec.required_keys)
                    if kind != "ok" and kind not in examples:
                        examples[kind] = text[:ERROR_EXAMPLE_CHARS]
                except (httpx.HTTPError, aiohttp.ClientError, TimeoutError, OSError) as error:
                    kind = type(error).__name__
                    examples.setdefault(kind, str(error)[:ERROR_EXAMPLE_CHARS])
                done = time.monotonic()
                outcomes.append(Outcome(sent - started, 1000 * (done - sent), kind))

        tasks = [asyncio.create_task(one_client(i)) for i in range(spec.clients)]
        done, pending = await asyncio.wait(tasks, timeout=spec.seconds + args.drain_seconds)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=10)
        ended = time.monotonic()
        for task in done:
            error = task.exception()
            if error is not None:  # not a failed request (those are counted): a bug here
                raise error
    rss_end = monitor.sample()
    _, cpu_end = monitor.measure()

    ok_ms = sorted(o.ms for o in outcomes if o.kind == "ok")
    kinds = Counter(o.kind for o in outcomes if o.kind != "ok")
    in_window = sum(1 for o in outcomes if o.sent + o.ms / 1000 <= spec.seconds)
    return PhaseResult(
        name=spec.name,
        endpoint=f"POST {spec.path}",
        clients=spec.clients,
        seconds=spec.seconds,
        elapsed_seconds=ended - started,
        requests=len(outcomes),
        ok=len(ok_ms),
        errors=sum(kinds.values()),
        unfinished=len(pending),
        requests_in_window=in_window,
        throughput=in_window / spec.seconds,
        latency_ms={
            "p50": percentile(ok_ms, 50),
            "p95": percentile(ok_ms, 95),
            "p99": percentile(ok_ms, 99),
            "max": ok_ms[-1] if ok_ms else None,
            "mean": sum(ok_ms) / len(ok_ms) if ok_ms else None,
        },
        error_kinds=dict(kinds.most_common()),
        error_examples=examples,
        rss_start_mib=rss_start / MIB,
        rss_peak_mib=max(monitor.peak_between(started, ended), rss_end) / MIB,
        rss_end_mib=rss_end / MIB,
        server_cpu_seconds=cpu_end - cpu_start,
        load_generator_cpu_seconds=time.process_time() - load_cpu_start,
        settle_seconds=settle_seconds,
        rss_samples_mib=monitor.series_between(started, ended),
        outcomes=outcomes,
    )


async def warm_up(
    base_url: str, search: PhaseSpec, ask: PhaseSpec, timeout: float, client_kind: str
) -> None:
    """A few untimed requests; a failing endpoint stops the benchmark before the load."""
    async with open_client(client_kind, base_url, 1, timeout) as client:
        calls = [(search, search.bodies[i % len(search.bodies)]) for i in range(WARM_UP_SEARCHES)]
        calls += [(ask, ask.bodies[i % len(ask.bodies)]) for i in range(WARM_UP_ASKS)]
        for spec, body in calls:
            if spec.clients == 0:
                continue
            status, text = await client.post(spec.path, body)
            kind = classify(status, text, spec.required_keys)
            if kind != "ok":
                raise BenchError(f"warm-up POST {spec.path}: {kind}: {text[:1000]}")


async def run_load(
    server: Server, monitor: ResourceMonitor, phases: list[PhaseSpec], args: argparse.Namespace
) -> list[PhaseResult]:
    await warm_up(server.base_url, phases[0], phases[1], args.request_timeout, args.client)
    results = []
    for spec in phases:
        if spec.clients == 0 or spec.seconds <= 0:
            continue
        print(
            f"{spec.name}: {spec.clients} clients, POST {spec.path}, {spec.seconds:g} s",
            file=sys.stderr,
            flush=True,
        )
        result = await run_phase(spec, server.base_url, monitor, args)
        print(
            f"  {result.requests} requests, {result.errors} errors, {result.unfinished} unfinished",
            file=sys.stderr,
            flush=True,
        )
        results.append(result)
    return results


# --------------------------------------------------------------------------------------------
# Reporting.
# --------------------------------------------------------------------------------------------


def _server_env_text(settings: dict[str, str]) -> str:
    return "".join(f", {name}={value}" for name, value in settings.items())


def golden_questions(path: Path) -> list[str]:
    questions = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            question = json.loads(line).get("question")
            if question and question not in questions:
                questions.append(question)
    if not questions:
        raise BenchError(f"no questions in {path}")
    return questions


def _ms(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


def report_markdown(
    info: dict[str, Any],
    results: list[PhaseResult],
    context: dict[str, Any],
    args: argparse.Namespace,
) -> str:
    libs = ", ".join(f"{name} {v}" for name, v in info["libraries"].items())
    load = context["load_average_start"]
    lines = [
        "## HTTP load (lorehouse serve)",
        "",
        "```",
        f"Machine: {info['cpu_count']} cores (os.cpu_count), Python {info['python']}, "
        f"{info['platform']}",
        f"Libraries: {libs}",
        f"Server: lorehouse serve --workers {args.workers}, default settings (offline, no API "
        f"keys, extractive answers){_server_env_text(args.server_env)}; {context['chunks']} "
        f"chunks in {context['data_dir']}"
        + (f" ({args.copies} copies of each row)" if args.copies > 1 else ""),
        f"Load: closed-loop {CLIENTS[args.client].label} clients in one process on the same "
        "machine, "
        f"{len(context['questions'])} questions of {args.golden.name}, search "
        f"top_k={SEARCH_TOP_K}, "
        f"request timeout {args.request_timeout:g} s, drain {args.drain_seconds:g} s",
        f"Load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; server RSS after "
        f"start-up {context['rss_after_startup_mib']:.0f} MiB",
        "```",
        "",
        "| phase | endpoint | clients | seconds | requests | req/s | p50 ms | p95 ms | p99 ms "
        "| max ms | errors | unfinished | server CPU | server CPU ms/request | peak RSS MiB "
        "| RSS at end MiB |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lat = r.latency_ms
        cpu_share = r.server_cpu_seconds / max(r.elapsed_seconds, 1e-9)
        lines.append(
            f"| {r.name} | {r.endpoint} | {r.clients} | {r.seconds:g} | {r.requests:,} | "
            f"{r.throughput:.1f} | {_ms(lat['p50'])} | {_ms(lat['p95'])} | {_ms(lat['p99'])} | "
            f"{_ms(lat['max'])} | {r.errors} | {r.unfinished} | {cpu_share:.2f} cores | "
            f"{_ms(r.server_cpu_ms_per_request)} | {r.rss_peak_mib:.0f} | {r.rss_end_mib:.0f} |"
        )
    lines += [
        "",
        "req/s: responses received within the phase's nominal seconds, divided by them. "
        "Latencies: every 200 response of the phase, drain included. Server CPU: CPU seconds of "
        "the server process / phase wall time, and / responses (the figure other work on the "
        f"machine moves least). RSS: server process and children, sampled every "
        f"{RSS_INTERVAL_SECONDS:g} s.",
    ]
    for r in results:
        load_share = r.load_generator_cpu_seconds / max(r.elapsed_seconds, 1e-9)
        lines.append(
            f"\n{r.name}: {r.elapsed_seconds:.1f} s wall with the drain, "
            f"{r.requests_in_window:,} responses within {r.seconds:g} s; load generator CPU "
            f"{load_share:.2f} cores; RSS {r.rss_start_mib:.0f} MiB at the start."
        )
        for kind, count in r.error_kinds.items():
            example = " ".join(r.error_examples.get(kind, "").split())[:160]
            lines.append(f"- error {kind}: {count} ({example})")
    if any(r.errors or r.unfinished for r in results):
        logged = ", ".join(f"{k}: {v:,}" for k, v in context["server_access_log"].items())
        lines.append(f"\nServer access log (warm-up included): {logged or 'no lines'}.")
    problems = context["server_log"]
    if problems["tracebacks"] or problems["error_lines"]:
        lines.append(
            f"\nServer log: {problems['tracebacks']} tracebacks, {problems['error_lines']} ERROR "
            "lines (first traceback in the JSON output)."
        )
    requests = sum(r.requests for r in results)
    errors = sum(r.errors for r in results)
    unfinished = sum(r.unfinished for r in results)
    peak = max((r.rss_peak_mib for r in results), default=0.0)
    end = results[-1].rss_end_mib if results else 0.0
    lines.append(
        f"\nOverall: {requests:,} requests, {errors} errors, {unfinished} unfinished; server RSS "
        f"{context['rss_after_startup_mib']:.0f} MiB after start-up, peak {peak:.0f} MiB, "
        f"{end:.0f} MiB at the end; {'PASS' if errors == 0 else 'FAIL'}"
    )
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Entry point.
# --------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="an already materialized Lorehouse data directory; default: materialize the "
        "bundled sample corpus into a temporary one",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="server processes (`lorehouse serve --workers`); each loads the embedder and "
        "opens the stores itself",
    )
    parser.add_argument(
        "--copies",
        type=int,
        default=1,
        help="serve a store with every indexed row copied this many times under new ids "
        "(a larger store without embedding again); default 1",
    )
    parser.add_argument(
        "--copies-dir",
        type=Path,
        default=None,
        help="where the copied store is written and kept, reused by a later run with the same "
        "--copies (a million chunks take a minute to copy and minutes to load first); "
        "default: a temporary folder",
    )
    parser.add_argument(
        "--golden",
        type=Path,
        default=GOLDEN_SET,
        help="JSONL golden set whose questions the clients ask (default: the sample corpus's)",
    )
    parser.add_argument(
        "--server-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting for the server, e.g. LOREHOUSE_SEARCH_QUERY_CACHE_SIZE=0 (repeatable)",
    )
    parser.add_argument("--search-clients", type=int, default=50)
    parser.add_argument("--search-seconds", type=float, default=60.0)
    parser.add_argument(
        "--search-modes",
        default="",
        help="comma-separated modes (vector,bm25,hybrid) cycled through the search bodies; "
        "default: the server's default mode",
    )
    parser.add_argument("--ask-clients", type=int, default=10)
    parser.add_argument("--ask-seconds", type=float, default=60.0)
    parser.add_argument("--request-timeout", type=float, default=60.0, help="seconds per request")
    parser.add_argument(
        "--client",
        choices=sorted(CLIENTS),
        default="aiohttp",
        help="the load generator's HTTP client (httpx costs about 3x the CPU a request)",
    )
    parser.add_argument(
        "--drain-seconds",
        type=float,
        default=30.0,
        help="after a phase, how long requests in flight may finish before they are cancelled",
    )
    parser.add_argument(
        "--startup-seconds", type=float, default=180.0, help="deadline for /healthz == 200"
    )
    parser.add_argument(
        "--materialize-seconds",
        type=float,
        default=1800.0,
        help="deadline for materializing the sample corpus (without --data-dir)",
    )
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=None,
        help="hard deadline from the server start to the end; default: start-up + phases + "
        "drains + settling + 60 s",
    )
    parser.add_argument(
        "--log-dir",
        type=Path,
        default=None,
        help="keep the server's logs (server.stdout.log: one access line per request; "
        "server.stderr.log) and materialize.log here; default: a temporary folder",
    )
    parser.add_argument("--json", type=Path, default=None, help="also write raw numbers here")
    args = parser.parse_args(argv)
    if args.workers < 1 or args.copies < 1:
        parser.error("--workers and --copies must be >= 1")
    if any("=" not in item for item in args.server_env):
        parser.error("--server-env takes NAME=VALUE")
    args.server_env = dict(item.split("=", 1) for item in args.server_env)
    for name in ("search_clients", "ask_clients"):
        if getattr(args, name) < 0:
            parser.error(f"--{name.replace('_', '-')} must be >= 0")
    if args.request_timeout <= 0 or args.drain_seconds < 0:
        parser.error("--request-timeout must be > 0 and --drain-seconds >= 0")
    if args.max_seconds is None:
        args.max_seconds = (
            args.startup_seconds
            + args.search_seconds
            + args.ask_seconds
            + 2 * (args.drain_seconds + SETTLE_SECONDS + 10)
            + (WARM_UP_SEARCHES + WARM_UP_ASKS) * args.request_timeout
            + 60
        )
    return args


def phase_specs(args: argparse.Namespace, questions: list[str]) -> list[PhaseSpec]:
    modes = [mode.strip() for mode in args.search_modes.split(",") if mode.strip()]
    search_bodies: list[dict[str, Any]] = []
    for question in questions:
        if modes:
            search_bodies += [{"query": question, "top_k": SEARCH_TOP_K, "mode": m} for m in modes]
        else:
            search_bodies.append({"query": question, "top_k": SEARCH_TOP_K})
    return [
        PhaseSpec(
            "search",
            "/v1/search",
            args.search_clients,
            args.search_seconds,
            search_bodies,
            ("hits",),
        ),
        PhaseSpec(
            "ask",
            "/v1/ask",
            args.ask_clients,
            args.ask_seconds,
            [{"question": question} for question in questions],
            ("answer", "citations"),
        ),
    ]


def _raise_hard_deadline(signum: int, frame: FrameType | None) -> None:
    raise HardDeadline


def _raise_system_exit(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def benchmark(args: argparse.Namespace, data_dir: Path, workdir: Path, log_dir: Path) -> int:
    questions = golden_questions(args.golden)
    phases = phase_specs(args, questions)
    context: dict[str, Any] = {
        "data_dir": str(data_dir),
        "questions": questions,
        "load_average_start": os.getloadavg(),
    }
    # The hard deadline: a timer thread signals this process, which interrupts the main
    # thread in whatever it is doing (a real signal also cuts a blocking system call short).
    watchdog = threading.Timer(args.max_seconds, os.kill, (os.getpid(), signal.SIGUSR1))
    watchdog.daemon = True
    previous_usr1 = signal.signal(signal.SIGUSR1, _raise_hard_deadline)
    wall_started = time.perf_counter()
    server = start_server(data_dir, workdir, log_dir, workers=args.workers, **args.server_env)
    monitor: ResourceMonitor | None = None
    results: list[PhaseResult] = []
    try:
        watchdog.start()
        print(f"waiting for {server.base_url}/healthz", file=sys.stderr, flush=True)
        health = wait_until_healthy(server, args.startup_seconds)
        context["startup_seconds"] = time.perf_counter() - wall_started
        context["healthz"] = health
        context["chunks"] = f"{stored_chunks(data_dir):,}"
        monitor = ResourceMonitor(server.process.pid)
        monitor.start()
        context["rss_after_startup_mib"] = monitor.samples[-1][1] / MIB if monitor.samples else 0
        results = asyncio.run(run_load(server, monitor, phases, args))
    except HardDeadline:
        print(f"hard deadline of {args.max_seconds:.0f} s reached; stopping", file=sys.stderr)
        return 2
    finally:
        watchdog.cancel()
        if monitor is not None:
            monitor.stop()
        stop_process_group(server.process)
        signal.signal(signal.SIGUSR1, previous_usr1)
    context["server_log"] = server_log_problems(server)
    context["server_access_log"] = server_access_counts(server)
    context["load_average_end"] = os.getloadavg()
    info = machine_info(LIBRARIES)
    markdown = report_markdown(info, results, context, args)
    print(markdown)
    wall = time.perf_counter() - wall_started
    print(f"\nWall time: {wall:.0f} s (server start-up {context['startup_seconds']:.1f} s)")
    if args.json is not None:
        write_raw_numbers(
            args.json,
            {
                "machine": info,
                "args": {k: str(v) for k, v in vars(args).items()},
                "context": context,
                "wall_seconds": wall,
                "phases": [_phase_json(r) for r in results],
                "errors": sum(r.errors for r in results),
                "unfinished": sum(r.unfinished for r in results),
                "markdown": markdown,
            },
        )
    if any(r.errors for r in results):
        return 1
    if any(r.ok == 0 for r in results):
        print("a phase completed no successful request", file=sys.stderr)
        return 1
    return 0


def _phase_json(result: PhaseResult) -> dict[str, Any]:
    data = asdict(result)
    data["server_cpu_ms_per_request"] = result.server_cpu_ms_per_request
    outcomes = data.pop("outcomes")
    data["failed_requests"] = [o for o in outcomes if o["kind"] != "ok"]
    # Every completed request: seconds after the phase start it was sent, ms, outcome.
    data["request_log"] = [[round(o["sent"], 3), round(o["ms"], 2), o["kind"]] for o in outcomes]
    return data


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # SIGTERM ends the run through the finally blocks, so the server never outlives it.
    signal.signal(signal.SIGTERM, _raise_system_exit)
    with tempfile.TemporaryDirectory(prefix="lorehouse-bench-load-") as scratch:
        workdir = Path(scratch)
        log_dir = args.log_dir or workdir
        log_dir.mkdir(parents=True, exist_ok=True)
        data_dir = args.data_dir
        try:
            if data_dir is None:
                data_dir = workdir / "data"
                print("materializing the sample corpus...", file=sys.stderr, flush=True)
                seconds = materialize_sample(data_dir, workdir, log_dir, args.materialize_seconds)
                print(f"materialized in {seconds:.0f} s", file=sys.stderr, flush=True)
            elif not (data_dir / "lorehouse.duckdb").exists():
                raise BenchError(f"no materialized store in {data_dir} (lorehouse.duckdb missing)")
            if args.copies > 1:
                copied = args.copies_dir or workdir / "copies"
                marker = copied / f".copies-{args.copies}"
                if not marker.exists():
                    print(f"copying every row {args.copies} times...", file=sys.stderr, flush=True)
                    shutil.rmtree(copied, ignore_errors=True)
                    chunks = replicate_store(data_dir, copied, args.copies)
                    marker.touch()
                    print(f"{chunks:,} chunks in {copied}", file=sys.stderr, flush=True)
                seconds = warm_snapshot(copied, log_dir)
                print(f"the search snapshot loaded in {seconds:.0f} s", file=sys.stderr, flush=True)
                data_dir = copied
            return benchmark(args, data_dir.resolve(), workdir, log_dir.resolve())
        except BenchError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2


if __name__ == "__main__":
    sys.exit(main())
