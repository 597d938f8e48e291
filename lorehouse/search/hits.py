"""What a search returns: hits, the chunk they show, and the result around them."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from lorehouse.models import SearchMode

HIT_COLUMNS = [
    "chunk_id",
    "doc_id",
    "title",
    "rel_path",
    "source_uri",
    "file_type",
    "position",
    "heading_path",
    "page_start",
    "page_end",
    "is_table",
    "language",
    "text_chat",
]


class ChunkView(BaseModel):
    """A chunk as a reader sees it: its text and where it sits in its document."""

    chunk_id: str
    doc_id: str
    title: str | None
    rel_path: str
    position: int
    heading_path: list[str]
    page_start: int | None
    page_end: int | None
    is_table: bool
    text_chat: str
    language: str | None = Field(
        default=None,
        description="ISO 639-1 code of the chunk's language, told among the deployment's.",
    )


class SearchHit(ChunkView):
    """One retrieved chunk with what a citation needs and a score per stage."""

    rank: int
    source_uri: str = Field(
        description="The file's path relative to its source: server paths never leave it."
    )
    file_type: str
    score: float = Field(description="The score of the stage that decided the order.")
    scores: dict[str, float] = Field(description="vector (cosine), bm25, rrf, maxsim, rerank.")
    citation: str = Field(
        description="Path of the chunk's preview in the API, pinned to the index version the "
        "hit was read from, so it opens the same passage after a reindex."
    )
    index_version: int | None = Field(
        default=None, description="The version of the chunks table the hit was read from."
    )
    passage_chunk_ids: list[str] = Field(
        default_factory=list,
        description=(
            "For a search asking for passages: the chunks the hit's text joins, in reading "
            "order (`chunk_id` is the one that ranked). Empty when the search returns chunks."
        ),
    )
    passage_parts: list[ChunkView] = Field(
        default_factory=list,
        exclude=True,
        description=(
            "In the process only, never in a response: the joined chunks, each with its own "
            "text and heading, which extractive answers read one by one (read whole, every "
            "sentence took the ranked chunk's heading)."
        ),
    )


#: What became of a cited chunk since the version it was cited from.
ChunkSince = Literal["unchanged", "changed", "removed"]


class SearchResult(BaseModel):
    """Hits in order plus how they were found."""

    query: str
    mode: SearchMode
    rerank: str
    hits: list[SearchHit]
    timings_ms: dict[str, float]
    warnings: list[str] = Field(default_factory=list)
    asks: list[str] = Field(
        default_factory=list,
        description=(
            "The queries of a question with several asks, each also searched; its hits take "
            "turns with the whole question's. Empty for a single ask."
        ),
    )
    translations: dict[str, str] = Field(
        default_factory=dict,
        description=(
            "For a question in a language almost none of your passages are in, searched with "
            "a translator configured: the language (ISO 639-1) its keyword (BM25) leg ranked "
            "in, and the translation it ranked."
        ),
    )


def hit_from_row(
    row: dict,
    rank: int = 0,
    scores: dict[str, float] | None = None,
    decisive: str = "",
    version: int | None = None,
) -> SearchHit:
    """A stored chunk row as a hit (scores empty for rows not ranked, e.g. neighbours),
    read from `version` of the chunks table."""
    scores = scores or {}
    citation = f"/v1/chunks/{row['chunk_id']}"
    return SearchHit(
        rank=rank,
        chunk_id=row["chunk_id"],
        doc_id=row["doc_id"],
        title=row["title"],
        rel_path=row["rel_path"],
        # The stored URI names the server's folders (or a bucket); a caller is told only
        # where the file sits in its source.
        source_uri=row["rel_path"],
        file_type=row["file_type"],
        position=int(row["position"]),
        heading_path=list(row["heading_path"] or []),
        page_start=row["page_start"],
        page_end=row["page_end"],
        is_table=bool(row["is_table"]),
        language=row["language"],
        text_chat=row["text_chat"],
        score=round(scores.get(decisive, 0.0), 6),
        scores={k: round(v, 6) for k, v in scores.items()},
        citation=citation if version is None else f"{citation}?version={version}",
        index_version=version,
    )
