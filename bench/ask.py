"""The answer pipeline's own overhead per question, on the bundled sample corpus.

Everything /v1/ask does besides waiting for a language model (query embedding, document
ranking, retrieval per sub-query, post-processing, the extractive answerer's sentence
embeddings) is measured per question, from the trace every answer carries:

* offline: the default configuration, no LLM; the whole time is pipeline overhead;
* LLM steps mocked: litellm's `mock_response` answers instantly, so total - llm_ms is the
  overhead the pipeline adds around a real model (prompt building, validation, citations).

Reported as median and p95 milliseconds per question. Run from the repository root:

    .venv/bin/python bench/ask.py [--data-dir DIR] [--repeat 3]

Without --data-dir the sample corpus is materialized into a temporary folder first.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

QUESTIONS = [
    "How many weeks of parental leave do primary caregivers get?",
    "Who approves expenses over 5,000 EUR?",
    "What is the per diem for meals when travelling?",
    "How do I report a lost laptop?",
    "What does the on-call engineer do for a SEV1 incident?",
    "Which benefits apply in Singapore?",
    "How many vacation days do employees get?",
    "What is the engineering budget for 2026?",
    "Can I use my personal email for work?",
    "What is the capital of Mongolia?",
]


def _materialize(data_dir: Path) -> None:
    import dagster as dg

    from assets import chunks, documents, embeddings, features
    from assets.checks import checks_of
    from assets.partitioning import all_partitions_tags
    from assets.resources import build_resources
    from lorehouse.settings import BUNDLED_SAMPLE_CORPUS, Settings

    modules = [documents, chunks, features, embeddings]
    settings = Settings(source_uri=str(BUNDLED_SAMPLE_CORPUS), data_dir=data_dir, workers=2)
    result = dg.materialize(
        [*dg.load_assets_from_modules(modules), *checks_of(modules)],
        resources=build_resources(settings),
        instance=dg.DagsterInstance.ephemeral(),
        tags=all_partitions_tags(settings.index_partitions),
    )
    if not result.success:
        raise SystemExit("materialization failed")


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    from lorehouse.agents.ask import AskPipeline
    from lorehouse.llm import LLMClient
    from lorehouse.search.retriever import Retriever
    from lorehouse.stores.lance_index import ChunkIndex
    from lorehouse.wiring import Lorehouse

    with tempfile.TemporaryDirectory() as scratch:
        data_dir = args.data_dir
        if data_dir is None:
            data_dir = Path(scratch) / "data"
            print("materializing the sample corpus...", file=sys.stderr)
            _materialize(data_dir)
        index = ChunkIndex(str(data_dir / "lancedb"))
        deployment = Lorehouse()
        embedder = deployment.bundled_model()
        retriever = Retriever(index, embedder)
        options = deployment.ask_options()
        mock = LLMClient(
            "openai/gpt-4o-mini",
            backoff_seconds=0,
            call_options={"mock_response": "Per the documents, yes [1]."},
        )
        configurations = {
            "offline (extractive)": AskPipeline(
                retriever, index.documents(), embedder, None, options
            ),
            "LLM steps mocked": AskPipeline(retriever, index.documents(), embedder, mock, options),
        }
        configurations["offline (extractive)"].ask(QUESTIONS[0])  # warm the model up
        header = "| configuration | questions | median overhead ms | p95 overhead ms | LLM calls |"
        print(header)
        print("|---|---:|---:|---:|---:|")
        for name, pipeline in configurations.items():
            overheads, calls = [], []
            for _ in range(args.repeat):
                for question in QUESTIONS:
                    totals = pipeline.ask(question).totals
                    overheads.append(totals["ms"] - totals["llm_ms"])
                    calls.append(totals["llm_calls"])
            print(
                f"| {name} | {len(overheads)} | {statistics.median(overheads):.0f} "
                f"| {_percentile(overheads, 0.95):.0f} | {statistics.mean(calls):.1f} |"
            )


if __name__ == "__main__":
    main()
