"""Search latency: Lorehouse retrieval against brute-force numpy top-k, and the ANN path's recall.

Why this benchmark exists: every search reads one snapshot of the LanceDB table (access and
filter masks asked of LanceDB, BM25 postings, the rows and unit vectors held in memory), scores
vectors exactly below `ann_min_rows` rows and through the IVF_HNSW_SQ index from there, then
fuses and builds the result. This script says what that costs per query at a given table size,
against the simplest thing that could possibly work: a dot product of the query with every
vector held in a numpy array, then `np.argpartition` for the top 10. It also says how many of
the exact top 10 the ANN path finds, how long the first search of a table version takes (it
builds the snapshot) and how much memory the snapshot holds.

The table is synthetic so it can be made at any size without embedding anything:

* vectors: unit-norm 384-d float32 rows scattered around a few hundred gaussian cluster
  centres (fixed seed), so neighbourhoods exist the way they do among real sentence vectors;
* texts: words drawn Zipf-like from a fixed vocabulary (the words of the shared Sourcegraph
  handbook, or made-up words when it is absent) plus a few topic words of the row's cluster, so
  BM25 has something to score;
* access: 5% of rows are restricted to the group "security", the rest public.

Queries are perturbed cluster centres with three of the cluster's topic words as their text. The
Retriever gets an embedder that returns the precomputed query vector, so the timings are search,
not MiniLM.

Absolute timings depend on the machine and on what else it is doing, so the figures worth
tracking are ratios against the brute-force baseline measured in the same run.

Run from the repository root:

    .venv/bin/python bench/search.py [--sizes 10000,100000] [--queries 200] [--json OUT]
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from machine import machine_info, write_raw_numbers  # bench/machine.py, beside this script

# The baseline runs single-threaded BLAS. A matrix-vector product is memory-bound, and on this
# 2-core machine OpenBLAS's second thread falls asleep between queries; waking it costs 5-8 ms,
# far more than the product itself. Set before numpy loads; an explicit value wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
import psutil
import pyarrow as pa

from lorehouse.search.ann import NeighbourSearch
from lorehouse.search.filters import access_clause
from lorehouse.search.retriever import Retriever, SearchMode
from lorehouse.settings import DEFAULT_SEARCH_ANN_PROBES
from lorehouse.stores.lance_index import ChunkIndex, chunk_schema

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TEXT_CORPUS = REPO_ROOT.parent / "shared" / "corpus" / "handbook-sourcegraph"
DIMENSION = 384
MODEL_NAME = "synthetic-clusters-384"
TOP_K = 10
VOCABULARY_SIZE = 5000
WORDS_PER_ROW = 40
TOPIC_WORDS_PER_CLUSTER = 6
TOPIC_WORDS_PER_ROW = 6
RESTRICTED_SHARE = 0.05
CHUNKS_PER_DOCUMENT = 20
# Noise norm relative to the unit-length centre: rows of one cluster have a cosine of about
# 0.5 with each other, about what related sentences get from MiniLM.
ROW_SPREAD = 1.0
QUERY_SPREAD = 0.8
TIE_TOLERANCE = 1e-6
ACCESS_FILTER = access_clause([])  # what the Retriever adds for a caller with no groups
LIBRARIES = ["lancedb", "pyarrow", "numpy"]
_WORD = re.compile(r"[a-z]{3,15}")


# --------------------------------------------------------------------------------------------
# Synthetic table and queries.
# --------------------------------------------------------------------------------------------


def vocabulary(text_corpus: Path, size: int, rng: np.random.Generator) -> tuple[list[str], str]:
    """The `size` most frequent words of a Markdown corpus, or made-up words without one."""
    counts: Counter[str] = Counter()
    if text_corpus.is_dir():
        for path in sorted(text_corpus.rglob("*.md")):
            counts.update(_WORD.findall(path.read_text(encoding="utf-8", errors="replace").lower()))
    if len(counts) >= size:
        ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
        return [word for word, _ in ranked[:size]], f"{text_corpus.name} (Markdown words)"
    syllables = [c + v for c in "bcdfghjklmnprstvwz" for v in "aeiou"]
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(syllables, size=int(rng.integers(2, 5)))))
    return sorted(words), "made-up words (text corpus not found)"


@dataclass
class Corpus:
    """What the table holds, plus the cluster structure the queries are drawn from."""

    vectors: np.ndarray  # (n, DIMENSION) float32, unit rows
    texts: list[str]
    restricted: np.ndarray  # (n,) bool: acl == ["security"]
    centres: np.ndarray  # (clusters, DIMENSION) float32, unit rows
    topics: np.ndarray  # (clusters, TOPIC_WORDS_PER_CLUSTER) word indexes
    words: list[str]
    zipf: np.ndarray  # probability of each vocabulary word as a background word


def _normalize(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return (matrix / np.clip(norms, 1e-12, None)).astype(np.float32)


def make_corpus(rows: int, clusters: int, seed: int, words: list[str]) -> Corpus:
    """Clustered unit vectors and Zipf texts; the same seed gives the same centres and topics."""
    rng = np.random.default_rng(seed)
    centres = _normalize(rng.standard_normal((clusters, DIMENSION), dtype=np.float32))
    # Topic words come from below the most common words, so they carry BM25 weight.
    topics = rng.choice(np.arange(200, len(words)), size=(clusters, TOPIC_WORDS_PER_CLUSTER))
    ranks = np.arange(1, len(words) + 1, dtype=np.float64)
    zipf = 1.0 / (ranks + 2.7)
    zipf /= zipf.sum()

    data_rng = np.random.default_rng([seed, rows])
    cluster_of = data_rng.integers(0, clusters, size=rows)
    noise = data_rng.standard_normal((rows, DIMENSION), dtype=np.float32)
    noise *= np.float32(ROW_SPREAD / np.sqrt(DIMENSION))
    vectors = _normalize(centres[cluster_of] + noise)
    del noise

    background = data_rng.choice(len(words), size=(rows, WORDS_PER_ROW), p=zipf)
    topic_pick = data_rng.integers(0, TOPIC_WORDS_PER_CLUSTER, size=(rows, TOPIC_WORDS_PER_ROW))
    slots = data_rng.integers(0, WORDS_PER_ROW, size=(rows, TOPIC_WORDS_PER_ROW))
    tokens = background.copy()
    np.put_along_axis(tokens, slots, topics[cluster_of[:, None], topic_pick], axis=1)
    vocab = np.array(words, dtype=object)
    texts = [" ".join(row) for row in vocab[tokens]]
    restricted = data_rng.random(rows) < RESTRICTED_SHARE
    return Corpus(vectors, texts, restricted, centres, topics, words, zipf)


def arrow_rows(corpus: Corpus) -> pa.Table:
    """The corpus as rows of the chunks table, schema and model metadata included."""
    schema = chunk_schema(DIMENSION, MODEL_NAME)
    n = len(corpus.texts)
    ids = [f"c{i:07d}" for i in range(n)]
    docs = [f"d{i // CHUNKS_PER_DOCUMENT:06d}" for i in range(n)]
    titles = [f"Synthetic document {i // CHUNKS_PER_DOCUMENT}" for i in range(n)]
    columns = {
        "chunk_id": ids,
        "doc_id": docs,
        "title": titles,
        "rel_path": [f"synthetic/{doc}.md" for doc in docs],
        "source_uri": [f"file:///synthetic/{doc}.md" for doc in docs],
        "file_type": ["md"] * n,
        "position": [i % CHUNKS_PER_DOCUMENT for i in range(n)],
        "heading_path": [[title] for title in titles],
        "page_start": [None] * n,
        "page_end": [None] * n,
        "is_table": [False] * n,
        "language": ["en"] * n,
        "acl": [["security"] if flag else [] for flag in corpus.restricted.tolist()],
        "text_chat": corpus.texts,
        "text_embed": corpus.texts,
        "text_enriched": titles,
        "embed_key": ids,
        "row_hash": ids,
    }
    vectors = pa.FixedSizeListArray.from_arrays(
        pa.array(corpus.vectors.reshape(-1), pa.float32()), DIMENSION
    )
    # A column this script does not know yet is left empty rather than failing the run.
    arrays = [
        vectors
        if field.name == "vector"
        else pa.array(columns.get(field.name, [None] * n), type=field.type)
        for field in schema
    ]
    return pa.Table.from_arrays(arrays, schema=schema)


@dataclass
class Query:
    text: str
    vector: np.ndarray


def make_queries(corpus: Corpus, count: int, seed: int) -> list[Query]:
    """Perturbed cluster centres; the text is three topic words and one background word."""
    rng = np.random.default_rng([seed, 7])
    clusters = rng.integers(0, len(corpus.centres), size=count)
    noise = rng.standard_normal((count, DIMENSION), dtype=np.float32)
    noise *= np.float32(QUERY_SPREAD / np.sqrt(DIMENSION))
    vectors = _normalize(corpus.centres[clusters] + noise)
    queries = []
    for i, cluster in enumerate(clusters):
        picked = rng.choice(corpus.topics[cluster], size=3, replace=False)
        background = rng.choice(len(corpus.words), p=corpus.zipf)
        words = [corpus.words[w] for w in picked] + [corpus.words[background]]
        queries.append(Query(" ".join(words), vectors[i]))
    return queries


class PrecomputedEmbedder:
    """Satisfies the Embedder protocol with the vector of the query about to be searched."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.vector = np.zeros(DIMENSION, dtype=np.float32)

    def embed(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        return np.tile(self.vector, (len(texts), 1))


# --------------------------------------------------------------------------------------------
# Measurement.
# --------------------------------------------------------------------------------------------


def brute_force_top_k(
    vectors: np.ndarray, query: np.ndarray, k: int, hidden: np.ndarray | None
) -> np.ndarray:
    """Exact top k by dot product (= cosine for unit rows), best first; hidden rows excluded."""
    scores = vectors @ query
    if hidden is not None:
        scores[hidden] = -np.inf
    top = np.argpartition(-scores, k)[:k]
    return top[np.argsort(-scores[top])]


def exact_neighbours(
    vectors: np.ndarray, query: np.ndarray, k: int, hidden: np.ndarray | None
) -> np.ndarray:
    """Rows whose float64 score reaches the k-th best, within TIE_TOLERANCE.

    float32 dot products can swap two rows whose cosines differ by 1e-7, and LanceDB and numpy
    sum in different orders, so a strict float32 top k would count such a swap as a miss. The
    ground truth is therefore rescored in float64 and keeps every row tied with the k-th.
    """
    pool = brute_force_top_k(vectors, query, min(len(vectors) - 1, 5 * k), hidden)
    precise = vectors[pool].astype(np.float64) @ query.astype(np.float64)
    kth = np.sort(precise)[::-1][k - 1]
    return pool[precise >= kth - TIE_TOLERANCE]


@dataclass
class SizeResult:
    rows: int
    restricted_rows: int
    ann_min_rows: int
    #: What proposed the vector candidates: "mapped", "lancedb" or "" (exact).
    ann_index: str
    write_seconds: float
    index_seconds: float
    indexes: list[str]
    first_search_seconds: float = 0.0
    rss_before_search_mib: float = 0.0
    rss_after_search_mib: float = 0.0
    latency_ms: dict[str, list[float]] = field(default_factory=dict)
    recall: dict[str, float] = field(default_factory=dict)
    empty_results: dict[str, int] = field(default_factory=dict)


PATHS = [
    ("brute", "numpy brute force (baseline)"),
    ("vector", "Retriever.search vector"),
    ("bm25", "Retriever.search bm25"),
    ("hybrid", "Retriever.search hybrid"),
    ("index_vector", "snapshot vector_search, no filter"),
    ("index_vector_acl", "snapshot vector_search, access filter"),
    ("index_text", "snapshot text_search, no filter"),
    ("index_text_acl", "snapshot text_search, access filter"),
]
# The ChunkIndex rows ask for what a caller needs to rank: limit 10, chunk_id only.
_INDEX_PATHS = {
    "index_vector": ("vector", None),
    "index_vector_acl": ("vector", ACCESS_FILTER),
    "index_text": ("text", None),
    "index_text_acl": ("text", ACCESS_FILTER),
}


def _rss_mib() -> float:
    return psutil.Process().memory_info().rss / 2**20


def _timed_ms(call: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    value = call()
    return 1000 * (time.perf_counter() - started), value


def measure_size(
    rows: int, args: argparse.Namespace, words: list[str], workdir: Path
) -> SizeResult:
    print(f"\n{rows:,} chunks: generating", end="", flush=True)
    corpus = make_corpus(rows, args.clusters, args.seed, words)
    queries = make_queries(corpus, args.queries, args.seed)
    table = arrow_rows(corpus)
    ids = np.array(table["chunk_id"].to_pylist())

    print(", writing", end="", flush=True)
    # Searched as an API process does: from the version's snapshot files (unless asked not).
    folder = None if args.held_in_memory else workdir / f"snapshots-{rows}"
    index = ChunkIndex(
        str(workdir / f"lance-{rows}"),
        ann_min_rows=args.ann_min_rows,
        snapshot_folder=folder,
        neighbours=NeighbourSearch(
            args.ann_min_rows, probes=DEFAULT_SEARCH_ANN_PROBES, engine=args.engine
        ),
    )
    started = time.perf_counter()
    index.upsert(table, [])
    write_seconds = time.perf_counter() - started
    del table
    gc.collect()
    print(", indexing", end="", flush=True)
    index_ms, states = _timed_ms(index.refresh_indexes)
    result = SizeResult(
        rows=rows,
        restricted_rows=int(corpus.restricted.sum()),
        ann_min_rows=args.ann_min_rows,
        ann_index=index.snapshot().ann_engine or "",
        write_seconds=write_seconds,
        index_seconds=index_ms / 1000,
        indexes=[f"{s.name} ({s.kind})" for s in states],
    )
    print(f" ({result.index_seconds:.1f} s), searching", end="", flush=True)

    embedder = PrecomputedEmbedder(index.embedding_model()[0])
    # No query-vector cache: the same queries run on every path, and each must be searched.
    retriever = Retriever(index, embedder, candidates=args.candidates, query_cache_size=0)
    vectors, hidden = corpus.vectors, corpus.restricted

    def run(path: str, query: Query) -> list[str]:
        embedder.vector = query.vector
        if path == "brute":
            return list(ids[brute_force_top_k(vectors, query.vector, TOP_K, hidden)])
        if path in _INDEX_PATHS:
            kind, where = _INDEX_PATHS[path]
            if kind == "vector":
                found = index.snapshot().vector_search(query.vector, where, TOP_K, ["chunk_id"])
            else:
                found = index.snapshot().text_search(query.text, where, TOP_K, ["chunk_id"])
            return [row["chunk_id"] for row in found]
        found = retriever.search(query.text, top_k=TOP_K, mode=SearchMode(path))
        return [hit.chunk_id for hit in found.hits]

    # The first search of a table version builds its snapshot (rows, vectors, BM25 postings,
    # the access mask): what a server pays once after each reindex.
    gc.collect()
    result.rss_before_search_mib = _rss_mib()
    elapsed, _ = _timed_ms(lambda: run("hybrid", queries[0]))
    result.first_search_seconds = elapsed / 1000
    # Untimed warm-up: opens index files and fills caches for every path.
    for query in queries[: min(10, len(queries))]:
        for path, _ in PATHS:
            run(path, query)

    latency: dict[str, list[float]] = {path: [] for path, _ in PATHS}
    found_by: dict[str, list[list[str]]] = {path: [] for path, _ in PATHS}
    # Paths take turns on each query, so drift in machine load hits all of them alike.
    for query in queries:
        for path, _ in PATHS:
            elapsed, found = _timed_ms(lambda path=path, query=query: run(path, query))
            latency[path].append(elapsed)
            found_by[path].append(found)
    result.latency_ms = latency
    result.rss_after_search_mib = _rss_mib()
    result.empty_results = {
        path: sum(1 for f in found if not f) for path, found in found_by.items()
    }

    print(", recall", end="", flush=True)
    exact_all = [set(ids[exact_neighbours(vectors, q.vector, TOP_K, None)]) for q in queries]
    exact_public = [set(ids[exact_neighbours(vectors, q.vector, TOP_K, hidden)]) for q in queries]
    result.recall = {
        "vector_search": _recall([set(f) for f in found_by["index_vector"]], exact_all),
        "vector_search_access_filter": _recall(
            [set(f) for f in found_by["index_vector_acl"]], exact_public
        ),
        "retriever_vector": _recall([set(f) for f in found_by["vector"]], exact_public),
        "brute_force_check": _recall([set(f) for f in found_by["brute"]], exact_public),
    }
    if result.ann_index == "lancedb":
        # What the ANN index alone finds, by its quantized distances, without the rescoring
        # with full vectors that TableSnapshot.vector_search adds: the same query, straight
        # through LanceDB.
        table_handle = index.table()
        unrefined = [
            {
                row["chunk_id"]
                for row in table_handle.search(q.vector, vector_column_name="vector")
                .distance_type("cosine")
                .select(["chunk_id", "_distance"])
                .limit(TOP_K)
                .to_list()
            }
            for q in queries
        ]
        result.recall["index_without_refine"] = _recall(unrefined, exact_all)
    print(" done", flush=True)
    return result


def _recall(found: list[set[str]], exact: list[set[str]]) -> float:
    """Share of the top k that is among the exact neighbours (ties with the k-th count)."""
    return float(np.mean([len(f & e) / TOP_K for f, e in zip(found, exact, strict=True)]))


# --------------------------------------------------------------------------------------------
# Reporting.
# --------------------------------------------------------------------------------------------


def _ms(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.2f}"


def print_report(
    info: dict[str, Any], results: list[SizeResult], args: argparse.Namespace, source: str
) -> None:
    libs = ", ".join(f"{name} {v}" for name, v in info["libraries"].items())
    print("\n## Search latency (LanceDB vs brute force)\n")
    print("```")
    print(
        f"Machine: {info['cpu_count']} cores (os.cpu_count), Python {info['python']}, "
        f"{info['platform']}"
    )
    print(f"Libraries: {libs}")
    print(
        f"Data: {args.clusters} clusters, seed {args.seed}, {RESTRICTED_SHARE:.0%} of rows "
        f"restricted, vocabulary: {source}"
    )
    print(
        f"Queries: {args.queries} per size after 10 untimed warm-up queries, top_k={TOP_K}, "
        f"Retriever candidates={args.candidates}, rerank none"
    )
    print("```\n")

    print("### Table build\n")
    print(
        "| chunks | restricted | ANN index | write s | refresh_indexes s | first search s "
        "| RSS before / after searching MiB |"
    )
    print("|---:|---:|---|---:|---:|---:|---:|")
    for r in results:
        ann = {"mapped": "mapped IVF, 8-bit codes", "lancedb": "LanceDB IVF_HNSW_SQ"}.get(
            r.ann_index, f"none (exact, < {r.ann_min_rows:,})"
        )
        print(
            f"| {r.rows:,} | {r.restricted_rows:,} | {ann} | {r.write_seconds:.1f} | "
            f"{r.index_seconds:.1f} | {r.first_search_seconds:.1f} | "
            f"{r.rss_before_search_mib:,.0f} / {r.rss_after_search_mib:,.0f} |"
        )
    print(
        "\nFirst search: the first hybrid search of the table version, which builds the "
        "snapshot. RSS: this process, which also holds the benchmark's own copy of the vectors; "
        "the difference is what the snapshot (rows, vectors, postings, masks) holds."
    )

    print("\n### Latency per query\n")
    print("Ratio = search latency / brute-force latency at the same percentile and size.\n")
    print("| chunks | path | median ms | p95 ms | median ratio | p95 ratio |")
    print("|---:|---|---:|---:|---:|---:|")
    for r in results:
        base = np.asarray(r.latency_ms["brute"])
        base_median, base_p95 = float(np.median(base)), float(np.percentile(base, 95))
        for path, label in PATHS:
            values = np.asarray(r.latency_ms[path])
            median, p95 = float(np.median(values)), float(np.percentile(values, 95))
            print(
                f"| {r.rows:,} | {label} | {_ms(median)} | {_ms(p95)} | "
                f"{median / base_median:.1f}x | {p95 / base_p95:.1f}x |"
            )

    print("\n### Recall@10 against the exact numpy top 10\n")
    print(
        "| chunks | ANN index | vector_search, no filter | vector_search, access filter | "
        "Retriever vector | index alone, quantized distances |"
    )
    print("|---:|---|---:|---:|---:|---:|")
    for r in results:
        rec = r.recall
        unrefined = rec.get("index_without_refine")
        print(
            f"| {r.rows:,} | {r.ann_index or 'no (exact)'} | "
            f"{rec['vector_search']:.4f} | {rec['vector_search_access_filter']:.4f} | "
            f"{rec['retriever_vector']:.4f} | "
            f"{'n/a' if unrefined is None else f'{unrefined:.4f}'} |"
        )
    print(
        "\nThe access filter is the one the Retriever adds for a caller without groups "
        f"(`{ACCESS_FILTER}`); its exact top 10 leaves restricted rows out. The exact top 10 is "
        f"rescored in float64, and a row within {TIE_TOLERANCE:g} of the 10th score counts as "
        "a hit."
    )
    empties = {(r.rows, path): n for r in results for path, n in r.empty_results.items() if n}
    if empties:
        print("\nQueries with no hit:")
        for (rows, path), n in sorted(empties.items()):
            print(f"  {rows:,} chunks, {path}: {n} of {args.queries}")


# --------------------------------------------------------------------------------------------
# Entry point.
# --------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes",
        default="10000,100000",
        help="comma-separated table sizes in chunks (default 10000,100000)",
    )
    parser.add_argument("--queries", type=int, default=200, help="timed queries per size")
    parser.add_argument("--clusters", type=int, default=300, help="gaussian cluster centres")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--ann-min-rows",
        type=int,
        default=50_000,
        help="ChunkIndex ann_min_rows: the ANN index is built from this many rows (default 50000)",
    )
    parser.add_argument(
        "--engine",
        choices=("mapped", "lancedb"),
        default="mapped",
        help="what proposes candidates past --ann-min-rows (LOREHOUSE_SEARCH_ANN_ENGINE)",
    )
    parser.add_argument("--candidates", type=int, default=50, help="Retriever candidates")
    parser.add_argument(
        "--text-corpus",
        type=Path,
        default=DEFAULT_TEXT_CORPUS,
        help="Markdown folder the vocabulary is taken from (default ../shared/corpus/"
        "handbook-sourcegraph); made-up words when absent",
    )
    parser.add_argument("--workdir", type=Path, default=None, help="keep the tables here")
    parser.add_argument(
        "--held-in-memory",
        action="store_true",
        help="each snapshot held in this process, not in mapped files (the API's default)",
    )
    parser.add_argument("--json", type=Path, default=None, help="also write raw numbers here")
    args = parser.parse_args(argv)
    args.sizes = [int(size.replace("_", "")) for size in args.sizes.split(",") if size.strip()]
    args.queries = max(1, args.queries)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    words, source = vocabulary(args.text_corpus, VOCABULARY_SIZE, np.random.default_rng(args.seed))
    results: list[SizeResult] = []
    with tempfile.TemporaryDirectory(prefix="lorehouse-bench-search-") as tmp:
        workdir = args.workdir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        for rows in args.sizes:
            results.append(measure_size(rows, args, words, workdir))
            gc.collect()
    info = machine_info(LIBRARIES)
    print_report(info, results, args, source)
    wall = time.perf_counter() - started
    print(f"\nWall time: {wall:.0f} s")
    if args.json is not None:
        write_raw_numbers(
            args.json,
            {
                "machine": info,
                "args": {k: str(v) for k, v in vars(args).items()},
                "vocabulary": source,
                "wall_seconds": wall,
                "sizes": [asdict(r) for r in results],
            },
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
