"""BEIR benchmarks: index a BEIR dataset into its own store and score each retriever on it.

A BEIR dataset is a folder with `corpus.jsonl` (`_id`, `title`, `text`), `queries.jsonl`
(`_id`, `text`) and `qrels/<split>.tsv` (query id, corpus id, graded relevance). Each corpus
document becomes one row of a LanceDB chunks table, as BEIR's own dense and BM25 baselines
index whole documents (the embedding model truncates at 256 tokens), so the figures compare
with the published ones. Scores come from ir-measures over trec_eval (pytrec-eval-terrier),
the implementation the BEIR paper used.
"""

from __future__ import annotations

import csv
import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from lorehouse.embedding.base import Embedder
from lorehouse.search.retriever import Retriever
from lorehouse.search.token_vectors import TokenEncoder
from lorehouse.stages.embed import (
    EmbedReport,
    ProgressCallback,
    joint_pass,
    keyed_rows,
    sync_sentences,
    sync_table,
    sync_token_vectors,
)
from lorehouse.stores.lance_index import ChunkIndex, chunk_schema

#: The measures reported per retriever, as named in the output (ir_measures' names).
MEASURES = {"ndcg@10": "nDCG@10", "recall@10": "R@10", "recall@100": "R@100", "mrr@10": "RR@10"}
DEPTH = 100


def _ir_measures():  # noqa: ANN202 (the module, imported only where BEIR is scored)
    """trec_eval's measures, from the `eval` extra: only BEIR scoring needs them."""
    try:
        import ir_measures
    except ImportError as error:
        raise ImportError(
            "BEIR scoring needs the eval extra: pip install 'lorehouse[eval]'"
        ) from error
    return ir_measures


class BeirFormatError(ValueError):
    """The folder is not a BEIR dataset; the message names the file and line."""


@dataclass(frozen=True)
class BeirDocument:
    title: str
    text: str


@dataclass
class BeirDataset:
    """The documents, the split's queries and their relevance judgements."""

    name: str
    split: str
    corpus: dict[str, BeirDocument]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]


def load_beir(directory: Path, split: str = "test", max_queries: int | None = None) -> BeirDataset:
    """Reads a BEIR folder; only queries judged in the split are kept, in qrels order."""
    qrels_path = directory / "qrels" / f"{split}.tsv"
    for required in (directory / "corpus.jsonl", directory / "queries.jsonl", qrels_path):
        if not required.is_file():
            raise BeirFormatError(f"{required} is missing: not a BEIR dataset with split {split!r}")
    qrels = _read_qrels(qrels_path)
    if max_queries is not None:
        qrels = dict(list(qrels.items())[:max_queries])
    all_queries = {row["_id"]: row["text"] for row in _jsonl(directory / "queries.jsonl")}
    unknown = [query_id for query_id in qrels if query_id not in all_queries]
    if unknown:
        raise BeirFormatError(f"{qrels_path}: query ids not in queries.jsonl: {unknown[:5]}")
    corpus = {
        str(row["_id"]): BeirDocument(row.get("title") or "", row.get("text") or "")
        for row in _jsonl(directory / "corpus.jsonl")
    }
    return BeirDataset(
        name=directory.resolve().name,
        split=split,
        corpus=corpus,
        queries={query_id: all_queries[query_id] for query_id in qrels},
        qrels=qrels,
    )


def _jsonl(path: Path) -> Iterator[dict]:
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                raise BeirFormatError(f"{path}:{number}: not JSON: {error}") from error
            if "_id" not in row:
                raise BeirFormatError(f"{path}:{number}: no `_id` field")
            row["_id"] = str(row["_id"])
            yield row


def _read_qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle, delimiter="\t")
        for number, row in enumerate(reader, start=1):
            if number == 1 and row and not row[-1].strip().lstrip("-").isdigit():
                continue  # the `query-id corpus-id score` header
            if not row:
                continue
            if len(row) != 3:
                raise BeirFormatError(f"{path}:{number}: expected 3 tab-separated columns")
            query_id, doc_id, score = row
            try:
                qrels.setdefault(query_id, {})[doc_id] = int(score)
            except ValueError as error:
                message = f"{path}:{number}: score {score!r} is not an integer"
                raise BeirFormatError(message) from error
    return qrels


def corpus_rows(dataset: BeirDataset, model: str) -> pd.DataFrame:
    """One chunks-table row per document: title and text embedded together, as in BEIR.

    `text_enriched` holds the title alone, since BEIR documents have no LLM enrichment; the
    field-level reranker then fuses dense, full-text BM25 and title BM25 rankings.
    """
    ids = list(dataset.corpus)
    documents = [dataset.corpus[doc_id] for doc_id in ids]
    frame = pd.DataFrame(
        {
            "chunk_id": ids,
            "doc_id": ids,
            "title": [d.title for d in documents],
            "rel_path": ids,
            "source_uri": [f"beir://{dataset.name}/{doc_id}" for doc_id in ids],
            "file_type": "beir",
            "position": pd.Series([0] * len(ids), dtype="int32"),
            "heading_path": [[] for _ in ids],
            "page_start": [None] * len(ids),
            "page_end": [None] * len(ids),
            "is_table": False,
            "language": "en",  # BEIR's sets are English
            "acl": [[] for _ in ids],
            "text_chat": [d.text for d in documents],
            "text_embed": [f"{d.title}\n{d.text}".strip() for d in documents],
            "text_enriched": [d.title for d in documents],
        }
    )
    return keyed_rows(frame, "text_embed", model)


