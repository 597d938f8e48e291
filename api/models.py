"""Request and response bodies of the HTTP API; their constraints are the 422 rules."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StringConstraints,
    model_validator,
)
from pydantic_core import PydanticCustomError

from lorehouse.agents.ask import AskResponse, Citation
from lorehouse.agents.query_optimizer import Turn
from lorehouse.api_keys import ANONYMOUS
from lorehouse.models import MAX_QUESTION_CHARS
from lorehouse.search.filters import SearchFilters
from lorehouse.search.hits import ChunkSince, ChunkView
from lorehouse.search.retriever import SearchMode

FileTypeName = Literal[
    "pdf", "docx", "pptx", "xlsx", "html", "md", "txt", "rst", "eml", "msg", "rtf", "odt", "epub"
]

#: An ISO 639-1 code as chunks record it.
LanguageCode = Annotated[str, StringConstraints(pattern=r"^[a-z]{2}$")]


def _json_integer(value: object) -> object:
    """Refuses what JSON Schema does not call an integer before pydantic's coercion sees it.

    Lax pydantic reads `"5"` and `true` as 5 and 1, which hides client bugs; strict pydantic
    also refuses `5.0`, which JSON Schema (and so every generated client) counts as an integer.
    """
    if isinstance(value, bool | str | bytes):
        raise PydanticCustomError("int_type", "Input should be a valid integer")
    return value


# An integer as JSON Schema defines it: 5 and 5.0, not "5" or true.
JsonInt = Annotated[int, BeforeValidator(_json_integer)]


def _unicode_text(value: str) -> str:
    """Refuses strings holding lone surrogates, which JSON's `\\ud800` escapes let through.

    They are not Unicode text: every store, tokenizer and HTTP client fails to encode them.
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise PydanticCustomError(
            "string_unicode", "Input should be Unicode text (no lone surrogates)"
        ) from error
    return value


# Every string field is `Annotated[str, Field(<bounds>), AfterValidator(_unicode_text)]`: text
# every store and model can take, its bounds before the validator, since bounds after it are
# checked as a length of any kind and a reader is told "items" instead of "characters".

# A document id as the API hands them out (20 hex characters), with room for other schemes:
# every string a request carries has a bound, so no field can make a request (or its 422) huge.
DocumentId = Annotated[str, Field(min_length=1, max_length=128), AfterValidator(_unicode_text)]

# One character that str.isspace() does not call whitespace, spelled out because ECMA regex `\s`
# (what JSON Schema clients use) and Python's differ; with it the schema says exactly what the
# blank-text validators below refuse.
NOT_BLANK = r"[^\t-\r\x1c- \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must contain more than whitespace")
    return value


#: A query or question: up to MAX_QUESTION_CHARS, not only whitespace (the schema's pattern
#: says it to generated clients; the validator says it to Python's idea of whitespace).
#: The bounds come before the validators: after them pydantic checks a length of any kind
#: and says "items" where a reader expects "characters".
QueryText = Annotated[
    str,
    Field(min_length=1, max_length=MAX_QUESTION_CHARS, json_schema_extra={"pattern": NOT_BLANK}),
    AfterValidator(_unicode_text),
    AfterValidator(_not_blank),
]

#: The largest index version a request may name: Lance numbers versions with unsigned 64-bit
#: integers, JSON Schema readers and most clients hold signed ones, so the bound is the
#: largest both can carry.
MAX_VERSION = 2**63 - 1
# Pages are stored as 32-bit integers; the store refuses to compare them with anything larger.
MAX_PAGE = 2**31 - 1
# The bounds come before the validator so an optional page keeps them in the JSON schema.
PageNumber = Annotated[int, Field(ge=1, le=MAX_PAGE), BeforeValidator(_json_integer)]


