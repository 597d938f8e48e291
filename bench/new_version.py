"""The first searches after a new version of the chunks table is published: loaded in the
background (`LOREHOUSE_SEARCH_WARM_MIN_ROWS`, the default) against loaded by the search that
reads it first (the baseline, as every version below that threshold is).

Why: a new version's snapshot (its rows, vectors, BM25 postings and lookups, written to the
host's snapshot files) takes minutes to build at a million chunks. In the request path,
the first search after each publish waits that long, and every search behind it too.

One process opens a copy of a generated hybrid table (`bench/serving_memory.py --scenario
hybrid`, kept under `--workdir`) twice, one reader per mode, each with its own snapshot
folder, and each searches the current version once (its first load). A writer then narrows
one document to a group no caller holds, deletes another and edits a third (a word no
other row holds added to its text), as a nightly reindex does. Each reader then runs
`--queries` hybrid searches as callers take turns: the first one's time is the figure, with
the background mode's searches while it loads and the time until it has, which is when the
edit is searchable. Every search checks that neither withdrawn document is shown to a
caller, and once loaded each reader must find the edited document by its new word.

    .venv/bin/python bench/new_version.py --rows 100000 --workdir DIR [--json F]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine import machine_info, write_raw_numbers
from serving_memory import (
    HYBRID_BATCH,
    LIBRARIES,
    _hybrid_search,
    hybrid_table,
    make_queries,
    make_world,
)

NARROWED_GROUP = "bench-nobody"
#: The word the edited document gains: no generated text holds it.
EDIT_WORD = "zyxwedited"


def _ms(started: float) -> float:
    return round(1000 * (time.perf_counter() - started), 1)


def run(args: argparse.Namespace) -> dict[str, Any]:
    from lorehouse.search.ann import NeighbourSearch
    from lorehouse.search.filters import access_clause
    from lorehouse.search.retriever import Retriever
    from lorehouse.settings import DEFAULT_SEARCH_ANN_PROBES, DEFAULT_SEARCH_WARM_MIN_ROWS
    from lorehouse.stores.lance_index import ChunkIndex

    source, _ = hybrid_table(args.workdir, args.rows, args)
    scratch = Path(tempfile.mkdtemp(prefix="new-version-", dir=args.workdir))
    try:
        uri = scratch / "lancedb"
        shutil.copytree(source, uri)
        vectors, queries = make_queries(make_world(args.seed), args.queries, args.seed)
        fields = Retriever(None, None).text_fields  # type: ignore[arg-type]
        modes = {"background": DEFAULT_SEARCH_WARM_MIN_ROWS, "in_request": 10**15}
        readers = {
            mode: ChunkIndex(
                str(uri),
                ann_min_rows=args.ann_min_rows,
                neighbours=NeighbourSearch(
                    args.ann_min_rows, probes=DEFAULT_SEARCH_ANN_PROBES, engine=args.engine
                ),
                snapshot_folder=scratch / f"snapshots-{mode}",
                warm_min_rows=warm,
            )
            for mode, warm in modes.items()
        }
        report: dict[str, Any] = {"rows": args.rows, "modes": {}}
        for mode, reader in readers.items():
            started = time.perf_counter()
            _hybrid_search(reader.snapshot(), vectors[0], queries[0]["text"], (), fields)
            report["modes"][mode] = {"first_version_first_search_ms": _ms(started)}

        writer = ChunkIndex(str(uri), ann_min_rows=args.ann_min_rows)
        heads = writer.table().to_lance().to_table(columns=["doc_id"], limit=2000)["doc_id"]
        narrowed_doc, deleted_doc, edited_doc = list(dict.fromkeys(heads.to_pylist()))[:3]
        rows = writer.table().to_lance().to_table(filter=f"doc_id = '{narrowed_doc}'")
        changed = rows["chunk_id"].to_pylist()
        rows = rows.set_column(
            rows.schema.get_field_index("acl"),
            "acl",
            pa.array([[NARROWED_GROUP]] * rows.num_rows, rows.schema.field("acl").type),
        )
        rows = rows.set_column(
            rows.schema.get_field_index("row_hash"),
            "row_hash",
            pa.array([f"{h}-narrowed" for h in rows["row_hash"].to_pylist()]),
        )
        deleted = writer.rows(f"doc_id = '{deleted_doc}'", ["chunk_id"], 1000)
        gone = [row["chunk_id"] for row in deleted]
        edited = writer.table().to_lance().to_table(filter=f"doc_id = '{edited_doc}'")
        for column in ("text_embed", "row_hash"):
            values = edited[column].to_pylist()
            edited = edited.set_column(
                edited.schema.get_field_index(column),
                column,
                pa.array([f"{value} {EDIT_WORD}" for value in values[:1]] + values[1:]),
            )
        edited_chunk = edited["chunk_id"][0].as_py()
        started = time.perf_counter()
        writer.upsert(pa.concat_tables([rows, edited]).cast(writer.table().schema), gone)
        report["publish_ms"] = _ms(started)
        report["changed_chunks"] = len(changed) + len(gone) + edited.num_rows
        withdrawn = changed + gone

        for mode, reader in readers.items():
            latencies: list[float] = []
            started = time.perf_counter()
            loaded_after = None
            for i, query in enumerate(queries):
                began = time.perf_counter()
                snapshot = reader.snapshot()
                groups = query["groups"]
                _hybrid_search(snapshot, vectors[i], query["text"], groups, fields)
                latencies.append(_ms(began))
                shown = snapshot.rows_by_key(withdrawn, access_clause(groups), ["chunk_id"])
                if shown:
                    raise AssertionError(f"{mode}: withdrawn chunks shown: {sorted(shown)}")
                if loaded_after is None and reader.loaded(timeout=0):
                    loaded_after = _ms(started)
            if loaded_after is None:
                reader.loaded()
                loaded_after = _ms(started)
            found = [key for key, _ in reader.snapshot().text_ranking(EDIT_WORD, None, 10)]
            if found != [edited_chunk]:
                raise AssertionError(f"{mode}: the edit is not searchable: {found}")
            report["modes"][mode].update(
                first_search_ms=latencies[0],
                searches=len(latencies),
                p50_ms=round(float(np.percentile(latencies, 50)), 1),
                max_after_first_ms=max(latencies[1:], default=None),
                new_version_searched_after_ms=loaded_after,
                version_served=reader.snapshot().version,
            )
        base, fast = (report["modes"][m]["first_search_ms"] for m in ("in_request", "background"))
        report["first_search_ratio"] = round(base / max(fast, 0.1), 1)
        return report
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--ann-min-rows", type=int, default=50_000)
    parser.add_argument(
        "--engine", choices=("mapped", "lancedb"), default="mapped", help="the readers' ANN engine"
    )
    parser.add_argument("--batch-rows", type=int, default=HYBRID_BATCH)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    report = {"machine": machine_info(LIBRARIES), **run(args)}
    print(report)
    if args.json:
        write_raw_numbers(args.json, report)


if __name__ == "__main__":
    main()
