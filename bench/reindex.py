"""What a reindex costs compared with a full build, on the sample corpus and a generated one.

For each corpus the indexing stages (raw_documents through chunk_embeddings, with their
checks, as the nightly job runs them) are materialized three times into fresh stores:

* full: empty stores, every document parsed, chunked, enriched and embedded;
* no change: the same files again; the goal is a wall time of at most 5 % of the full run;
* churn: 1 % of the documents edited, the nightly case the scale-out estimate is based on.

It also times what a partition-per-document design would pay Dagster per document before doing
any work (`--partitions`, runs of a no-op dynamically partitioned asset).

Each run is timed end to end (Dagster's own overhead included) and per stage from the
assets' `seconds` metadata. The generated corpus is Markdown and HTML policy documents made
from a fixed seed, so every run of the benchmark indexes the same text. Run from the
repository root:

    .venv/bin/python bench/reindex.py [--documents 2000] [--json bench/reindex.json]
"""

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import dagster as dg
from machine import machine_info, write_raw_numbers  # bench/machine.py, beside this script

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

STAGES = {
    "parsed_documents": "parse",
    "chunks": "chunk",
    "enriched_chunks": "enrich",
    "chunk_embeddings": "embed",
}
_TOPICS = [
    "travel", "expenses", "security", "onboarding", "laptops", "vendors", "payroll", "leave",
    "incidents", "backups", "access", "training", "procurement", "contracts", "privacy",
    "benefits", "offices", "releases", "hiring", "budgets",
]  # fmt: skip
_VERBS = ["approves", "reviews", "records", "escalates", "archives", "audits", "signs", "tracks"]
_ROLES = ["the team lead", "Finance", "the People Team", "the security officer", "IT support"]
_CITIES = ["Lisbon", "Toronto", "Singapore", "Berlin", "Austin", "Nairobi", "Osaka"]


def generate_corpus(root: Path, documents: int, seed: int = 7) -> None:
    """Writes `documents` policy files (90 % Markdown, 10 % HTML) of about 400 words."""
    rng = random.Random(seed)
    for number in range(documents):
        topic = rng.choice(_TOPICS)
        title = f"{topic.title()} policy {number:05d}"
        sections = []
        for index in range(rng.randint(2, 3)):
            paragraphs = [_paragraph(rng, topic) for _ in range(rng.randint(1, 2))]
            sections.append((f"{index + 1}. {rng.choice(_TOPICS).title()} rules", paragraphs))
        folder = root / topic
        folder.mkdir(parents=True, exist_ok=True)
        if number % 10 == 9:
            body = "".join(
                f"<h2>{heading}</h2>" + "".join(f"<p>{p}</p>" for p in paragraphs)
                for heading, paragraphs in sections
            )
            (folder / f"policy-{number:05d}.html").write_text(
                f"<html><head><title>{title}</title></head><body><h1>{title}</h1>{body}"
                "</body></html>"
            )
        else:
            body = "\n\n".join(
                f"## {heading}\n\n" + "\n\n".join(paragraphs) for heading, paragraphs in sections
            )
            (folder / f"policy-{number:05d}.md").write_text(f"# {title}\n\n{body}\n")


def _paragraph(rng: random.Random, topic: str) -> str:
    sentences = []
    for _ in range(rng.randint(3, 5)):
        amount = rng.randint(2, 400) * 25
        sentences.append(
            f"{rng.choice(_ROLES).capitalize()} {rng.choice(_VERBS)} every {topic} request "
            f"above {amount} EUR in {rng.choice(_CITIES)} within {rng.randint(1, 30)} days, "
            f"and {rng.choice(_ROLES)} {rng.choice(_VERBS)} the {rng.choice(_TOPICS)} record."
        )
    return " ".join(sentences)


def churn(root: Path, share: float, seed: int = 11) -> int:
    """Edits `share` of the files (one appended sentence each); returns how many."""
    files = sorted(p for p in root.rglob("*") if p.is_file())
    chosen = random.Random(seed).sample(files, max(1, round(share * len(files))))
    for path in chosen:
        text = path.read_text()
        sentence = "Requests filed after the deadline are reviewed in the next cycle."
        if path.suffix == ".html":
            path.write_text(text.replace("</body>", f"<p>{sentence}</p></body>"))
        else:
            path.write_text(text + f"\n{sentence}\n")
    return len(chosen)


def materialize(source: Path, data_dir: Path) -> dict[str, Any]:
    """One run of the indexing stages; wall seconds and per-stage figures from metadata."""
    from assets import chunks, documents, embeddings, features
    from assets.checks import checks_of
    from assets.partitioning import all_partitions_tags
    from assets.resources import build_resources
    from lorehouse.settings import Settings

    modules = [documents, chunks, features, embeddings]
    settings = Settings(source_uri=str(source), data_dir=data_dir, workers=2)
    started = time.perf_counter()
    result = dg.materialize(
        [*dg.load_assets_from_modules(modules), *checks_of(modules)],
        resources=build_resources(settings),
        instance=dg.DagsterInstance.ephemeral(),
        tags=all_partitions_tags(settings.index_partitions),
    )
    wall = time.perf_counter() - started
    if not result.success:
        raise SystemExit(f"materialization of {source} failed")
    metadata = {
        event.asset_key.to_user_string(): {
            k: v.value for k, v in event.materialization.metadata.items()
        }
        for event in result.get_asset_materialization_events()
    }
    return {
        "wall_seconds": round(wall, 2),
        "stage_seconds": {
            label: metadata[asset].get("seconds", 0) for asset, label in STAGES.items()
        },
        "documents": metadata["raw_documents"]["dagster/row_count"],
        "parsed": metadata["parsed_documents"]["parsed_this_run"],
        "chunks": metadata["chunks"]["dagster/row_count"],
        "chunked_documents": metadata["chunks"]["documents_chunked"],
        "enrichments_computed": metadata["enriched_chunks"]["computed"],
        "llm_calls": metadata["enriched_chunks"]["llm_calls"],
        "embedded": metadata["chunk_embeddings"]["embedded"],
        "documents_embedded": metadata["chunk_embeddings"]["documents_embedded"],
    }


