"""Bytes per document of a built index, table by table, beside int8 token vectors.

Reads a data folder a build wrote (`LOREHOUSE_DATA_DIR`) and sums, for each LanceDB table
of the shared index and of the partitions, the data files its current version references:
what a deployment stores for the index as it is, not the older versions kept for cited
passages. The token vectors are stored as sign bits (`lorehouse.search.token_vectors`); the
baseline is the same tokens at int8 with a float32 scale (388 bytes a token at 384
dimensions), which earlier builds stored, computed from the same rows in the same run.

    .venv/bin/python bench/storage.py /path/to/data_dir [--json out.json]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import lance

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import machine_info, write_raw_numbers

INT8_BYTES_PER_COMPONENT = 1
INT8_SCALE_BYTES = 4


def table_bytes(path: Path) -> tuple[int, int]:
    """(bytes of the data files the current version references, rows)."""
    dataset = lance.dataset(str(path))
    total = sum(
        (path / "data" / data_file.path).stat().st_size
        for fragment in dataset.get_fragments()
        for data_file in fragment.data_files()
    )
    return total, dataset.count_rows()


def token_count(path: Path, dimension: int) -> int:
    """Tokens stored in a token table: its packed bytes over a token's bits."""
    dataset = lance.dataset(str(path))
    vectors = dataset.to_table(columns=["vector"])["vector"]
    return sum(len(value) for value in vectors.to_pylist()) // (dimension // 8)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", type=Path)
    parser.add_argument("--dimension", type=int, default=384)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    databases = {"shared": args.data_dir / "lancedb"}
    databases |= {
        path.stem: path for path in sorted((args.data_dir / "partitions").glob("*.lancedb"))
    }
    sizes: dict[str, dict[str, int]] = {}
    tokens = 0
    for name, database in databases.items():
        for table in sorted(database.glob("*.lance")):
            size, rows = table_bytes(table)
            where = "shared" if name == "shared" else "partitions"
            entry = sizes.setdefault(f"{where}/{table.stem}", {"bytes": 0, "rows": 0})
            entry["bytes"] += size
            entry["rows"] += rows
            if where == "partitions" and table.stem == "token_vectors":
                tokens += token_count(table, args.dimension)
    documents = sizes.get("partitions/documents", {}).get("rows", 0)
    if not documents:
        raise SystemExit(f"{args.data_dir} holds no partition's documents table: build it first")
    partitions = {k: v for k, v in sizes.items() if k.startswith("partitions/")}
    total = sum(v["bytes"] for v in partitions.values())
    bits = partitions.get("partitions/token_vectors", {}).get("bytes", 0)
    int8 = tokens * (args.dimension * INT8_BYTES_PER_COMPONENT + INT8_SCALE_BYTES)
    with_int8 = total - bits + int8
    print(f"{documents} documents, {tokens} tokens; one copy (the partitions'), per document:")
    for key, value in sorted(partitions.items()):
        print(f"  {key:28} {value['bytes'] / documents / 1e3:9.1f} KB  ({value['rows']} rows)")
    print(f"  {'all tables, sign bits':28} {total / documents / 1e3:9.1f} KB")
    print(f"  {'all tables, int8 baseline':28} {with_int8 / documents / 1e3:9.1f} KB")
    print(f"  ratio {total / with_int8:.2f}x of the int8 baseline")
    if args.json:
        write_raw_numbers(
            args.json,
            {
                "machine": machine_info(["pylance", "lancedb"]),
                "documents": documents,
                "tokens": tokens,
                "tables": sizes,
                "bytes_per_document": total / documents,
                "int8_bytes_per_document": with_int8 / documents,
            },
        )


if __name__ == "__main__":
    main()
