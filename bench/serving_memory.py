"""Memory of API worker processes searching one index, in two scenarios.

Why: an API process's memory must not grow with the corpus beyond bounded caches, and
`lorehouse serve --workers N` processes on one host must not hold N copies of what a table
version's searches read. Both claims are about what `TableSnapshot` keeps per process, and
both are checked here the one way that cannot be fooled: processes started side by side,
each reading its own RSS, USS (memory only it holds), PSS (its share of what it maps with
others) and RssAnon (its own heap, which no other process can share) from /proc.

`--scenario vectors` (the default) writes a chunk table of random unit vectors and, with
and without the shared snapshot folder (`LOREHOUSE_SEARCH_SHARED_SNAPSHOT`, the default; see
`lorehouse.search.snapshot_files`), starts N workers that each score every row
(exact scoring: the most vector pages a search can touch). The ratio of the two modes is
the figure for the vectors alone.

    .venv/bin/python bench/serving_memory.py --rows 100000 300000 --workers 2 [--json F]

`--scenario hybrid` is what a worker holds serving a realistic chunk table: English-like
text of about 120 words a chunk from a Zipf-distributed vocabulary of 50,000 made-up
words, documents of 3-10 chunks with titles, headings and file names, access lists of six
groups (most rows public) and clustered unit vectors. The table is written in batches with
the vector index built between them as the embedding stage builds it
(`LanceTable.index_new_vectors`, then `refresh_indexes`), so from `--ann-min-rows` rows
searches go through the IVF_HNSW_SQ index like production. N workers open it as an API
process does, through the composition root (`Lorehouse.chunk_index`: the shared snapshot
folder, LanceDB's cache bounds and the environment's LOREHOUSE_ settings) and each runs a
warm-up and `--queries` hybrid searches of callers with different groups: the vector and
BM25 rankings under the real access clause, fused, the top rows read by key and their
passages looked up. Each reports its memory after the imports, after the warm-up and after
the queries, its latency per query and the recall@10 of its vector ranking against an exact
top 10 over the rows the caller may read. The generated table is kept under `--workdir`
(a million rows take minutes to write and index) and reused for the same row count.

    .venv/bin/python bench/serving_memory.py --scenario hybrid --rows 100000 1000000 \\
        --workers 2 --workdir DIR [--json F]
    .venv/bin/python bench/serving_memory.py --scenario hybrid --rows 20000 \\
        --ann-min-rows 5000 --queries 30 --workdir DIR      # a small try
"""

from __future__ import annotations

import argparse
import bisect
import ctypes
import faulthandler
import hashlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

# One BLAS thread per worker: the workers share the host's cores, and on a 2-core machine a
# second OpenBLAS thread woken for each product costs more than the product (bench/search.py).
# Set before numpy loads; an explicit value wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
import pyarrow as pa

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine import machine_info, write_raw_numbers  # noqa: E402

if TYPE_CHECKING:
    from lorehouse.search.snapshot import TableSnapshot
    from lorehouse.settings import Settings

DIMENSION = 384
SEARCHES = 50
BATCH = 50_000
LIBRARIES = ["lancedb", "pylance", "pyarrow", "numpy"]


def api_settings(
    folder: Path, ann_min_rows: int, shared: bool, engine: str | None = None
) -> Settings:
    """The Settings of an API process serving the database under `folder`: its defaults
    (the LanceDB cache bounds among them) and the environment's LOREHOUSE_ variables, with
    the data folder, the ANN threshold, whether the snapshot is shared and (when given) the
    ANN engine set here."""
    from lorehouse.settings import Settings

    chosen = {} if engine is None else {"search_ann_engine": engine}
    return Settings(
        data_dir=folder,
        lancedb_uri=str(folder / "lancedb"),
        ann_index_min_rows=ann_min_rows,
        search_shared_snapshot=shared,
        **chosen,
    )


def api_settings_shown(settings: Settings) -> dict[str, Any]:
    """The settings a worker's memory depends on, as this version names them."""
    names = (
        "ann_index_min_rows",
        "search_ann_engine",
        "search_ann_probes",
        "search_index_cache_mib",
        "search_metadata_cache_mib",
    )
    shown: dict[str, Any] = {n: getattr(settings, n) for n in names}
    folder = settings.snapshot_folder
    shown["snapshot_folder"] = None if folder is None else str(folder)
    return shown


# --------------------------------------------------------------------------------------------
# Scenario "vectors": random unit vectors, exact scoring, own copy against shared.
# --------------------------------------------------------------------------------------------


def generate(path: Path, rows: int) -> None:
    """A chunks table of `rows` random unit vectors, written in batches."""
    from lorehouse.stores.lance_index import ChunkIndex, chunk_schema

    index = ChunkIndex(str(path), ann_min_rows=10**9)
    schema = chunk_schema(DIMENSION, "bench-random")
    rng = np.random.default_rng(5)
    for start in range(0, rows, BATCH):
        count = min(BATCH, rows - start)
        vectors = rng.standard_normal((count, DIMENSION)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        ids = [f"c{i:08d}" for i in range(start, start + count)]
        columns = {
            "chunk_id": ids,
            "doc_id": [f"d{i // 3:08d}" for i in range(start, start + count)],
            "acl": [[] for _ in ids],
            "text_embed": ids,
            "embed_key": ids,
            "row_hash": ids,
        }
        arrays = [
            pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), DIMENSION)
            if field.name == "vector"
            else pa.array(columns.get(field.name, [None] * count), type=field.type)
            for field in schema
        ]
        index.upsert(pa.Table.from_arrays(arrays, schema=schema), [])