def measure(name: str, source: Path, workdir: Path, churn_share: float) -> dict[str, Any]:
    """Full, no-change and churn runs of one corpus (the corpus folder is edited in place)."""
    data_dir = workdir / f"{name}-data"
    print(f"[{name}] full build...", file=sys.stderr)
    full = materialize(source, data_dir)
    print(f"[{name}] no-change reindex...", file=sys.stderr)
    unchanged = materialize(source, data_dir)
    edited = churn(source, churn_share)
    print(f"[{name}] reindex after editing {edited} documents...", file=sys.stderr)
    churned = materialize(source, data_dir)
    return {
        "corpus": name,
        "full": full,
        "no_change": unchanged,
        "churn": {**churned, "edited_documents": edited},
        "no_change_ratio": round(unchanged["wall_seconds"] / full["wall_seconds"], 4),
        "churn_ratio": round(churned["wall_seconds"] / full["wall_seconds"], 4),
    }


_DOCUMENT_PARTITIONS = dg.DynamicPartitionsDefinition(name="documents")


@dg.asset(partitions_def=_DOCUMENT_PARTITIONS)
def parsed_document(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    """A no-op stand-in for one document's stage: only Dagster's own work is timed."""
    return dg.MaterializeResult(metadata={"document": context.partition_key})


def partition_overhead(partitions: int) -> dict[str, float]:
    """Dagster's cost per document if every document were a dynamic partition.

    One no-op asset partitioned by document, one run per partition (what a sensor adding a
    partition per changed file launches): nothing is parsed or embedded, so the time is the
    orchestration alone, the floor under a partition-per-document design.
    """
    keys = [f"doc-{n:05d}" for n in range(partitions)]
    with tempfile.TemporaryDirectory() as home, dg.DagsterInstance.local_temp(home) as instance:
        instance.add_dynamic_partitions("documents", keys)
        started = time.perf_counter()
        for key in keys:
            result = dg.materialize([parsed_document], partition_key=key, instance=instance)
            if not result.success:
                raise SystemExit(f"partition {key} failed")
        seconds = time.perf_counter() - started
    return {"partitions": partitions, "seconds_per_partition": round(seconds / partitions, 4)}


def _table(results: list[dict[str, Any]]) -> str:
    lines = [
        "| corpus | documents | chunks | run | wall s | parse s | chunk s | enrich s | embed s "
        "| parsed | chunked | enriched | embedded | ratio to full |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for result in results:
        full_wall = result["full"]["wall_seconds"]
        for run in ("full", "no_change", "churn"):
            figures = result[run]
            stages = figures["stage_seconds"]
            label = run.replace("_", " ")
            if run == "churn":
                label = f"churn ({figures['edited_documents']} edited)"
            lines.append(
                f"| {result['corpus']} | {figures['documents']} | {figures['chunks']} | {label} "
                f"| {figures['wall_seconds']:.1f} | {stages['parse']:.1f} | {stages['chunk']:.1f} "
                f"| {stages['enrich']:.1f} | {stages['embed']:.1f} | {figures['parsed']} "
                f"| {figures['chunked_documents']} | {figures['enrichments_computed']} "
                f"| {figures['embedded']} | {figures['wall_seconds'] / full_wall:.3f} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=2000, help="generated corpus size")
    parser.add_argument("--churn", type=float, default=0.01, help="share edited before run 3")
    parser.add_argument("--skip-sample", action="store_true", help="only the generated corpus")
    parser.add_argument(
        "--partitions", type=int, default=100, help="runs timed for the per-partition overhead"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write raw numbers here")
    args = parser.parse_args()

    from lorehouse.offline import apply_offline_environment
    from lorehouse.settings import BUNDLED_SAMPLE_CORPUS

    apply_offline_environment()
    results = []
    with tempfile.TemporaryDirectory() as scratch:
        workdir = Path(scratch)
        if not args.skip_sample:
            sample = workdir / "sample"
            shutil.copytree(BUNDLED_SAMPLE_CORPUS, sample)
            results.append(measure("sample", sample, workdir, args.churn))
        generated = workdir / "generated"
        generate_corpus(generated, args.documents)
        results.append(measure(f"generated-{args.documents}", generated, workdir, args.churn))
    print(_table(results))
    overhead = partition_overhead(args.partitions) if args.partitions else None
    if overhead:
        print(
            f"\nOne run per dynamic partition: {overhead['seconds_per_partition'] * 1000:.0f} ms "
            f"of orchestration per document ({overhead['partitions']} runs of a no-op asset)"
        )
    info = machine_info(["dagster", "lancedb", "duckdb", "onnxruntime", "unstructured"])
    print(f"\n{info['cpu_count']} cores, Python {info['python']}, {info['platform']}")
    if args.json:
        payload = {"machine": info, "results": results, "partition_overhead": overhead}
        write_raw_numbers(args.json, payload)


if __name__ == "__main__":
    main()
