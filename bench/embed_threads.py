"""How the bundled embedder's speed follows its threads (`LOREHOUSE_EMBED_THREADS`).

Embedding is most of an offline build (`bench/scale.py`), so whether a run pod with more cores
builds faster depends on how onnxruntime's intra-op threads scale on these texts. Chunk-sized
texts are cut from the handbook's Markdown (paragraphs joined up to about 600 characters);
each thread count gets its own embedder, one untimed warm-up call, then the best of
`--repeat` timed passes over the same texts. Run from the repository root:

    .venv/bin/python bench/embed_threads.py --threads 1 2 [--texts 320] [--json OUT]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from machine import machine_info, write_raw_numbers  # bench/machine.py, beside this script

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

HANDBOOK = REPO_ROOT.parent / "shared" / "corpus" / "handbook-sourcegraph"


def chunk_sized_texts(folder: Path, wanted: int, characters: int = 600) -> list[str]:
    """Paragraphs of the folder's Markdown joined into texts of about `characters`."""
    texts: list[str] = []
    current = ""
    for path in sorted(folder.rglob("*.md")):
        for paragraph in path.read_text(encoding="utf-8").split("\n\n"):
            current = f"{current}\n\n{paragraph}".strip()
            if len(current) >= characters:
                texts.append(current)
                current = ""
                if len(texts) == wanted:
                    return texts
    if len(texts) < wanted:
        raise SystemExit(f"{folder} holds only {len(texts)} texts of {characters} characters")
    return texts


def measure(threads: int, texts: list[str], repeat: int) -> dict[str, Any]:
    from lorehouse.embedding.minilm import OnnxMiniLMEmbedder

    embedder = OnnxMiniLMEmbedder(intra_op_threads=threads)
    embedder.embed(texts[:32])  # loads the model
    passes = []
    for _ in range(repeat):
        started = time.perf_counter()
        embedder.embed(texts, batch_size=64)
        passes.append(time.perf_counter() - started)
    best = min(passes)
    return {
        "threads": threads,
        "seconds": round(best, 2),
        "passes": [round(p, 2) for p in passes],
        "texts_per_second": round(len(texts) / best, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--texts", type=int, default=320)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--source", type=Path, default=HANDBOOK)
    parser.add_argument("--json", type=Path, default=None, help="also write raw numbers here")
    args = parser.parse_args()

    from lorehouse.offline import apply_offline_environment

    apply_offline_environment()
    texts = chunk_sized_texts(args.source, args.texts)
    results = [measure(threads, texts, args.repeat) for threads in args.threads]
    base = results[0]["texts_per_second"]
    print(f"{len(texts)} texts, best of {args.repeat} passes\n")
    print("| threads | seconds | texts/s | ratio to first |")
    print("|---:|---:|---:|---:|")
    for result in results:
        ratio = result["texts_per_second"] / base
        result["ratio_to_first"] = round(ratio, 2)
        print(
            f"| {result['threads']} | {result['seconds']:.2f} "
            f"| {result['texts_per_second']:.1f} | {ratio:.2f}x |"
        )
    info = machine_info(["onnxruntime", "tokenizers"])
    print(f"\n{info['cpu_count']} cores, Python {info['python']}, {info['platform']}")
    if args.json:
        write_raw_numbers(args.json, {"machine": info, "texts": len(texts), "results": results})


if __name__ == "__main__":
    main()