def worker(path: str, cache: str | None, ready: str, go: str) -> None:
    """One API worker: loads the snapshot, searches, reports its memory, waits to be told
    to stop (so every worker's pages are mapped while the others are measured)."""
    from lorehouse.stores.lance_index import ChunkIndex

    index = ChunkIndex(path, ann_min_rows=10**9, snapshot_folder=Path(cache) if cache else None)
    snapshot = index.snapshot()
    rng = np.random.default_rng(9)
    started = time.perf_counter()
    for _ in range(SEARCHES):
        snapshot.vector_ranking(rng.standard_normal(DIMENSION).astype(np.float32), None, 10)
    seconds = (time.perf_counter() - started) / SEARCHES
    Path(ready).write_text(json.dumps({"search_ms": round(seconds * 1000, 2)}))
    while not Path(go).exists():
        time.sleep(0.05)


def _memory(pid: int) -> dict[str, float]:
    """RSS, USS and PSS in MiB from /proc/PID/smaps_rollup."""
    fields: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name in ("Rss", "Pss", "Private_Clean", "Private_Dirty"):
            fields[name] = int(rest.split()[0]) / 1024
    return {
        "rss": round(fields["Rss"], 1),
        "pss": round(fields["Pss"], 1),
        "uss": round(fields["Private_Clean"] + fields["Private_Dirty"], 1),
    }


def measure(path: Path, cache: Path | None, workers: int, scratch: Path) -> dict[str, Any]:
    go = scratch / "go"
    go.unlink(missing_ok=True)
    readies = [scratch / f"ready-{n}" for n in range(workers)]
    for ready in readies:
        ready.unlink(missing_ok=True)
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--worker",
                str(path),
                str(cache or ""),
                str(ready),
                str(go),
            ]
        )
        for ready in readies
    ]
    try:
        while not all(ready.exists() for ready in readies):
            if any(p.poll() not in (None, 0) for p in processes):
                raise SystemExit("a worker failed")
            time.sleep(0.1)
        each = [_memory(p.pid) for p in processes]
        searches = [json.loads(ready.read_text())["search_ms"] for ready in readies]
    finally:
        go.write_text("")
        for process in processes:
            process.wait(timeout=60)
    return {
        "workers": each,
        "rss_total": round(sum(w["rss"] for w in each), 1),
        "pss_total": round(sum(w["pss"] for w in each), 1),
        "search_ms": searches,
    }


def run_vectors(args: argparse.Namespace) -> None:
    """The vectors scenario: each row size with an own copy per worker, then shared."""
    results = []
    with tempfile.TemporaryDirectory() as folder:
        scratch = Path(folder)
        for rows in args.rows or [100_000, 300_000]:
            path = scratch / f"lancedb-{rows}"
            generate(path, rows)
            for mode, cache in (("own copy", None), ("shared", scratch / f"cache-{rows}")):
                found = measure(path, cache, args.workers, scratch)
                results.append({"rows": rows, "mode": mode, **found})
                print(json.dumps(results[-1]), flush=True)
    print("| rows | vectors | RSS per worker MiB | USS per worker MiB | PSS all workers MiB |")
    print("|---:|---|---|---|---:|")
    for r in results:
        rss = " / ".join(f"{w['rss']:.0f}" for w in r["workers"])
        uss = " / ".join(f"{w['uss']:.0f}" for w in r["workers"])
        print(f"| {r['rows']:,} | {r['mode']} | {rss} | {uss} | {r['pss_total']:.0f} |")
    if args.json:
        machine = machine_info(["lancedb", "numpy"])
        write_raw_numbers(args.json, {"machine": machine, "scenario": "vectors", "runs": results})


# --------------------------------------------------------------------------------------------
# Scenario "hybrid": a realistic chunk table, the ANN index, access groups and BM25.
# --------------------------------------------------------------------------------------------

#: Bumped whenever what `hybrid_batches` writes changes: a cached table of another
#: generator is written again.
GENERATOR = "1"
MODEL_NAME = "bench-hybrid-clusters-384"
VOCABULARY_SIZE = 50_000
#: Words of a chunk's body: uniform in this range, about 120 on average.
CHUNK_WORDS = (80, 161)
#: Chunks of a document: uniform in this range.
DOCUMENT_CHUNKS = (3, 11)
CLUSTERS = 1000
TOPIC_WORDS_PER_CLUSTER = 8
#: Topic words put into each chunk body (and a query's text): what BM25 and the vectors
#: agree on, as a passage's subject words and its embedding do.
TOPIC_WORDS_PER_CHUNK = 6
GROUPS = ("finance", "legal", "hr", "engineering", "sales", "security")
#: Documents restricted to one of GROUPS; the others are public.
RESTRICTED_SHARE = 0.2
#: Groups of the callers the queries take turns with: every access mask differs, and the
#: BM25 statistics of each are those of its own scope.
CALLERS: tuple[tuple[str, ...], ...] = (
    (),
    ("engineering",),
    ("finance", "legal"),
    ("hr", "sales", "security"),
    GROUPS,
)
FOLDERS = 60
FILE_TYPES = (("md", 0.45), ("pdf", 0.3), ("docx", 0.15), ("html", 0.1))
TABLE_SHARE = 0.05
# Spreads relative to the unit-length centre, over sqrt(DIMENSION): a document's chunks are
# alike, chunks of one cluster related, as sentence vectors of one subject are.
DOCUMENT_SPREAD = 0.6
CHUNK_SPREAD = 0.8
QUERY_SPREAD = 0.8
#: What a hybrid search asks of each leg (`Settings.search_candidates`), shows, and the word
#: budget its passages are looked up with.
CANDIDATES = 50
TOP_K = 10
PASSAGE_WORDS = 300
#: Queries with an exact top 10 to measure recall by.
EXACT_QUERIES = 50
HYBRID_BATCH = 25_000
#: Query counts after which a worker reads its own memory, to see whether it grows.
CHECKPOINTS = (0.25, 0.5, 1.0)


