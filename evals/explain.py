"""Why a golden case was missed: for each evidence excerpt outside the top k, where it got lost.

A recall figure says how often retrieval fails, not why, and each cause has its own remedy:

- `not_parsed`: the excerpt is not in the parsed text of its file (the file failed, is not
  indexed, or the parser lost or garbled the passage): a parsing problem.
- `split_across_chunks`: the parsed text holds it, but no chunk does; only consecutive chunks
  read together do, or none (chunking rewrote it): a chunking problem.
- `excluded_by_sources`: the chunk holding it belongs to a document the source identifier
  left out of a search it restricted to its choice: an agent problem.
- `ranked_below_k`: a chunk holds it and nothing removed it, but every retriever ranks it
  below k; the rank in each retriever (vector, BM25, hybrid, up to a depth) says which signal
  is missing: a ranking problem.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Literal

import pandas as pd

from evals.golden_set import GoldenCase
from evals.metrics import (
    DEFAULT_THRESHOLD,
    Evidence,
    RetrievedChunk,
    excerpt_found,
    same_file,
)
from lorehouse.search.retriever import Retriever
from lorehouse.stores.duckdb_store import DuckDBStore

MissReason = Literal["not_parsed", "split_across_chunks", "excluded_by_sources", "ranked_below_k"]
MISS_REASONS: tuple[MissReason, ...] = (
    "not_parsed",
    "split_across_chunks",
    "excluded_by_sources",
    "ranked_below_k",
)
#: How deep each retriever is asked, to report the rank of evidence ranked below k.
EXPLAIN_DEPTH = 100
EXPLAIN_MODES = ("vector", "bm25", "hybrid")


@dataclass(frozen=True)
class EvidenceMiss:
    """One evidence excerpt of a missed case, and where it got lost."""

    retriever: str
    case_id: str
    case_type: str
    question: str
    file: str
    excerpt: str
    reason: MissReason
    detail: str
    #: Rank of the chunk holding the excerpt per retriever (None: below EXPLAIN_DEPTH).
    ranks: dict[str, int | None] = field(default_factory=dict)


@dataclass(frozen=True)
class _Document:
    doc_id: str
    rel_path: str
    text: str
    chunks: list[RetrievedChunk]


class MissExplainer:
    """Explains misses against the stores a run evaluated (parsed text, chunks, retrievers)."""

    def __init__(
        self,
        store: DuckDBStore,
        retriever: Retriever,
        caller_groups: Sequence[str],
        threshold: float = DEFAULT_THRESHOLD,
        depth: int = EXPLAIN_DEPTH,
    ) -> None:
        self.retriever = retriever
        self.caller_groups = list(caller_groups)
        self.threshold = threshold
        self.depth = depth
        parsed = store.parsed_for_baseline()
        chunks = store.table("chunks")
        by_doc: dict[str, list[RetrievedChunk]] = {}
        for row in chunks.itertuples(index=False):
            by_doc.setdefault(row.doc_id, []).append(
                RetrievedChunk(row.chunk_id, "", int(row.position), row.text_chat)
            )
        self.documents = [
            _Document(
                row.doc_id,
                row.rel_path,
                row.markdown,
                sorted(
                    (
                        RetrievedChunk(c.chunk_id, row.rel_path, c.position, c.text)
                        for c in by_doc.get(row.doc_id, [])
                    ),
                    key=lambda c: c.position,
                ),
            )
            for row in parsed.itertuples(index=False)
        ]

    def explain(
        self,
        retriever_name: str,
        case: GoldenCase,
        ranking: Sequence[RetrievedChunk],
        k: int,
        required_sources: Sequence[str] | None = None,
    ) -> list[EvidenceMiss]:
        """A reason for each excerpt of `case` not found in `ranking[:k]`.

        `required_sources` are the documents a search was restricted to (the agentic
        retrieval with an LLM source identifier), None when nothing restricted it.
        """
        misses = []
        top = list(ranking[:k])
        for item in case.evidence_items():
            if excerpt_found(item, top, self.threshold):
                continue
            reason, detail, ranks = self._where_lost(case.question, item, required_sources)
            misses.append(
                EvidenceMiss(
                    retriever_name,
                    case.id,
                    case.type,
                    case.question,
                    item.file,
                    item.excerpt,
                    reason,
                    detail,
                    ranks,
                )
            )
        return misses

    def _where_lost(
        self, question: str, item: Evidence, required_sources: Sequence[str] | None
    ) -> tuple[MissReason, str, dict[str, int | None]]:
        document = next((d for d in self.documents if same_file(d.rel_path, item.file)), None)
        if document is None:
            return "not_parsed", "the file is not among the parsed documents", {}
        if not excerpt_found(
            item, [RetrievedChunk("", document.rel_path, 0, document.text)], self.threshold
        ):
            return "not_parsed", "the parsed text does not hold the excerpt", {}
        holding = [c for c in document.chunks if excerpt_found(item, [c], self.threshold)]
        if not holding:
            if excerpt_found(item, document.chunks, self.threshold):
                return "split_across_chunks", "only consecutive chunks read together hold it", {}
            return "split_across_chunks", "no chunk holds it, alone or with its neighbours", {}
        if required_sources is not None and document.doc_id not in required_sources:
            return (
                "excluded_by_sources",
                f"the search was restricted to {len(required_sources)} other documents",
                {},
            )
        ids = {c.chunk_id for c in holding}
        ranks = {mode: self._rank(question, mode, ids) for mode in EXPLAIN_MODES}
        shown = ", ".join(f"{mode} {rank or f'>{self.depth}'}" for mode, rank in ranks.items())
        return "ranked_below_k", f"best rank of a chunk holding it: {shown}", ranks

    def _rank(self, question: str, mode: str, chunk_ids: set[str]) -> int | None:
        hits = self.retriever.search(
            question, top_k=self.depth, mode=mode, caller_groups=self.caller_groups
        ).hits
        return next((hit.rank for hit in hits if hit.chunk_id in chunk_ids), None)


def miss_counts(misses: Sequence[EvidenceMiss]) -> dict[str, dict[str, int]]:
    """Per retriever, how many excerpts were lost for each reason (every reason listed)."""
    counts: dict[str, dict[str, int]] = {}
    for miss in misses:
        per_reason = counts.setdefault(miss.retriever, dict.fromkeys(MISS_REASONS, 0))
        per_reason[miss.reason] += 1
    return counts


def miss_rows(misses: Sequence[EvidenceMiss], run_id: str, golden_set: str) -> pd.DataFrame:
    """Rows for DuckDB `eval_retrieval_misses`, stored with the run they explain."""
    rows = []
    for miss in misses:
        row = asdict(miss)
        ranks = row.pop("ranks")
        row.update({f"rank_{mode}": ranks.get(mode) for mode in EXPLAIN_MODES})
        rows.append({"run_id": run_id, "golden_set": golden_set, **row})
    columns = [
        "run_id",
        "golden_set",
        "retriever",
        "case_id",
        "case_type",
        "question",
        "file",
        "excerpt",
        "reason",
        "detail",
        *(f"rank_{mode}" for mode in EXPLAIN_MODES),
    ]
    return pd.DataFrame(rows, columns=columns).astype(
        {f"rank_{mode}": "Int64" for mode in EXPLAIN_MODES}
    )