class SearchFiltersIn(SearchFilters):
    """Filters as the API accepts them: known file types and a page range in order.

    Numbers and flags are strict because the schema promises JSON integers and booleans: a
    client sending `"is_table": 0` or `"page_from": "2"` has a bug that coercion would hide.
    """

    model_config = ConfigDict(extra="forbid")

    doc_ids: list[DocumentId] | None = Field(default=None, min_length=1, max_length=1000)
    page_from: PageNumber | None = Field(default=None, description="First page, inclusive.")
    page_to: PageNumber | None = Field(
        default=None, description="Last page, inclusive; not before page_from."
    )
    file_types: list[FileTypeName] | None = Field(default=None, min_length=1, max_length=20)
    is_table: StrictBool | None = None
    languages: list[LanguageCode] | None = Field(
        default=None,
        min_length=1,
        max_length=20,
        description="Chunks in these languages (ISO 639-1 codes, e.g. 'de'), as told when "
        "each chunk was cut; a chunk too short to tell has its document's.",
    )

    @model_validator(mode="after")
    def _pages_in_order(self) -> SearchFiltersIn:
        if self.page_from and self.page_to and self.page_from > self.page_to:
            raise ValueError("page_from must not be after page_to")
        return self


class SearchRequest(BaseModel):
    """POST /v1/search."""

    model_config = ConfigDict(extra="forbid")

    query: QueryText
    top_k: JsonInt = Field(default=8, ge=1, le=100)
    mode: SearchMode = SearchMode.HYBRID
    filters: SearchFiltersIn | None = None
    rerank: Annotated[str, Field(max_length=200), AfterValidator(_unicode_text)] | None = Field(
        default=None,
        description="none, maxsim or the configured litellm reranker; unset: default",
    )
    # The bounds sit on the integer, before the JSON-integer check: on the optional field,
    # pydantic wrote them into the schema as "ge"/"le" keys no JSON Schema reader knows, so
    # clients were not told the limit the server enforces.
    passage_words: Annotated[int, Field(ge=0, le=5000), BeforeValidator(_json_integer)] | None = (
        Field(
            default=None,
            description=(
                "Grow each hit into the passage of consecutive chunks of its document holding it, "
                "up to this many words (each passage once; `passage_chunk_ids` lists its chunks); "
                "0 returns chunks; unset: the server's default (`search_passage_words`)."
            ),
        )
    )


#: A saved conversation's id as the API hands them out (32 hex characters).
ConversationId = Annotated[str, Field(min_length=1, max_length=64), AfterValidator(_unicode_text)]
ConversationTitle = Annotated[
    str,
    Field(min_length=1, max_length=200),
    AfterValidator(_unicode_text),
    AfterValidator(_not_blank),
]


class AskRequest(BaseModel):
    """POST /v1/ask."""

    model_config = ConfigDict(extra="forbid")

    question: QueryText
    history: list[Turn] = Field(default_factory=list, max_length=20)
    filters: SearchFiltersIn | None = None
    top_k: JsonInt = Field(default=8, ge=1, le=50, description="Hits retrieved per (sub-)query.")
    stream: StrictBool = Field(default=False, description="Answer as Server-Sent Events.")
    conversation_id: ConversationId | None = Field(
        default=None,
        description="A saved conversation of yours to go on with: its earlier turns are the "
        "history, and this question and its answer are added to it. Not with `history`.",
    )

    @model_validator(mode="after")
    def _one_history(self) -> AskRequest:
        if self.conversation_id is not None and self.history:
            raise ValueError("history comes from the conversation; send one or the other")
        return self


class ChunkPreview(BaseModel):
    """GET /v1/chunks/{chunk_id}: the cited chunk between its neighbours."""

    chunk: ChunkView
    before: list[ChunkView]
    after: list[ChunkView]
    index_version: int | None = Field(
        default=None,
        description="The chunks table version read, when the request pinned one "
        "(a citation's `?version=`).",
    )
    changed_since: ChunkSince | None = Field(
        default=None,
        description="For a pinned version: whether the chunk is `unchanged` in today's "
        "index, `changed` (its document was reindexed with other text here) or `removed` "
        "(its document left the index).",
    )


class DocumentView(BaseModel):
    doc_id: str
    title: str
    rel_path: str
    file_type: str
    summary: str | None
    n_chunks: int
    n_pages: int
    updated_at: datetime
    language: str | None = Field(
        default=None,
        description="ISO 639-1 code of the language most of its text is in; none for a "
        "document cut into no chunk.",
    )


