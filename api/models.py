"""Request and response bodies of the HTTP API; their constraints are the 422 rules."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from lorehouse.agents.query_optimizer import Turn
from lorehouse.retrieval import SearchFilters, SearchMode

FileTypeName = Literal["pdf", "docx", "pptx", "xlsx", "html", "md", "txt"]


class SearchFiltersIn(SearchFilters):
    """Filters as the API accepts them: known file types and a page range in order."""

    model_config = ConfigDict(extra="forbid")

    doc_ids: list[str] | None = Field(default=None, min_length=1, max_length=1000)
    file_types: list[FileTypeName] | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _pages_in_order(self) -> SearchFiltersIn:
        if self.page_from and self.page_to and self.page_from > self.page_to:
            raise ValueError("page_from must not be after page_to")
        return self


class SearchRequest(BaseModel):
    """POST /v1/search."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=2000)
    top_k: int = Field(default=8, ge=1, le=100)
    mode: SearchMode = SearchMode.HYBRID
    filters: SearchFiltersIn | None = None
    rerank: str | None = Field(
        default=None, description="none, rrf or the configured litellm reranker; unset: default"
    )

    @field_validator("query")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("query must contain more than whitespace")
        return value


class AskRequest(BaseModel):
    """POST /v1/ask."""

    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1, max_length=2000)
    history: list[Turn] = Field(default_factory=list, max_length=20)
    filters: SearchFiltersIn | None = None
    top_k: int = Field(default=8, ge=1, le=50, description="Hits retrieved per (sub-)query.")
    stream: bool = Field(default=False, description="Answer as Server-Sent Events.")

    @field_validator("question")
    @classmethod
    def _question_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("question must contain more than whitespace")
        return value


class ChunkView(BaseModel):
    """A chunk as shown in a citation preview."""

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


class ChunkPreview(BaseModel):
    """GET /v1/chunks/{chunk_id}: the cited chunk between its neighbours."""

    chunk: ChunkView
    before: list[ChunkView]
    after: list[ChunkView]


class DocumentView(BaseModel):
    doc_id: str
    title: str
    rel_path: str
    file_type: str
    summary: str | None
    n_chunks: int
    n_pages: int
    updated_at: datetime


class DocumentPage(BaseModel):
    """GET /v1/documents: one page of the documents the caller may see."""

    total: int
    limit: int
    offset: int
    documents: list[DocumentView]


class StoreHealth(BaseModel):
    reachable: bool
    ready: bool
    detail: str
    counts: dict[str, int] = Field(default_factory=dict)


class Health(BaseModel):
    """GET /healthz: whether both stores answer and hold a built index."""

    status: Literal["ok", "unavailable"]
    embedding_model: str
    lancedb: StoreHealth
    duckdb: StoreHealth