@dataclass
class World:
    """What every table and query of a seed draws from: the vocabulary, its Zipf weights,
    the cluster centres and each cluster's topic words."""

    words: list[str]
    cdf: np.ndarray  # cumulative Zipf probability of each vocabulary rank
    centres: np.ndarray  # (CLUSTERS, DIMENSION) float32, unit rows
    topics: np.ndarray  # (CLUSTERS, TOPIC_WORDS_PER_CLUSTER) word indexes


def _unit(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return (matrix / np.clip(norms, 1e-12, None)).astype(np.float32)


def make_world(seed: int) -> World:
    """Made-up words of two to four syllables (so no corpus is needed, and any size of
    vocabulary can be had), ranked for Zipf weights; cluster centres and their topic words."""
    rng = np.random.default_rng([seed, 0])
    syllables = [c + v for c in "bcdfghjklmnprstvwz" for v in "aeiou"]
    words: set[str] = set()
    while len(words) < VOCABULARY_SIZE:
        lengths = rng.integers(2, 5, size=VOCABULARY_SIZE)
        picks = rng.integers(0, len(syllables), size=(VOCABULARY_SIZE, 4))
        for length, row in zip(lengths.tolist(), picks.tolist(), strict=True):
            words.add("".join(syllables[s] for s in row[:length]))
    ordered = sorted(words)[:VOCABULARY_SIZE]
    order = rng.permutation(len(ordered))  # rank order unrelated to spelling
    ranked = [ordered[i] for i in order.tolist()]
    weights = 1.0 / (np.arange(1, VOCABULARY_SIZE + 1, dtype=np.float64) + 2.7)
    cdf = np.cumsum(weights / weights.sum())
    centres = _unit(rng.standard_normal((CLUSTERS, DIMENSION), dtype=np.float32))
    # Topic words from below the most common words, so they carry BM25 weight.
    topics = rng.integers(500, VOCABULARY_SIZE, size=(CLUSTERS, TOPIC_WORDS_PER_CLUSTER))
    return World(ranked, cdf, centres, topics)


def _zipf(world: World, rng: np.random.Generator, count: int) -> np.ndarray:
    """`count` word indexes drawn by the vocabulary's Zipf weights."""
    picks = np.searchsorted(world.cdf, rng.random(count), side="right")
    return np.minimum(picks, VOCABULARY_SIZE - 1)


def _phrases(world: World, rng: np.random.Generator, lengths: np.ndarray) -> list[str]:
    """One Zipf phrase per length, its first letter in capitals (titles and headings)."""
    tokens = _zipf(world, rng, int(lengths.sum())).tolist()
    phrases, at = [], 0
    for length in lengths.tolist():
        phrases.append(" ".join(world.words[t] for t in tokens[at : at + length]).capitalize())
        at += length
    return phrases


def _digest(text: str, size: int = 32) -> str:
    """A hex digest as long as the pipeline's ids and hashes (chunk ids, embed keys)."""
    return hashlib.sha256(text.encode()).hexdigest()[:size]


def hybrid_batches(world: World, rows: int, batch_rows: int, seed: int) -> Iterator[pa.Table]:
    """The chunk table's rows, `batch_rows` at a time (whole documents; the last one cut
    where the table ends), so writing a million rows holds one batch of them."""
    from lorehouse.stores.lance_index import chunk_schema

    schema = chunk_schema(DIMENSION, MODEL_NAME)
    rng = np.random.default_rng([seed, 1])
    type_names = [name for name, _ in FILE_TYPES]
    type_shares = np.array([share for _, share in FILE_TYPES])
    written, document = 0, 0
    while written < rows:
        sizes: list[int] = []
        wanted = min(batch_rows, rows - written)
        while sum(sizes) < wanted:
            sizes.append(int(rng.integers(*DOCUMENT_CHUNKS)))
        sizes[-1] -= max(0, sum(sizes) - (rows - written))
        docs = len(sizes)
        count = sum(sizes)
        doc_of = np.repeat(np.arange(docs), sizes)
        position = np.concatenate([np.arange(size) for size in sizes])

        cluster = rng.integers(0, CLUSTERS, size=docs)
        restricted = rng.random(docs) < RESTRICTED_SHARE
        group = rng.integers(0, len(GROUPS), size=docs)
        file_type = rng.choice(len(type_names), size=docs, p=type_shares)
        folder = rng.integers(0, FOLDERS, size=docs)
        titles = _phrases(world, rng, rng.integers(3, 7, size=docs))
        summaries = _phrases(world, rng, rng.integers(20, 40, size=docs))
        keywords = world.topics[
            cluster[:, None], rng.integers(0, TOPIC_WORDS_PER_CLUSTER, (docs, 4))
        ]
        # Sections of one to four chunks; a heading each.
        section_length = rng.integers(1, 5, size=docs)
        section = position // section_length[doc_of]
        headings = _phrases(world, rng, rng.integers(2, 5, size=count))

        lengths = rng.integers(*CHUNK_WORDS, size=count)
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        tokens = _zipf(world, rng, int(lengths.sum()))
        slots = starts[:, None] + (rng.random((count, TOPIC_WORDS_PER_CHUNK)) * lengths[:, None])
        picks = rng.integers(0, TOPIC_WORDS_PER_CLUSTER, (count, TOPIC_WORDS_PER_CHUNK))
        tokens[slots.astype(np.int64).ravel()] = world.topics[
            cluster[doc_of][:, None], picks
        ].ravel()
        token_list = tokens.tolist()
        vocabulary = world.words
        bodies = [
            " ".join(vocabulary[t] for t in token_list[s : s + n]).capitalize() + "."
            for s, n in zip(starts.tolist(), lengths.tolist(), strict=True)
        ]
        del tokens, token_list

        offsets = rng.standard_normal((docs, DIMENSION), dtype=np.float32)
        offsets *= np.float32(DOCUMENT_SPREAD / math.sqrt(DIMENSION))
        noise = rng.standard_normal((count, DIMENSION), dtype=np.float32)
        noise *= np.float32(CHUNK_SPREAD / math.sqrt(DIMENSION))
        vectors = _unit(world.centres[cluster[doc_of]] + offsets[doc_of] + noise)
        del noise

        rel_paths, doc_ids, enriched = [], [], []
        for d in range(docs):
            slug = "-".join(titles[d].lower().split()[:4])
            rel_paths.append(
                f"folder-{int(folder[d]):02d}/{slug}-{document + d}.{type_names[file_type[d]]}"
            )
            doc_ids.append(_digest(rel_paths[-1], 20))
            words = ", ".join(vocabulary[k] for k in keywords[d].tolist())
            enriched.append(f"{titles[d]}\n{summaries[d]}.\n{words}")
        columns: dict[str, list[Any]] = {
            "doc_id": [doc_ids[d] for d in doc_of.tolist()],
            "title": [titles[d] for d in doc_of.tolist()],
            "rel_path": [rel_paths[d] for d in doc_of.tolist()],
            "source_uri": [f"s3://corpus/{rel_paths[d]}" for d in doc_of.tolist()],
            "file_type": [type_names[file_type[d]] for d in doc_of.tolist()],
            "position": position.tolist(),
            "acl": [[GROUPS[group[d]]] if restricted[d] else [] for d in doc_of.tolist()],
            "text_enriched": [enriched[d] for d in doc_of.tolist()],
            "is_table": (rng.random(count) < TABLE_SHARE).tolist(),
            "language": ["en"] * count,
        }
        pdf = [type_names[file_type[d]] == "pdf" for d in doc_of.tolist()]
        pages = (1 + position // 2).tolist()
        columns["page_start"] = [
            p if is_pdf else None for p, is_pdf in zip(pages, pdf, strict=True)
        ]
        columns["page_end"] = columns["page_start"]
        heading_paths, embed_texts, chat_texts, chunk_ids = [], [], [], []
        for row, d in enumerate(doc_of.tolist()):
            path = [titles[d], headings[row - int(position[row]) + int(section[row])]]
            crumb = " > ".join(path)
            heading_paths.append(path)
            embed_texts.append(f"{crumb}\n{bodies[row]}")
            chat_texts.append(f"{crumb}\n\n{bodies[row]}")
            chunk_ids.append(_digest(f"{doc_ids[d]}\x1f{position[row]}\x1f{chat_texts[-1]}"))
        columns.update(
            chunk_id=chunk_ids,
            heading_path=heading_paths,
            text_embed=embed_texts,
            text_chat=chat_texts,
            embed_key=[_digest(f"{MODEL_NAME}\x00{text}") for text in embed_texts],
            row_hash=[_digest(f"row\x00{key}") for key in chunk_ids],
        )
        del bodies
        # A column this script does not know yet is left empty rather than failing the run.
        arrays = [
            pa.FixedSizeListArray.from_arrays(
                pa.array(vectors.reshape(-1), pa.float32()), DIMENSION
            )
            if field.name == "vector"
            else pa.array(columns.get(field.name, [None] * count), type=field.type)
            for field in schema
        ]
        yield pa.Table.from_arrays(arrays, schema=schema)
        written += count
        document += docs


def build_hybrid_table(
    uri: Path, rows: int, ann_min_rows: int, batch_rows: int, seed: int
) -> dict[str, Any]:
    """Writes the table batch by batch, indexing between batches as the embedding stage
    does, then its final `refresh_indexes`. Returns what the build took and left.

    Batches after the first are appended rather than merged: every row is new, and a merge
    would join each batch against every row written before, for nothing. Old versions are
    not kept: nothing reads the table while it is written, and each compaction's would hold
    the disk of another copy for an hour.
    """
    from lorehouse.stores.lance_index import ChunkIndex, with_public_group

    index = ChunkIndex(str(uri), ann_min_rows=ann_min_rows, keep_versions=timedelta(0))
    world = make_world(seed)
    started = time.perf_counter()
    index_steps = 0
    for batch in hybrid_batches(world, rows, batch_rows, seed):
        if index.exists():
            index.table().add(with_public_group(batch))
        else:
            index.upsert(batch, [])
        index_steps += index.index_new_vectors()
        print(f"  {index.count():,} rows written", flush=True)
    states = index.refresh_indexes()
    return {
        "build_s": round(time.perf_counter() - started, 1),
        "index_steps": index_steps,
        "indexes": [
            {
                "name": s.name,
                "kind": s.kind,
                "indexed": s.indexed_rows,
                "unindexed": s.unindexed_rows,
            }
            for s in states
        ],
        "vector_index": any(s.columns == ["vector"] for s in states),
    }


def _stored_rows(uri: Path) -> int | None:
    """Rows of the chunks table at `uri`; None when there is none."""
    from lorehouse.search.tables import ChunkTable

    table = ChunkTable(str(uri))
    return table.table().count_rows() if table.exists() else None


def hybrid_table(workdir: Path, rows: int, args: argparse.Namespace) -> tuple[Path, dict]:
    """The folder of a generated table of `rows` rows under `workdir`, written unless one of
    the same rows, index threshold, generator and layout is there already."""
    from lorehouse.search.tables import TABLE_LAYOUT

    folder = workdir / f"hybrid-{rows}-ann{args.ann_min_rows}"
    uri = folder / "lancedb"
    marker = folder / "table.json"
    wanted = {
        "rows": rows,
        "ann_min_rows": args.ann_min_rows,
        "batch_rows": args.batch_rows,
        "seed": args.seed,
        "generator": GENERATOR,
        "layout": TABLE_LAYOUT,
    }
    if marker.exists():
        held = json.loads(marker.read_text())
        if {k: held.get(k) for k in wanted} == wanted and _stored_rows(uri) == rows:
            print(f"{rows:,} rows: reusing {folder}", flush=True)
            return uri, held
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    print(f"{rows:,} rows: writing {folder}", flush=True)
    built = {
        **wanted,
        **build_hybrid_table(uri, rows, args.ann_min_rows, args.batch_rows, args.seed),
    }
    marker.write_text(json.dumps(built, indent=2))
    return uri, built


def make_queries(world: World, count: int, seed: int) -> tuple[np.ndarray, list[dict]]:
    """Query vectors near a cluster's centre, with three of its topic words and a common
    word as their text, callers taking turns through CALLERS."""
    rng = np.random.default_rng([seed, 2])
    clusters = rng.integers(0, CLUSTERS, size=count)
    noise = rng.standard_normal((count, DIMENSION), dtype=np.float32)
    noise *= np.float32(QUERY_SPREAD / math.sqrt(DIMENSION))
    vectors = _unit(world.centres[clusters] + noise)
    queries = []
    for i, cluster in enumerate(clusters.tolist()):
        topic = rng.choice(world.topics[cluster], size=3, replace=False).tolist()
        common = int(_zipf(world, rng, 1)[0])
        words = " ".join(world.words[w] for w in [*topic, common])
        queries.append(
            {"text": f"how does {words} work", "groups": list(CALLERS[i % len(CALLERS)])}
        )
    return vectors, queries


def exact_top(uri: Path, vectors: np.ndarray, queries: Sequence[dict]) -> list[list[str]]:
    """Each query's exact TOP_K chunk ids by cosine among the rows its caller may read:
    the table read a batch at a time, the best so far kept per query."""
    from lorehouse.models import PUBLIC_GROUP
    from lorehouse.search.tables import ChunkTable

    dataset = ChunkTable(str(uri)).table().to_lance()
    callers = [frozenset([PUBLIC_GROUP, *q["groups"]]) for q in queries]
    distinct = sorted(set(callers), key=sorted)
    best_scores = np.full((len(queries), TOP_K), -np.inf, dtype=np.float32)
    best_ids = np.full((len(queries), TOP_K), "", dtype=object)
    for batch in dataset.to_batches(columns=["chunk_id", "acl", "vector"], batch_size=50_000):
        width = batch.schema.field("vector").type.list_size
        rows = _unit(batch["vector"].flatten().to_numpy(zero_copy_only=False).reshape(-1, width))
        acls = batch["acl"].to_pylist()
        allowed = {
            caller: np.fromiter((bool(caller.intersection(a or ())) for a in acls), bool, len(acls))
            for caller in distinct
        }
        scores = vectors @ rows.T  # (queries, batch rows)
        for q, caller in enumerate(callers):
            scores[q, ~allowed[caller]] = -np.inf
        ids = np.array(batch["chunk_id"].to_pylist(), dtype=object)
        take = min(TOP_K, scores.shape[1])
        top = np.argpartition(-scores, take - 1, axis=1)[:, :take]
        merged_scores = np.concatenate([best_scores, np.take_along_axis(scores, top, 1)], axis=1)
        merged_ids = np.concatenate([best_ids, ids[top]], axis=1)
        keep = np.argsort(-merged_scores, axis=1, kind="stable")[:, :TOP_K]
        best_scores = np.take_along_axis(merged_scores, keep, 1)
        best_ids = np.take_along_axis(merged_ids, keep, 1)
    return [
        [str(i) for i, s in zip(ids, scores, strict=True) if s > -np.inf]
        for ids, scores in zip(best_ids.tolist(), best_scores.tolist(), strict=True)
    ]


def _own_memory() -> dict[str, float]:
    """This process's RSS, USS (Private_Clean + Private_Dirty), PSS, RssAnon, RssFile and
    RssShmem in MiB, from /proc/self/smaps_rollup and /proc/self/status."""
    kib: dict[str, int] = {}
    for source in ("/proc/self/smaps_rollup", "/proc/self/status"):
        for line in Path(source).read_text().splitlines():
            name, _, rest = line.partition(":")
            parts = rest.split()
            if len(parts) == 2 and parts[1] == "kB":
                kib[name] = int(parts[0])
    found = {
        "rss": kib["Rss"],
        "uss": kib["Private_Clean"] + kib["Private_Dirty"],
        "pss": kib["Pss"],
        "rss_anon": kib["RssAnon"],
        "rss_file": kib["RssFile"],
        "rss_shmem": kib.get("RssShmem", 0),
    }
    if "Pss_Anon" in kib:
        found.update(pss_anon=kib["Pss_Anon"], pss_file=kib["Pss_File"])
    return {name: round(value / 1024, 1) for name, value in found.items()}


class _FileMappings:
    """The address ranges of this process's file mappings (/proc/self/maps), to tell a
    buffer in a mapped file (shared through the page cache) from one on the heap."""

    def __init__(self) -> None:
        ranges = []
        for line in Path("/proc/self/maps").read_text().splitlines():
            parts = line.split(maxsplit=5)
            if len(parts) == 6 and parts[5].startswith("/"):
                low, high = parts[0].split("-")
                ranges.append((int(low, 16), int(high, 16)))
        ranges.sort()
        self.starts = [low for low, _ in ranges]
        self.ends = [high for _, high in ranges]

    def holds(self, address: int) -> bool:
        place = bisect.bisect_right(self.starts, address) - 1
        return place >= 0 and address < self.ends[place]


def _buffers(value: Any) -> Iterator[tuple[int, int]]:
    """(address, size) of the memory a numpy array or an Arrow object points at."""
    if isinstance(value, np.ndarray):
        if value.size:
            yield value.ctypes.data, value.nbytes
    elif isinstance(value, pa.Table | pa.RecordBatch):
        for column in value.columns:
            yield from _buffers(column)
    elif isinstance(value, pa.ChunkedArray):
        for chunk in value.chunks:
            yield from _buffers(chunk)
    elif isinstance(value, pa.Array):
        for buffer in value.buffers():
            if buffer is not None and buffer.size:
                yield buffer.address, buffer.size


def _heap_bytes(value: Any, mappings: _FileMappings, seen: set[int], depth: int = 0) -> int:
    """Bytes of heap memory that numpy arrays and Arrow data reachable from `value` point at
    (mapped files left out, each buffer counted once), through containers and Lorehouse
    objects: best effort, as the snapshot's insides change; the walk only names them."""
    if id(value) in seen or depth > 6:
        return 0
    seen.add(id(value))
    if isinstance(value, np.ndarray | pa.Table | pa.RecordBatch | pa.ChunkedArray | pa.Array):
        total = 0
        for address, size in _buffers(value):
            if address not in seen and not mappings.holds(address):
                seen.add(address)
                total += size
        return total
    if isinstance(value, Mapping):
        items = list(value.items())[:10_000]
        return sum(
            _heap_bytes(k, mappings, seen, depth + 1) + _heap_bytes(v, mappings, seen, depth + 1)
            for k, v in items
        )
    if isinstance(value, list | tuple | set | frozenset):
        return sum(_heap_bytes(v, mappings, seen, depth + 1) for v in list(value)[:10_000])
    if type(value).__module__.startswith("lorehouse") and hasattr(value, "__dict__"):
        return sum(_heap_bytes(v, mappings, seen, depth + 1) for v in vars(value).values())
    return 0


def snapshot_held(snapshot: TableSnapshot) -> dict[str, float]:
    """MiB of heap memory each attribute of the snapshot holds (numpy arrays and Arrow
    data outside mapped files), largest first: what of a snapshot is this process's own,
    so what grows with the table per process has a name. Memory LanceDB keeps itself (its
    index and metadata caches) is no attribute; RssAnon minus these is the rest."""
    mappings = _FileMappings()
    seen = {id(snapshot)}  # reached again through what holds it: counted once, here
    held = {name: _heap_bytes(value, mappings, seen) for name, value in vars(snapshot).items()}
    return {
        name: round(size / 2**20, 2)
        for name, size in sorted(held.items(), key=lambda item: -item[1])
        if size >= 2**16
    }


def _trimmed_rss_anon() -> float | None:
    """RssAnon once the C allocator has handed its free pages back (glibc `malloc_trim`),
    or None where there is no glibc: what of a worker's own memory is held data, and what
    only the high-water mark of building something (postings, files) that was freed."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        return None
    return _own_memory()["rss_anon"]


def _hybrid_search(
    snapshot: TableSnapshot,
    vector: np.ndarray,
    text: str,
    groups: Sequence[str],
    fields: Mapping[str, float],
) -> tuple[list[str], dict[str, float]]:
    """One hybrid search as the Retriever makes it, snapshot calls only: both legs under the
    caller's access (BM25 scoped by it), fused, the shown rows read by key and their
    passages looked up and read. Returns the vector leg's ids and each step's ms."""
    from lorehouse.search.filters import access_clause, where_clause
    from lorehouse.search.hits import HIT_COLUMNS
    from lorehouse.search.ranking import RankingProfile

    ranking = RankingProfile()

    where, scope = where_clause(None, groups), access_clause(groups)
    times = [time.perf_counter()]
    by_vector = snapshot.vector_ranking(vector, where, CANDIDATES)
    times.append(time.perf_counter())
    by_text = snapshot.text_ranking(
        text,
        where,
        CANDIDATES,
        fields=fields,
        scope=scope,
        question_word_weight=ranking.question_word_weight,
    )
    times.append(time.perf_counter())
    fused = ranking.fuse([key for key, _ in by_vector], [key for key, _ in by_text])
    shown = sorted(fused, key=lambda key: (-fused[key], key))[:TOP_K]
    snapshot.rows_by_key(shown, where, HIT_COLUMNS)
    times.append(time.perf_counter())
    runs = snapshot.passages(PASSAGE_WORDS)
    members = [key for hit in shown for key in runs.get(hit, (hit,)) or (hit,)]
    snapshot.rows_by_key(members, where, HIT_COLUMNS)
    times.append(time.perf_counter())
    steps = ("vector", "bm25", "rows", "passages")
    return [key for key, _ in by_vector], {
        step: 1000 * (end - start)
        for step, start, end in zip(steps, times, times[1:], strict=False)
    }


def _wait_for(path: Path) -> None:
    while not path.exists():
        time.sleep(0.05)


def hybrid_worker(config_file: str, number: int) -> None:
    """One API worker of the hybrid scenario: opens the table as the API does, warms up,
    searches, reports; then, once every worker is done, reads its memory (so each one's
    share of what they map is taken while all map it) and waits to be told to stop."""
    from lorehouse.search.retriever import Retriever
    from lorehouse.wiring import Lorehouse

    # A worker that hangs (a lock two processes wait on) shows where, when the parent asks.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    config = json.loads(Path(config_file).read_text())
    scratch = Path(config["scratch"])
    vectors = np.load(config["vectors"])
    queries = json.loads(Path(config["queries"]).read_text())
    exact = [set(ids) for ids in json.loads(Path(config["exact"]).read_text())]
    # The fields and weights a Retriever searches BM25 with (its constructor only stores
    # what it is given; no embedder is called).
    fields = Retriever(None, None).text_fields  # type: ignore[arg-type]
    settings = api_settings(
        Path(config["folder"]), config["ann_min_rows"], config["shared"], config["engine"]
    )
    memory = {"imports": _own_memory()}

    # The chunk index as the composition root opens it for the API's Retriever: the shared
    # snapshot folder and the connection's cache bounds are the deployment's.
    table = Lorehouse(settings).chunk_index()
    started = time.perf_counter()
    # What `Retriever.warm` does: one search as a caller without groups.
    warm_vector = _unit(np.random.default_rng(number).standard_normal((1, DIMENSION)))[0]
    _hybrid_search(table.snapshot(), warm_vector, "warm up", (), fields)
    warm_s = time.perf_counter() - started
    memory["warm"] = _own_memory()

    latencies: list[float] = []
    steps: dict[str, list[float]] = {}
    recalls: list[float] = []
    checkpoints = {max(1, round(share * len(queries))) for share in CHECKPOINTS}
    growth: list[dict[str, float]] = []
    for i, query in enumerate(queries):
        started = time.perf_counter()
        snapshot = table.snapshot()  # per search, as the Retriever asks it
        found, took = _hybrid_search(snapshot, vectors[i], query["text"], query["groups"], fields)
        latencies.append(1000 * (time.perf_counter() - started))
        for step, ms in took.items():
            steps.setdefault(step, []).append(ms)
        if i < len(exact) and exact[i]:
            recalls.append(len(set(found[:TOP_K]) & exact[i]) / len(exact[i]))
        if i + 1 in checkpoints:
            now = _own_memory()
            growth.append({"queries": i + 1, "rss_anon": now["rss_anon"], "rss": now["rss"]})
    report = {
        "worker": number,
        "pid": os.getpid(),
        "warm_s": round(warm_s, 2),
        "vector_indexed": table.snapshot().vector_indexed,
        "engine": table.snapshot().ann_engine,
        "queries": len(queries),
        "p50_ms": round(float(np.percentile(latencies, 50)), 2),
        "p95_ms": round(float(np.percentile(latencies, 95)), 2),
        "step_p50_ms": {s: round(float(np.percentile(v, 50)), 2) for s, v in steps.items()},
        "recall_at_10": round(float(np.mean(recalls)), 4) if recalls else None,
        "recall_queries": len(recalls),
        "growth": growth,
    }
    (scratch / f"ready-{number}").write_text(json.dumps(report))
    _wait_for(scratch / "measure")
    memory["end"] = _own_memory()
    held = snapshot_held(table.snapshot())
    report.update(memory=memory, held=held, rss_anon_trimmed=_trimmed_rss_anon())
    partial = scratch / f".memory-{number}"
    partial.write_text(json.dumps(report))
    partial.rename(scratch / f"memory-{number}")
    _wait_for(scratch / "go")


def measure_hybrid(
    config: dict[str, Any], workers: int, scratch: Path, timeout_s: float
) -> list[dict]:
    """Starts `workers` hybrid workers at once on a fresh snapshot folder (the first to load
    the version writes its files, as after a deploy) and returns their reports. Workers not
    done within `timeout_s` print their threads' stacks and are stopped: a hang says where."""
    shared = api_settings(
        Path(config["folder"]), config["ann_min_rows"], config["shared"]
    ).snapshot_folder
    if shared is not None:
        shutil.rmtree(shared, ignore_errors=True)
    for stale in scratch.glob("*"):
        if stale.name.startswith(("ready-", "memory-", ".memory-")) or stale.name in (
            "measure",
            "go",
        ):
            stale.unlink()
    config_file = scratch / "worker.json"
    config_file.write_text(json.dumps({**config, "scratch": str(scratch)}))
    processes = [
        subprocess.Popen([sys.executable, __file__, "--hybrid-worker", str(config_file), str(n)])
        for n in range(workers)
    ]

    deadline = time.monotonic() + timeout_s

    def wait_for_all(prefix: str) -> None:
        while not all((scratch / f"{prefix}-{n}").exists() for n in range(workers)):
            if any(p.poll() is not None for p in processes):
                raise SystemExit("a hybrid worker stopped early")
            if time.monotonic() > deadline:
                for process in processes:
                    process.send_signal(signal.SIGUSR1)
                time.sleep(2)
                raise SystemExit(f"hybrid workers not done in {timeout_s:.0f} s (stacks above)")
            time.sleep(0.1)

    try:
        wait_for_all("ready")
        (scratch / "measure").write_text("")
        wait_for_all("memory")
        reports = [json.loads((scratch / f"memory-{n}").read_text()) for n in range(workers)]
    finally:
        (scratch / "go").write_text("")
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    return reports


def run_hybrid(args: argparse.Namespace) -> None:
    """The hybrid scenario at each row count: the table (cached), the queries and their
    exact answers, then the workers side by side."""
    with tempfile.TemporaryDirectory(prefix="serving-memory-") as temporary:
        workdir = args.workdir or Path(temporary)
        workdir.mkdir(parents=True, exist_ok=True)
        world = make_world(args.seed)
        vectors, queries = make_queries(world, args.queries, args.seed)
        del world
        results = []
        for rows in args.rows or [100_000, 1_000_000]:
            uri, table = hybrid_table(workdir, rows, args)
            folder = uri.parent
            exact_file = folder / f"exact-{args.seed}-{args.queries}.json"
            if not exact_file.exists():
                count = min(EXACT_QUERIES, len(queries))
                exact = exact_top(uri, vectors[:count], queries[:count])
                exact_file.write_text(json.dumps(exact))
            np.save(folder / "query-vectors.npy", vectors)
            (folder / "queries.json").write_text(json.dumps(queries))
            for engine in args.engines:
                config = {
                    "folder": str(folder),
                    "ann_min_rows": args.ann_min_rows,
                    "shared": not args.own_copy,
                    "engine": engine,
                    "vectors": str(folder / "query-vectors.npy"),
                    "queries": str(folder / "queries.json"),
                    "exact": str(exact_file),
                }
                scratch = folder / "scratch"
                scratch.mkdir(exist_ok=True)
                reports = measure_hybrid(config, args.workers, scratch, args.worker_timeout)
                run = {
                    "rows": rows,
                    "engine": engine,
                    "table": table,
                    "snapshot_folder": not args.own_copy,
                    "workers": reports,
                    "rss_total": round(sum(r["memory"]["end"]["rss"] for r in reports), 1),
                    "pss_total": round(sum(r["memory"]["end"]["pss"] for r in reports), 1),
                    "rss_anon_total": round(
                        sum(r["memory"]["end"]["rss_anon"] for r in reports), 1
                    ),
                }
                results.append(run)
                print(json.dumps(run), flush=True)
    print(
        "| rows | ANN engine | worker | ANN | warm s | RSS | USS | PSS "
        "| RssAnon (imports / warm / end / trimmed) | RssFile | p50 ms | p95 ms | recall@10 |"
    )
    print("|---:|---|---:|---|---:|---:|---:|---:|---|---:|---:|---:|---:|")
    for run in results:
        for r in run["workers"]:
            m = r["memory"]
            anon = " / ".join(f"{m[at]['rss_anon']:.0f}" for at in ("imports", "warm", "end"))
            trimmed = r["rss_anon_trimmed"]
            anon += "" if trimmed is None else f" / {trimmed:.0f}"
            recall = "-" if r["recall_at_10"] is None else f"{r['recall_at_10']:.3f}"
            print(
                f"| {run['rows']:,} | {run['engine']} | {r['worker']} "
                f"| {'yes' if r['vector_indexed'] else 'no'} "
                f"| {r['warm_s']:.1f} | {m['end']['rss']:.0f} | {m['end']['uss']:.0f} "
                f"| {m['end']['pss']:.0f} | {anon} | {m['end']['rss_file']:.0f} "
                f"| {r['p50_ms']:.1f} | {r['p95_ms']:.1f} | {recall} |"
            )
    print("MiB. All workers' PSS / RSS / RssAnon:")
    for run in results:
        print(
            f"  {run['rows']:,} rows, {run['engine']}: {run['pss_total']:.0f} "
            f"/ {run['rss_total']:.0f} "
            f"/ {run['rss_anon_total']:.0f}"
        )
    if args.json:
        write_raw_numbers(
            args.json,
            {
                "machine": machine_info(LIBRARIES),
                "scenario": "hybrid",
                "options": {
                    "workers": args.workers,
                    "queries": args.queries,
                    "ann_min_rows": args.ann_min_rows,
                    "batch_rows": args.batch_rows,
                    "seed": args.seed,
                    "snapshot_folder": not args.own_copy,
                    "api_settings": api_settings_shown(
                        api_settings(Path("DATA_DIR"), args.ann_min_rows, not args.own_copy)
                    ),
                },
                "runs": results,
            },
        )


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3] or None, sys.argv[4], sys.argv[5])
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--hybrid-worker":
        hybrid_worker(sys.argv[2], int(sys.argv[3]))
        return
    from lorehouse.settings import DEFAULT_ANN_INDEX_MIN_ROWS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", choices=("vectors", "hybrid"), default="vectors")
    parser.add_argument(
        "--rows", type=int, nargs="+", help="default 100000 300000 (vectors), 100000 1000000"
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--json", type=Path)
    hybrid = parser.add_argument_group("hybrid scenario")
    hybrid.add_argument("--workdir", type=Path, help="where generated tables are kept and reused")
    hybrid.add_argument("--queries", type=int, default=200, help="searches per worker")
    hybrid.add_argument(
        "--ann-min-rows",
        type=int,
        default=DEFAULT_ANN_INDEX_MIN_ROWS,
        help="rows from which the vector index is built (the setting's default)",
    )
    hybrid.add_argument(
        "--engines",
        nargs="+",
        choices=("mapped", "lancedb"),
        default=["mapped", "lancedb"],
        help="ANN engines measured one after another on each table (LOREHOUSE_SEARCH_ANN_ENGINE)",
    )
    hybrid.add_argument("--batch-rows", type=int, default=HYBRID_BATCH, help="rows written at once")
    hybrid.add_argument("--seed", type=int, default=11)
    hybrid.add_argument(
        "--worker-timeout", type=float, default=3600, help="seconds before a worker counts as hung"
    )
    hybrid.add_argument(
        "--own-copy", action="store_true", help="no shared snapshot folder: each worker its own"
    )
    args = parser.parse_args()
    if args.scenario == "vectors":
        run_vectors(args)
    else:
        run_hybrid(args)


if __name__ == "__main__":
    main()