class DocumentPage(BaseModel):
    """GET /v1/documents: one page of the documents the caller may see."""

    total: int
    limit: int
    offset: int
    documents: list[DocumentView]


class StoreHealth(BaseModel):
    reachable: bool
    ready: bool
    detail: str = Field(description="What state the store is in; never a path or a host.")
    counts: dict[str, int] = Field(
        default_factory=dict, description="Rows the caller may see (documents, chunks)."
    )


class Liveness(BaseModel):
    """GET /healthz: whether this server can answer, for probes that hold no key.

    Nothing more: counts and store details are behind a key (GET /v1/health), because an
    open endpoint that counted every row would tell anyone how much restricted content exists.
    """

    status: Literal["ok", "unavailable"]
    detail: str | None = Field(default=None, description="What to run when unavailable.")


class Health(BaseModel):
    """GET /v1/health: both stores, with the counts of what the caller may see."""

    status: Literal["ok", "unavailable"]
    embedding_model: str
    lancedb: StoreHealth
    duckdb: StoreHealth
    answers_running: int = Field(
        default=0,
        description="Answers this server process is computing now; each `--workers` process "
        "counts its own.",
    )
    answers_limit: int = Field(
        default=0,
        description="Answers one process computes at once (api_max_concurrent_asks); asks "
        "beyond it wait their turn.",
    )
    caller: str = Field(
        default=ANONYMOUS,
        description="The name of the key the request presented (the chat page shows who is "
        "signed in); 'anonymous' where the server needs no key.",
    )


class ErrorResponse(BaseModel):
    """The body of every error the API raises itself (400, 401, 404, 503).

    One shape for all of them lets a client show `detail` without knowing which layer refused.
    """

    detail: str = Field(description="What went wrong, for people; not meant to be parsed.")


class AskToken(BaseModel):
    """The data of one `token` event of a streamed answer: the next piece of answer text."""

    text: str


#: Characters of a feedback comment: a correction of an answer, which becomes the reference
#: answer of a golden-set candidate and a cell of the table a reviewer reads, is a sentence or
#: two. Every verdict is stored and reviewed, so no field of one is unbounded.
FEEDBACK_COMMENT_CHARS = 1000
# The bound before the Unicode check, so a 422 says "at most 1000 characters".
FeedbackComment = Annotated[
    str, Field(max_length=FEEDBACK_COMMENT_CHARS), AfterValidator(_unicode_text)
]


class FeedbackRequest(BaseModel):
    """POST /v1/feedback: a reader's verdict on one answer, with what it said and cited."""

    model_config = ConfigDict(extra="forbid")

    answer_id: Annotated[
        str,
        Field(min_length=1, max_length=64),
        AfterValidator(_unicode_text),
        AfterValidator(_not_blank),
    ]
    rating: Literal["up", "down"]
    comment: FeedbackComment | None = Field(
        default=None,
        description="What was wrong or missing; a thumbs-down's comment is the correction.",
    )
    # The question and the answer as /v1/ask took and gave them: the same bound as an ask's
    # question, and room for the longest answer a model writes.
    question: QueryText
    answer: Annotated[str, Field(min_length=1, max_length=20_000), AfterValidator(_unicode_text)]
    citations: list[DocumentId] = Field(
        default_factory=list, max_length=50, description="Chunk ids the answer cited, in order."
    )


class FeedbackStored(BaseModel):
    answer_id: str
    rating: str


class ConversationCreate(BaseModel):
    """POST /v1/conversations."""

    model_config = ConfigDict(extra="forbid")

    title: ConversationTitle | None = Field(
        default=None, description="Unset: the first question names it."
    )


class ConversationRename(BaseModel):
    """PATCH /v1/conversations/{conversation_id}."""

    model_config = ConfigDict(extra="forbid")

    title: ConversationTitle


class ConversationSummary(BaseModel):
    conversation_id: str
    title: str
    created_at: datetime
    updated_at: datetime = Field(description="When the last question was asked in it.")
    turn_count: int


