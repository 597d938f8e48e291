"""Data contracts (pandera) for the tables each stage writes.

Checked after every materialization, so a stage that starts writing bad rows is caught at the
stage that wrote them, not three stages later as a mysterious retrieval miss.
"""

from __future__ import annotations

import json

import pandas as pd
import pandera.pandas as pa

from lorehouse.models import FailureReason, FileType

_SHA256 = r"^[0-9a-f]{64}$"


class RawDocumentsSchema(pa.DataFrameModel):
    """documents_raw: one row per source file."""

    doc_id: str = pa.Field(unique=True, str_length={"min_value": 8})
    source_uri: str = pa.Field(str_length={"min_value": 1})
    rel_path: str = pa.Field(unique=True, str_length={"min_value": 1})
    file_type: str = pa.Field(isin=[t.value for t in FileType])
    size_bytes: int = pa.Field(ge=0)
    content_sha256: str = pa.Field(str_matches=_SHA256)

    class Config:
        strict = False
        coerce = True


class ParsedDocumentsSchema(pa.DataFrameModel):
    """documents_parsed: Markdown per document, with a page map covering all of it."""

    doc_id: str = pa.Field(unique=True)
    content_sha256: str = pa.Field(str_matches=_SHA256)
    markdown: str = pa.Field(str_length={"min_value": 1})
    page_count: int = pa.Field(ge=1)
    parser_version: str = pa.Field(str_length={"min_value": 1})
    parse_ms: float = pa.Field(ge=0)

    class Config:
        strict = False
        coerce = True

    @pa.dataframe_check(error="page_map must cover every character of the Markdown, in order")
    @classmethod
    def page_map_covers_markdown(cls, frame: pd.DataFrame) -> pd.Series:
        return pd.Series(
            [_covers(m, p) for m, p in zip(frame["markdown"], frame["page_map"], strict=True)],
            index=frame.index,
        )


class FailedDocumentsSchema(pa.DataFrameModel):
    """documents_failed: why a document did not make it through a stage."""

    doc_id: str
    stage: str = pa.Field(isin=["parse", "chunk", "enrich", "embed"])
    reason: str = pa.Field(isin=[r.value for r in FailureReason])
    detail: str = pa.Field(str_length={"min_value": 1})

    class Config:
        strict = False
        coerce = True


def _covers(markdown: str, page_map: str | list) -> bool:
    spans = json.loads(page_map) if isinstance(page_map, str) else page_map
    position = 0
    for span in spans:
        if span["start"] != position or span["end"] < span["start"] or span["page"] < 1:
            return False
        position = span["end"]
    return position == len(markdown)


def chunks_schema(max_tokens: int) -> pa.DataFrameSchema:
    """chunks: non-empty texts within the token limit, positions 0..n-1 in every document.

    Built per limit because the limit is a setting; a chunk over it would be truncated by the
    embedding model without anyone noticing.
    """
    return pa.DataFrameSchema(
        {
            "chunk_id": pa.Column(str, unique=True),
            "doc_id": pa.Column(str),
            "position": pa.Column(int, pa.Check.ge(0)),
            "text_embed": pa.Column(str, pa.Check.str_length(min_value=1)),
            "text_chat": pa.Column(str, pa.Check.str_length(min_value=1)),
            "token_count": pa.Column(int, [pa.Check.gt(2), pa.Check.le(max_tokens)]),
            "is_table": pa.Column(bool),
        },
        checks=[
            pa.Check(
                lambda frame: frame["text_embed"].str.strip().str.len() > 0,
                error="a chunk's text is blank",
            ),
        ],
        strict=False,
        coerce=True,
    )


#: Contracts across rows, which no batch of a table sees whole, as DuckDB queries over the
#: whole table that return what breaks them; checked beside each table's pandera schema
#: (and, for its unique columns, a query for repeated values).
TABLE_CONTRACTS: dict[str, list[tuple[str, str]]] = {
    "chunks": [
        (
            "positions must run 0..n-1 without gaps in every document",
            "SELECT doc_id FROM chunks GROUP BY doc_id HAVING min(position) <> 0 "
            "OR max(position) <> count(*) - 1 OR count(DISTINCT position) <> count(*)",
        )
    ],
    "documents_failed": [
        (
            "a document fails a stage at most once",
            "SELECT doc_id || ' / ' || stage FROM documents_failed GROUP BY doc_id, stage "
            "HAVING count(*) > 1",
        )
    ],
}


ENRICHED_CHUNKS_SCHEMA = pa.DataFrameSchema(
    {
        "chunk_id": pa.Column(str, unique=True),
        "status": pa.Column(str, pa.Check.isin(["enriched", "failed"])),
        "enrichment_mode": pa.Column(str, pa.Check.isin(["llm", "extractive"])),
        "keywords": pa.Column(object),
    },
    checks=pa.Check(
        lambda f: (f["status"] == "failed") | (f["keywords"].map(len) > 0),
        error="an enriched chunk has no keywords",
    ),
    strict=False,
)
DOCUMENTS_SCHEMA = pa.DataFrameSchema(
    {
        "doc_id": pa.Column(str, unique=True),
        "title": pa.Column(str, pa.Check.str_length(min_value=1)),
        "n_chunks": pa.Column(int, pa.Check.ge(0), coerce=True),
        "n_pages": pa.Column(int, pa.Check.ge(1), coerce=True),
        "content_sha256": pa.Column(str, pa.Check.str_matches(_SHA256)),
    },
    strict=False,
)
CHUNK_FAQS_SCHEMA = pa.DataFrameSchema(
    {"chunk_id": pa.Column(str), "question": pa.Column(str, pa.Check.str_length(min_value=5))},
    strict=False,
)
CHUNK_KEYWORDS_SCHEMA = pa.DataFrameSchema(
    {"chunk_id": pa.Column(str), "keyword": pa.Column(str, pa.Check.str_length(min_value=1))},
    strict=False,
)