@dataclass
class IndexOutcome:
    documents: int
    embedded: int
    seconds: float
    sentence_windows_embedded: int = 0
    token_vectors_embedded: int = 0


def index_dataset(
    dataset: BeirDataset,
    index: ChunkIndex,
    embedder: Embedder,
    batch_size: int = 64,
    on_progress: ProgressCallback | None = None,
    token_encoder: TokenEncoder | None = None,
    sentence_windows: bool = True,
) -> IndexOutcome:
    """Brings the dataset's tables in line with its corpus; a rerun embeds nothing."""
    started = time.perf_counter()
    report = EmbedReport(model=embedder.name, dimension=getattr(embedder, "dimension", None))
    rows = corpus_rows(dataset, embedder.name)
    document_embedder, captured = joint_pass(embedder, token_encoder)
    outcome = sync_table(
        index, rows, "text_embed", chunk_schema, document_embedder, batch_size, report, on_progress
    )
    report.provider_failure = outcome.failure
    sync_sentences(index, rows, embedder, batch_size, report, on_progress, windows=sentence_windows)
    sync_token_vectors(index, rows, token_encoder, batch_size, report, on_progress, captured)
    return IndexOutcome(
        len(dataset.corpus),
        outcome.embedded,
        time.perf_counter() - started,
        report.sentences_embedded,
        report.token_vectors_embedded,
    )


#: (query, depth) -> ranked document ids, best first.
DocumentRanker = Callable[[str, int], list[str]]


@dataclass
class RetrieverScores:
    retriever: str
    scores: dict[str, float]
    query_ms_median: float


@dataclass
class BeirReport:
    dataset: str
    split: str
    n_documents: int
    n_queries: int
    index_seconds: float
    documents_embedded: int
    sentence_windows_embedded: int = 0
    token_vectors_embedded: int = 0
    results: list[RetrieverScores] = field(default_factory=list)

    def summary(self) -> dict:
        """The CLI's --json object."""
        return {
            "dataset": self.dataset,
            "split": self.split,
            "n_documents": self.n_documents,
            "n_queries": self.n_queries,
            "index_seconds": round(self.index_seconds, 1),
            "documents_embedded": self.documents_embedded,
            "sentence_windows_embedded": self.sentence_windows_embedded,
            "token_vectors_embedded": self.token_vectors_embedded,
            "results": [
                {
                    "retriever": r.retriever,
                    **{name: round(value, 4) for name, value in r.scores.items()},
                    "query_ms_median": round(r.query_ms_median, 1),
                }
                for r in self.results
            ],
        }


def score_run(qrels: dict[str, dict[str, int]], run: dict[str, list[str]]) -> dict[str, float]:
    """trec_eval's nDCG@10, recall@10, recall@100 and MRR@10 of ranked lists, averaged.

    Scores are derived from ranks, so trec_eval's sort by score cannot reorder ties; a query
    with no result still counts (as 0), as in trec_eval's `-c` convention BEIR uses.
    """
    ir_measures = _ir_measures()
    scored = {
        query_id: {doc_id: float(len(ranking) - rank) for rank, doc_id in enumerate(ranking)}
        for query_id, ranking in run.items()
    }
    per_query: dict[str, dict[str, float]] = {q: {} for q in qrels}
    measures = {name: ir_measures.parse_measure(measure) for name, measure in MEASURES.items()}
    by_measure = {measure: name for name, measure in measures.items()}
    for metric in ir_measures.iter_calc(list(measures.values()), qrels, scored):
        per_query[metric.query_id][by_measure[metric.measure]] = metric.value
    return {
        name: sum(values.get(name, 0.0) for values in per_query.values()) / len(per_query)
        for name in MEASURES
    }


def search_ranker(retriever: Retriever, mode: str, rerank: str) -> DocumentRanker:
    def rank(query: str, depth: int) -> list[str]:
        result = retriever.search(query, top_k=depth, mode=mode, rerank=rerank)
        return [hit.doc_id for hit in result.hits]

    return rank


def evaluate_rankers(
    dataset: BeirDataset,
    rankers: Sequence[tuple[str, DocumentRanker]],
    depth: int = DEPTH,
    on_query: ProgressCallback | None = None,
) -> list[RetrieverScores]:
    """Runs every query through every ranker and scores the rankings against the qrels."""
    results = []
    total = len(dataset.queries) * len(rankers)
    for name, rank in rankers:
        run: dict[str, list[str]] = {}
        latencies = []
        for query_id, query in dataset.queries.items():
            started = time.perf_counter()
            run[query_id] = rank(query, depth)
            latencies.append(1000 * (time.perf_counter() - started))
            if on_query:
                on_query(len(results) * len(dataset.queries) + len(run), total)
        latencies.sort()
        results.append(
            RetrieverScores(name, score_run(dataset.qrels, run), latencies[len(latencies) // 2])
        )
    return results
