"""Typed records that cross stage boundaries, so each stage states what it hands to the next."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, Field

#: The group of every public row in the vector store, held by every caller. With it each
#: access predicate is one `array_has_any` over the `acl` LABEL_LIST index, where
#: `cardinality(acl) = 0` scanned the column on every query, at a cost growing with the
#: table. Access files may not name it.
PUBLIC_GROUP = "__public__"
#: The group of a document nobody may read: its access file or its source's permissions
#: could not be read, or none of its principals maps to a group (fail closed).
NOBODY_GROUP = "__unreadable_acl__"


class FileType(StrEnum):
    """Formats Lorehouse can read, detected from content rather than trusted from the name."""

    PDF = "pdf"
    DOCX = "docx"
    PPTX = "pptx"
    XLSX = "xlsx"
    HTML = "html"
    MARKDOWN = "md"
    TEXT = "txt"
    RST = "rst"
    EMAIL = "eml"
    OUTLOOK = "msg"
    RTF = "rtf"
    ODT = "odt"
    EPUB = "epub"
    UNKNOWN = "unknown"


#: The formats a search can be narrowed to: every one Lorehouse reads.
READABLE_FILE_TYPES = tuple(kind.value for kind in FileType if kind is not FileType.UNKNOWN)
#: The longest query or question, in characters, whether it comes through the API or the CLI:
#: a question longer than a paragraph is a document pasted by mistake, and every character is
#: embedded and matched against the index.
MAX_QUESTION_CHARS = 2000


class FailureReason(StrEnum):
    """Why a document could not be parsed: a fixed set so failures can be counted and alerted on."""

    ENCRYPTED = "encrypted"
    NO_TEXT_LAYER = "no_text_layer"
    CORRUPT = "corrupt"
    UNSUPPORTED_TYPE = "unsupported_type"
    EMPTY = "empty"
    TOO_LARGE = "too_large"
    TIMEOUT = "timeout"
    UNREADABLE = "unreadable"
    #: The bytes read for parsing are not those the inventory hashed (and whose access it
    #: worked out): the file changed in between, or a service answered otherwise.
    CHANGED = "changed"


class RawDocument(BaseModel):
    """One file of the source, inventoried but not yet opened by a parser."""

    doc_id: str
    source_uri: str
    rel_path: str
    file_type: FileType
    size_bytes: int
    content_sha256: str
    modified_at: datetime
    acl_groups: list[str] = Field(default_factory=list)


class PageSpan(BaseModel):
    """A run of Markdown characters that came from one page, slide or sheet.

    Later stages cite pages by looking up a chunk's character offsets here, so every character of
    the Markdown belongs to exactly one span.
    """

    page: int = Field(ge=1, description="1-based page, slide or sheet number")
    start: int = Field(ge=0, description="first character offset in the Markdown")
    end: int = Field(ge=0, description="offset one past the last character")
    label: str | None = Field(default=None, description="sheet name or slide title, if any")


class ParsedDocument(BaseModel):
    """A document as structure-preserving Markdown, with where each part came from."""

    doc_id: str
    content_sha256: str
    markdown: str
    page_map: list[PageSpan]
    parser: str
    parser_version: str
    parse_ms: float
    warnings: list[str] = Field(default_factory=list)
    title: str | None = None


class DocumentFailure(BaseModel):
    """A document a stage gave up on, with a reason that can be counted and a detail to act on."""

    doc_id: str
    rel_path: str
    content_sha256: str
    stage: str
    reason: FailureReason
    detail: str
    at: datetime


class SearchMode(StrEnum):
    """How a search ranks: by meaning (vector), by words (bm25), or both fused (hybrid)."""

    VECTOR = "vector"
    BM25 = "bm25"
    HYBRID = "hybrid"
