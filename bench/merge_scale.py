"""The merge steps at scale: time and peak memory of merged_partitions and search_index.

A partitioned build ends in two unpartitioned steps that every partition's output goes
through: `run_merge` copies the partitions' stage tables into the shared DuckDB file,
`run_document_features` derives the feature tables from them, and
`run_index_merge` copies their vector rows into the shared LanceDB tables and builds the
search indexes. This bench generates partition outputs of a given total size directly
(stage-table rows by SQL, random unit vectors; no parsing or model), then runs each merge in
a child process of its own and reads its time and peak RSS (`ru_maxrss`):

* full: every partition new (a first build);
* one changed: one document of one partition changed (a nightly run), merged by the three
  steps of every partition;
* and, after another such edit, the same partition's own publish (`run_publish`, the
  `published_partition` step that ends its run): what a partition run spends to make its
  rows searchable without a merge of every partition.

    .venv/bin/python bench/merge_scale.py --chunks 100000 1000000 [--json F]

Three chunks a document, 16 partitions, 384 dimensions, the `chunks` table only (sentence
windows and token vectors go through the same code per table). `--engines` measures each
ANN engine on its own copy (LOREHOUSE_SEARCH_ANN_ENGINE): with `lancedb` the index merge
builds LanceDB's vector index, with `mapped` (the default) searches build their own.
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
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

CHUNKS_PER_DOCUMENT = 3
DIMENSION = 384
MODEL = "bench-random"
PARTITIONS = 16
STEPS = ("merged_partitions", "document_features", "search_index")
PUBLISH = "published_partition"


def _settings(data_dir: Path) -> Any:
    from lorehouse.settings import Settings

    return Settings(data_dir=data_dir, index_partitions=PARTITIONS)


def generate(data_dir: Path, chunks: int) -> None:
    """The inventory, each partition's stage tables and `chunks` vectors, as a build leaves
    them before its merges."""
    from lorehouse.stores.lance_index import chunk_schema
    from lorehouse.stores.partitions import publish_inventory_slices
    from lorehouse.wiring import Lorehouse

    wiring = Lorehouse(_settings(data_dir))
    shared, layout = wiring.feature_store(), wiring.partition_layout()
    documents = chunks // CHUNKS_PER_DOCUMENT
    with shared.connect() as connection:
        connection.execute(
            "INSERT INTO documents_raw (doc_id, source_uri, rel_path, file_type, size_bytes, "
            "content_sha256, modified_at, acl_groups) SELECT substr(sha256('d' || i), 1, 20), "
            "'file:///corpus/doc-' || i || '.md', 'doc-' || i || '.md', 'md', 1000, "
            "sha256('c' || i), TIMESTAMPTZ '2026-01-01 00:00:00+00', ['everyone'] "
            f"FROM range({documents}) t(i)"
        )
    publish_inventory_slices(shared, layout)
    rng = np.random.default_rng(0)
    schema = chunk_schema(DIMENSION, MODEL)
    for key in layout.keys:
        store = wiring.partition_store(key)
        store.adopt_inventory(layout.inventory_slice(key))
        with store.connect() as connection:
            connection.execute(
                "INSERT INTO documents_parsed (doc_id, content_sha256, title, markdown, "
                "page_map, page_count, parser, parser_version, parse_ms, warnings) "
                "SELECT doc_id, content_sha256, 'Document ' || rel_path, "
                "'# Title\n\n' || repeat('Some policy text. ', 40), '[]', 1, 'md', 'v1', 1.0, [] "
                "FROM documents_raw"
            )
            connection.execute(
                "INSERT INTO chunks (chunk_id, doc_id, position, heading_path, text_embed, "
                "text_chat, page_start, page_end, is_table, token_count, acl, "
                "source_fingerprint) SELECT substr(sha256(doc_id || p), 1, 24), doc_id, p, "
                "['Title'], repeat('Some policy text. ', 30), repeat('Some policy text. ', 30), "
                "NULL, NULL, false, 120, ['everyone'], content_sha256 "
                f"FROM documents_raw, range({CHUNKS_PER_DOCUMENT}) t(p)"
            )
            connection.execute(
                "INSERT INTO enriched_chunks SELECT chunk_id, doc_id, 'A summary.', "
                "['What is it?'], ['policy'], 'extractive', 'none', 'v1', 'enriched', NULL "
                "FROM chunks"
            )
            connection.execute(
                "INSERT INTO document_enrichment SELECT doc_id, 'A summary.', NULL, "
                "'extractive', 'none', 'enriched', NULL, 'f' FROM documents_parsed"
            )
            rows = connection.execute(
                "SELECT c.chunk_id, c.doc_id, r.rel_path, r.source_uri, c.position, c.text_embed "
                "FROM chunks c JOIN documents_raw r USING (doc_id) ORDER BY c.chunk_id"
            ).fetchall()
        if not rows:
            continue
        ids, docs, paths, uris, positions, texts = (list(c) for c in zip(*rows, strict=True))
        vectors = rng.standard_normal((len(rows), DIMENSION), dtype=np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        n = len(rows)
        table = pa.table(
            {
                "chunk_id": ids,
                "doc_id": docs,
                "title": paths,
                "rel_path": paths,
                "source_uri": uris,
                "file_type": ["md"] * n,
                "position": pa.array(positions, pa.int32()),
                "heading_path": [["Title"]] * n,
                "page_start": pa.nulls(n, pa.int32()),
                "page_end": pa.nulls(n, pa.int32()),
                "is_table": [False] * n,
                "language": ["en"] * n,
                "acl": [["everyone"]] * n,
                "text_chat": texts,
                "text_embed": texts,
                "text_enriched": texts,
                "embed_key": ids,
                "row_hash": ids,
                "vector": pa.FixedSizeListArray.from_arrays(vectors.reshape(-1), DIMENSION),
            },
            schema=schema,
        )
        wiring.partition_index(key).replace_all(table)


def _change_one(data_dir: Path, mark: str) -> None:
    """One document of partition p00 edited (`mark` tells edits apart): its chunks' texts and
    vectors change."""
    import lancedb

    from lorehouse.wiring import Lorehouse

    wiring = Lorehouse(_settings(data_dir))
    key = wiring.partition_layout().keys[0]
    store = wiring.partition_store(key)
    with store.connect() as connection:
        (doc_id,) = connection.execute("SELECT min(doc_id) FROM chunks").fetchone()
        connection.execute(
            "UPDATE chunks SET chunked_at = now(), text_embed = text_embed || ? WHERE doc_id = ?",
            [f" Edited {mark}.", doc_id],
        )
    table = lancedb.connect(str(wiring.partition_layout().index_path(key))).open_table("chunks")
    table.update(where=f"doc_id = '{doc_id}'", values={"row_hash": f"edited-{mark}"})


def _step(data_dir: Path, step: str) -> dict[str, float]:
    """Runs one merge in this (child) process; its seconds and peak RSS."""
    from lorehouse.stages.features import run_document_features
    from lorehouse.stages.index_merge import run_index_merge
    from lorehouse.stages.partition_merge import run_merge
    from lorehouse.stages.publish import run_publish
    from lorehouse.stores.partitions import record_indexed
    from lorehouse.wiring import Lorehouse

    wiring = Lorehouse(_settings(data_dir))
    layout = wiring.partition_layout()
    if step in ("merged_partitions", PUBLISH):  # as chunk_embeddings leaves each partition
        for key in layout.keys if step != PUBLISH else layout.keys[:1]:
            record_indexed(wiring.partition_store(key))
    started = time.perf_counter()
    if step == PUBLISH:
        key = layout.keys[0]
        report = run_publish(
            wiring.feature_store(), wiring.chunk_index(), {key: wiring.partition_index(key)}, layout
        )
        assert report.published and report.index.copied.get("chunks"), report
    elif step == "merged_partitions":
        run_merge(wiring.feature_store(), layout)
    elif step == "document_features":
        run_document_features(wiring.feature_store())
    else:
        run_index_merge(
            wiring.feature_store(),
            wiring.chunk_index(),
            {key: wiring.partition_index(key) for key in layout.keys},
            layout,
        )
    return {
        "seconds": round(time.perf_counter() - started, 2),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def _child(data_dir: Path, step: str, engine: str) -> dict[str, float]:
    output = subprocess.run(
        [sys.executable, __file__, "--step", step, "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "LOREHOUSE_SEARCH_ANN_ENGINE": engine},
    ).stdout
    return json.loads(output.strip().splitlines()[-1])


def measure(chunks: int, workdir: Path, engine: str) -> dict[str, Any]:
    data_dir = workdir / f"merge-{chunks}-{engine}"
    started = time.perf_counter()
    generate(data_dir, chunks)
    print(f"[{chunks}] generated in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    row: dict[str, Any] = {"chunks": chunks, "partitions": PARTITIONS, "engine": engine}
    for run in ("full", "one_changed"):
        if run == "one_changed":
            _change_one(data_dir, "merged")
        for step in STEPS:
            row[f"{run}.{step}"] = _child(data_dir, step, engine)
            print(f"[{chunks} {engine}] {run} {step}: {row[f'{run}.{step}']}", file=sys.stderr)
    _change_one(data_dir, "published")
    row[f"one_changed.{PUBLISH}"] = _child(data_dir, PUBLISH, engine)
    print(
        f"[{chunks} {engine}] one changed, published: {row[f'one_changed.{PUBLISH}']}",
        file=sys.stderr,
    )
    return row


def table(rows: list[dict[str, Any]]) -> str:
    steps = (*STEPS, PUBLISH)
    lines = [
        "| chunks | ANN engine | run | " + " | ".join(f"{step} s | MiB" for step in steps) + " |",
        "|---:|---|---|" + "---:|---:|" * len(steps),
    ]
    for row in rows:
        for run in ("full", "one_changed"):
            cells = " | ".join(
                f"{row[f'{run}.{step}']['seconds']} | {row[f'{run}.{step}']['peak_rss_mib']}"
                if f"{run}.{step}" in row
                else "- | -"
                for step in steps
            )
            engine = row.get("engine", "lancedb")
            lines.append(f"| {row['chunks']} | {engine} | {run.replace('_', ' ')} | {cells} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, nargs="+", default=[100_000])
    parser.add_argument(
        "--engines", nargs="+", choices=("mapped", "lancedb"), default=["mapped", "lancedb"]
    )
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--step", help=argparse.SUPPRESS)
    parser.add_argument("--data-dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    from lorehouse.offline import apply_offline_environment

    apply_offline_environment()
    if args.step:
        print(json.dumps(_step(args.data_dir, args.step)))
        return
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        workdir = args.workdir or Path(scratch)
        for chunks in args.chunks:
            for engine in args.engines:
                rows.append(measure(chunks, workdir, engine))
            print(table(rows), file=sys.stderr)
            if args.json:
                args.json.write_text(json.dumps(rows, indent=2) + "\n")
    print(table(rows))


if __name__ == "__main__":
    main()