class ConversationPage(BaseModel):
    """GET /v1/conversations: one page of the caller's conversations, the latest first."""

    total: int
    limit: int
    offset: int
    conversations: list[ConversationSummary]


class ConversationTurn(BaseModel):
    position: int
    question: str
    asked_at: datetime
    answer: AskResponse | None = Field(
        description="The answer as it was given; null when it is withheld."
    )
    withheld: bool = Field(
        default=False,
        description="Whether the answer drew on passages the caller can no longer read "
        "(access narrowed, or the document left the index): it is not shown again.",
    )


class ConversationView(ConversationSummary):
    """GET /v1/conversations/{conversation_id}: the conversation with its turns in order."""

    turns: list[ConversationTurn]


# -- uploads ---------------------------------------------------------------------------------------

UploadState = Literal["queued", "parsing", "indexing", "indexed", "failed"]


class UploadView(BaseModel):
    """One of the caller's uploads and where its indexing stands."""

    upload_id: str
    filename: str
    path: str = Field(description="The document's path in the index.")
    doc_id: str = Field(description="The document's id, for `doc_ids` filters once indexed.")
    groups: list[str] = Field(description="The groups that may read it, as the uploader chose.")
    size_bytes: int
    uploaded_at: datetime
    state: UploadState = Field(
        description="queued: stored, waiting for the next inventory run; parsing: listed, "
        "being parsed; indexing: parsed, waiting for the search index to publish it; "
        "indexed: searchable by its groups; failed: not indexed, `reason` says why."
    )
    reason: str | None = Field(
        default=None, description="Why it failed: one of the parse stage's failure reasons."
    )
    detail: str | None = Field(default=None, description="The state in words, for people.")


class UploadsOverview(BaseModel):
    """GET /v1/uploads: what the caller may upload, and their uploads, the latest first."""

    max_bytes: int = Field(description="The largest file an upload takes.")
    readable_extensions: list[str] = Field(description="The file name endings Lorehouse reads.")
    groups: list[str] = Field(description="The caller's groups: an upload is for some of these.")
    uploads: list[UploadView]


# -- the OpenAI-compatible chat endpoint ----------------------------------------------------------


class ChatContentPart(BaseModel):
    """One part of a message's content as OpenAI clients send it; only text parts are read."""

    model_config = ConfigDict(extra="allow")

    type: Annotated[str, Field(max_length=40)]
    text: Annotated[str, Field(max_length=MAX_QUESTION_CHARS * 10)] | None = None


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: (
        Annotated[str, Field(max_length=MAX_QUESTION_CHARS * 10), AfterValidator(_unicode_text)]
        | Annotated[list[ChatContentPart], Field(max_length=50)]
        | None
    ) = None

    def text(self) -> str:
        if isinstance(self.content, list):
            return "\n".join(part.text for part in self.content if part.text)
        return self.content or ""


class ChatCompletionRequest(BaseModel):
    """POST /v1/chat/completions, as OpenAI's Chat Completions API takes it.

    Sampling options (temperature, max_tokens, ...) are accepted and not used: the answer
    comes from Lorehouse's own pipeline.
    """

    model_config = ConfigDict(extra="allow")

    model: Annotated[str, Field(max_length=200)] = "lorehouse"
    messages: list[ChatMessage] = Field(min_length=1, max_length=100)
    stream: StrictBool = False
    filters: SearchFiltersIn | None = Field(
        default=None,
        description="Lorehouse's filters (an extra body field), as for /v1/ask.",
    )


class ChatCompletionMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str


class ChatCompletionChoice(BaseModel):
    index: int = 0
    message: ChatCompletionMessage
    finish_reason: Literal["stop"] = "stop"


class ChatCompletion(BaseModel):
    """A completion as OpenAI returns one, the answer's sources listed at the end of its
    content and, in full, in `citations`."""

    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[ChatCompletionChoice]
    usage: dict[str, int]
    citations: list[Citation] = Field(
        description="The cited chunks, numbered as the content's [n] markers."
    )
