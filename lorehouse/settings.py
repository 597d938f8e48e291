"""Lorehouse configuration: one Settings object read from LOREHOUSE_* variables and `.env`.

Only the composition root (`lorehouse.wiring`) reads it, and hands every other module its
values, so a deployment is described in one place and a Settings built in code is obeyed as
one read from the environment.

Longer than most modules because every setting is here with its description, which the
configuration page and `.env.example` are rendered from: split, a default would have more
than one place to be looked for.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from datetime import timedelta
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

REPO_ROOT = Path(__file__).resolve().parent.parent
BUNDLED_SAMPLE_CORPUS = REPO_ROOT / "sample_corpus"

#: The name of a project's data folder, found from any folder below it.
PROJECT_DATA_DIR = ".lorehouse"


def default_data_dir(start: Path | None = None) -> Path:
    """The data folder when none is set: the nearest `.lorehouse` folder in `start` (the
    working directory) or above it, as git finds its repository, so every command of a
    project finds its stores from any subfolder; else one per user, in the user's data folder.
    """
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / PROJECT_DATA_DIR).is_dir():
            return folder / PROJECT_DATA_DIR
    user_data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(user_data) / "lorehouse"


#: The languages BM25 has a Snowball stemmer for (lorehouse/search/bm25.py's table).
_SNOWBALL_CODES = ("en", "de", "fr", "es", "it", "nl", "pt", "sv", "da", "no", "fi", "ru")

#: Bytes of recent queries' vectors the bundled embedder keeps (see `embed_query_cache_bytes`).
DEFAULT_EMBED_QUERY_CACHE_BYTES = 64 * 1024 * 1024
#: Extractive answers: below this cosine between the question and its best context sentence
#: the answer is "not found". Higher values decline answerable questions long before they
#: decline the unanswerable ones (docs/benchmarks.md, "Answers").
DEFAULT_ANSWER_MIN_SIMILARITY = 0.40
#: Extractive answers: from this cosine up to DEFAULT_ANSWER_MIN_SIMILARITY the closest
#: passages are shown without asserting anything; below it the answer is "not found". A
#: question about a document's subject in other words ("lose my laptop" against "lost
#: devices") lands between the two, an off-topic one below.
DEFAULT_ANSWER_PASSAGES_MIN_SIMILARITY = 0.30
#: Extractive answers: words at most per ask of the question (the first sentence always
#: fits), so an answer states several facts and stays a paragraph for each thing asked.
DEFAULT_ANSWER_MAX_WORDS = 100
#: Extractive answers: the chance (`lorehouse.agents.assertion`) below which the lead is not
#: asserted and the closest passages are shown instead. 0 asserts every lead: no threshold
#: reaches high precision at a useful coverage with the bundled models (the curve is in
#: docs/benchmarks.md); a deployment that prefers fewer wrong leads sets 0.5.
DEFAULT_ANSWER_ASSERT_THRESHOLD = 0.5
#: Rows from which a vector table gets an ANN index. Below it a search is a product with the
#: vectors held in memory: exact, and as fast as the index up to about this size; past it the
#: index wins as the product grows with the rows (docs/benchmarks.md, "Search latency").
DEFAULT_ANN_INDEX_MIN_ROWS = 50_000
#: Rows from which a searched table's next version is loaded in the background while searches
#: go on with the rows it kept unchanged: loading a large version (reading its rows and
#: vectors, building its postings) takes minutes, and a smaller one loads quicker than a
#: search would notice the difference.
DEFAULT_SEARCH_WARM_MIN_ROWS = 20_000


def available_cores() -> int:
    """CPU cores this process may run on: its affinity where the OS tells it (a container
    pinned to 2 of 64 cores gets 2), else the machine's count (macOS, Windows)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def search_turns_default(server_processes: int) -> int:
    """Searches at once per server process: the cores it may use, shared among the
    processes serving beside it (two processes on two cores search one at a time each)."""
    return max(1, available_cores() // server_processes)


class Settings(BaseSettings):
    """Everything a Lorehouse deployment can change, with defaults that run offline."""

    model_config = SettingsConfigDict(
        env_prefix="LOREHOUSE_", env_file=".env", env_file_encoding="utf-8", extra="ignore"
    )

    source_uri: str = Field(
        default=str(BUNDLED_SAMPLE_CORPUS),
        description=(
            "Folder path, s3://bucket/prefix, gdrive://FOLDER_ID (a Google Drive folder), "
            "confluence+https://SITE?spaces=KEY,KEY (Confluence spaces), sharepoint://SITE_ID "
            "or sharepoint://drives/DRIVE_ID (SharePoint libraries, OneDrive), or http(s):// start "
            "URL of a web site (its sitemaps and the pages linked below that URL) holding "
            "the raw documents."
        ),
    )
    source_include: str | None = Field(
        default=None,
        description="Only the documents whose paths match these patterns are indexed, "
        "separated by spaces ('manuals/*.html reports/*.pdf'; '*' crosses folders, paths "
        "as in the index, a named source's name first); access files always count. Unset: "
        "every file of the source.",
    )
    source_permission_map: Path | None = Field(
        default=None,
        description=(
            "JSON file mapping a connected source's principals (users, groups, domains, "
            "anyone) to Lorehouse groups. A web site's pages belong to 'anyone', public "
            "unless the file maps 'anyone' to a group."
        ),
    )
    source_sync_minutes: str = Field(
        default="",
        description=(
            "How often a connected service (Drive, Confluence, SharePoint, a web site) is "
            "asked for its changes: minutes for every source, or NAME=MINUTES per named "
            "source ('drive=10 web=360'). An inventory before a source is due lists what it "
            "saw last without asking. Unset: at every inventory."
        ),
    )
    gdrive_service_account_file: Path | None = Field(
        default=None,
        description=(
            "Service account key (JSON) a gdrive://FOLDER_ID source reads Drive with; share "
            "the folder with its e-mail, or set a subject for domain-wide delegation."
        ),
    )
    gdrive_subject: str | None = Field(
        default=None,
        description="User the Drive service account acts as (domain-wide delegation).",
    )
    gdrive_api_url: str = Field(
        default="https://www.googleapis.com",
        description="Drive API origin; a proxy or a test server's in their place.",
    )
    confluence_email: str | None = Field(
        default=None,
        description="Account a Confluence Cloud source signs in as, with its API token.",
    )
    confluence_token: str | None = Field(
        default=None,
        description=(
            "API token (Cloud) or personal access token (Data Center) a "
            "confluence+https://SITE?spaces=KEY,KEY source reads with."
        ),
    )
    confluence_cloud: bool | None = Field(
        default=None,
        description=(
            "Whether the Confluence site is Cloud (v2 API, e-mail and API token) or Data "
            "Center (v1 API, personal access token); unset, a *.atlassian.net host is Cloud."
        ),
    )
    msgraph_tenant_id: str | None = Field(
        default=None, description="Microsoft Entra tenant a sharepoint:// source signs in to."
    )
    msgraph_client_id: str | None = Field(
        default=None,
        description=(
            "App (client) id a sharepoint:// source reads with: Sites.Read.All, and "
            "Sites.FullControl.All for sharing changes to show before the file next changes."
        ),
    )
    msgraph_client_secret: str | None = Field(
        default=None, description="The app's client secret (a Dagster resource reads it by EnvVar)."
    )
    msgraph_api_url: str = Field(
        default="https://graph.microsoft.com",
        description="Microsoft Graph origin; a national cloud's or a test server's in its place.",
    )
    msgraph_login_url: str = Field(
        default="https://login.microsoftonline.com",
        description="Microsoft identity platform origin the app's token comes from.",
    )
    web_max_pages: int = Field(
        default=10_000, ge=1, description="Pages a web site's crawl visits at most."
    )
    web_allowed_networks: str = Field(
        default="",
        description=(
            "Non-public networks a web crawl may connect to, as CIDRs or addresses separated "
            "by commas (`10.20.0.0/16, 127.0.0.1`): an intranet's. Loopback, private, "
            "link-local (the cloud's instance metadata) and other non-public addresses are "
            "refused otherwise, whatever a page links or redirects to."
        ),
    )
    web_page_seconds: float = Field(
        default=60.0,
        gt=0,
        description="The longest one page's download may take before it is recorded as failed.",
    )
    data_dir: Path = Field(
        default_factory=lambda: default_data_dir(),
        description=(
            "Where the DuckDB database and the LanceDB tables live. Unset: the nearest "
            "`.lorehouse` folder in the working directory or above it (a project's), else "
            "`lorehouse` in the user's data folder ($XDG_DATA_HOME or ~/.local/share)."
        ),
    )
    workers: int = Field(
        default_factory=available_cores,
        ge=1,
        description="Processes used to parse documents in parallel.",
    )
    parse_timeout_seconds: float = Field(
        default=120.0,
        gt=0,
        description=(
            "A file still parsing after this long, plus LOREHOUSE_PARSE_TIMEOUT_SECONDS_PER_MB "
            "for each MB it holds, is cut off."
        ),
    )
    parse_timeout_seconds_per_mb: float = Field(
        default=60.0,
        ge=0,
        description=(
            "Parsing time allowed per MB of a file on top of LOREHOUSE_PARSE_TIMEOUT_SECONDS, "
            "so a long annual report is not cut off while a stuck small file is."
        ),
    )
    max_file_bytes: int = Field(
        default=200 * 1024 * 1024, gt=0, description="Larger files are recorded as too_large."
    )
    parse_memory_mb: int = Field(
        default=2048,
        ge=0,
        description=(
            "Memory (MB) one parse worker may take on top of what it starts with; a file "
            "needing more is recorded as too_large. 0 means no ceiling."
        ),
    )
    pdf_ocr_languages: str | None = Field(
        default=None,
        description=(
            "Tesseract languages (e.g. 'eng' or 'eng+deu') to OCR scanned PDF pages with; "
            "unset leaves scans as failed with no_text_layer."
        ),
    )
    pdf_ocr_dpi: int = Field(
        default=300, ge=72, le=600, description="Resolution scanned pages are rendered at for OCR."
    )
    chunk_max_tokens: int = Field(
        default=256,
        ge=32,
        le=256,
        description=(
            "Largest chunk, in embedding-model tokens (the MiniLM embedder reads 256 at most)."
        ),
    )
    llm_model: str | None = Field(
        default=None,
        description=(
            "litellm model string (openai/gpt-4o-mini, anthropic/..., bedrock/..., ollama/...) "
            "that enriches chunks and writes answers; unset: extractive enrichment and answers."
        ),
    )
    llm_api_base: str | None = Field(
        default=None, description="Endpoint override (an Ollama or OpenAI-compatible server)."
    )
    judge_model: str | None = Field(
        default=None,
        description=(
            "litellm model that grades answers in the answer eval (0-5 against the reference). "
            "Unset: the answer eval reports the judge-free measures only. Use a strong model."
        ),
    )
    judge_api_base: str | None = Field(
        default=None, description="Endpoint override for the judge model."
    )
    prompts_dir: Path | None = Field(
        default=None,
        description=(
            "Folder of prompt overrides: a file named like a bundled prompt "
            "(chunk_enrichment.v1.md, answerer.v2.md, ...) replaces it. Enrichment answers are "
            "cached by prompt content, so editing a prompt re-enriches on the next run."
        ),
    )
    index_batch_documents: int = Field(
        default=500,
        ge=1,
        description=(
            "Documents the enrichment and embedding stages read, compare and write at a "
            "time: a run's memory depends on this, not on the corpus size."
        ),
    )
    index_partitions: int = Field(
        default=16,
        ge=1,
        le=256,
        description=(
            "Hash buckets of the documents that parse, chunk and enrich as Dagster "
            "partitions: each owns its own store file, so buckets run side by side in "
            "separate processes or pods. Changing it reruns every partition, each taking its "
            "documents' rows and vectors from the shared stores: nothing is parsed or "
            "embedded again."
        ),
    )
    partitions_uri: str | None = Field(
        default=None,
        description=(
            "An s3:// prefix the partitions' files are kept under, for partition runs on "
            "pods that share no volume: each step pulls its partition's DuckDB file and "
            "pushes it back, and the partitions' LanceDB folders live there. Unset: they stay "
            "under data_dir/partitions (one machine, or a ReadWriteMany volume)."
        ),
    )
    writer_run_k8s_config: dict[str, Any] | None = Field(
        default=None,
        description=(
            "The `dagster-k8s/config` of the runs that write the shared stores (index_job, "
            "inventory_job, merge_job), as JSON: with partitions_uri set, the run launcher's "
            "own config leaves the feature-store volume out, so partition runs schedule on "
            "any node, and this mounts it (and pins the node) for the writer runs alone."
        ),
    )
    llm_concurrency: int = Field(default=4, ge=1, le=64, description="LLM calls in flight.")
    llm_max_attempts: int = Field(
        default=3, ge=1, le=10, description="Tries per call (invalid output, rate limits)."
    )
    llm_timeout_seconds: float = Field(default=60.0, gt=0, description="Per-call timeout.")
    answer_max_output_tokens: int = Field(
        default=800,
        ge=16,
        le=16_000,
        description="Output limit of an answer (and of the question rewriting before it).",
    )
    enrichment_max_output_tokens: int = Field(
        default=400,
        ge=16,
        le=16_000,
        description="Output limit of one chunk's enrichment (summary, keywords, FAQs).",
    )
    judge_max_output_tokens: int = Field(
        default=500,
        ge=16,
        le=16_000,
        description="Output limit of the answer-eval judge: its reasoning, score and flags.",
    )
    languages: str = Field(
        default="en",
        description="The languages of the documents and questions, as ISO 639-1 codes separated "
        "by spaces, the most common first ('de en'): BM25 stems each chunk and each question "
        "in its own language, told among these (one language needs no telling); a text too "
        "short to tell counts as the first. Stemmed: " + " ".join(_SNOWBALL_CODES) + ".",
    )
    embed_model: str = Field(
        default="auto",
        description=(
            "'auto' for the bundled model that suits `languages`: 'local' for English alone, "
            "'local-multilingual' as soon as another language is named; "
            "'local' for the bundled all-MiniLM-L6-v2 (int8 ONNX, English), "
            "'local-multilingual' for the bundled multilingual-e5-small (4-bit; German and about "
            "a hundred other languages, and questions in one language over documents in "
            "another), or a litellm embedding model (openai/text-embedding-3-small, "
            "bedrock/amazon.titan-embed-text-v2:0, cohere/...)."
        ),
    )
    embed_api_base: str | None = Field(
        default=None, description="Endpoint override for the embedding provider."
    )
    embed_batch_size: int = Field(default=64, ge=1, le=2048, description="Texts per embed call.")
    embed_query_cache_bytes: int = Field(
        default=DEFAULT_EMBED_QUERY_CACHE_BYTES,
        ge=0,
        le=64 * 1024**3,
        description=(
            "Bytes of recent queries' sentence and token vectors the bundled embedder keeps, "
            "the least recently used dropped first: late interaction needs a query's token "
            "vectors, which the retriever's query-vector cache does not hold. A question of "
            "25 tokens takes about 40 KB, so the default keeps some 1,600, more than "
            "search_query_cache_size. 0 turns it off."
        ),
    )
    embed_threads: int = Field(
        default=2,
        ge=1,
        le=256,
        description=(
            "CPU threads of the bundled embedder (onnxruntime intra-op threads). Embedding is "
            "most of an offline build, so set it to a run pod's cores; more threads than cores "
            "are slower."
        ),
    )
    embed_query_threads: int = Field(
        default=1,
        ge=1,
        le=256,
        description=(
            "CPU threads of the bundled embedder for one query (its own onnxruntime session). "
            "A query is short: a second thread saves little of its time and spins CPU after "
            "it that other requests of a busy server need."
        ),
    )
    index_sentence_windows: bool = Field(
        default=True,
        description=(
            "Embed each chunk's sentence windows (its heading above two sentences), so a "
            "question matching one sentence of a long chunk finds it. They are a second model "
            "pass about as long as the chunks' own: off, a build costs about 40% less and "
            "ranks somewhat worse (docs/benchmarks.md, 'Build cost against the model'). "
            "Turning it off deletes the windows at the next run."
        ),
    )
    index_token_vectors: bool = Field(
        default=True,
        description=(
            "Store each chunk's token vectors (48 bytes a token: a sign bit a component) so "
            "the maxsim reranker "
            "reads them instead of encoding its candidates per query."
        ),
    )
    lancedb_uri: str | None = Field(
        default=None,
        description="LanceDB location: a folder or s3:// URI; unset means data_dir/lancedb.",
    )
    ann_index_min_rows: int = Field(
        default=DEFAULT_ANN_INDEX_MIN_ROWS,
        ge=256,
        description=(
            "Rows from which the vector column gets an ANN index; below it search is exact, "
            "over the vectors held in memory, and faster than the index."
        ),
    )
    search_index_cache_mib: int = Field(
        default=1024,
        ge=1,
        description=(
            "Memory each process lets LanceDB keep of the index pages it has read (ANN "
            "partitions, scalar indexes), instead of LanceDB's 6 GiB. Keep it above the "
            "vector index's size (about 0.65 KB a chunk): below it every search reads "
            "partitions again, many times slower."
        ),
    )
    search_metadata_cache_mib: int = Field(
        default=64,
        ge=1,
        description=(
            "Memory each process lets LanceDB keep of table metadata (manifests, file "
            "footers); bounded for the same reason (LanceDB's default is 1 GiB)."
        ),
    )
    citation_retention_hours: float = Field(
        default=168,
        ge=1,
        description=(
            "How long a version of the chunks table outlives the next, so a citation made "
            "from it still opens the passage it cited (marked when the chunk changed since). "
            "Each kept version holds the data files later writes replaced."
        ),
    )
    search_candidates: int = Field(
        default=50,
        ge=1,
        le=1000,
        description="Hits each retriever contributes to hybrid fusion and to a reranker.",
    )
    search_query_cache_size: int = Field(
        default=1024,
        ge=0,
        le=1_000_000,
        description=(
            "Query vectors a retriever keeps, by (model, query text): a question asked again "
            "(a retry, a popular question, an eval rerun) is not embedded again. 0 turns it off."
        ),
    )
    search_shared_snapshot: bool = Field(
        default=True,
        description=(
            "Keep each searched table version's snapshot (its rows, unit vectors, BM25 "
            "postings and lookups) in files under the data folder (cache/snapshots) that every "
            "API process of the host maps, instead of a copy per process: `--workers N` then "
            "hold one copy, shared through the page cache, a process's own memory does not "
            "grow with the table, and a search reads in only the pages it touches."
        ),
    )
    search_warm_min_rows: int = Field(
        default=DEFAULT_SEARCH_WARM_MIN_ROWS,
        ge=0,
        description=(
            "Rows from which a new version of a searched table is loaded in the background: "
            "until it is ready, searches read the version before it less every row the new "
            "one deleted, changed or narrowed (withheld at once), and rows it added appear "
            "when it is ready. Below it (and for the first version a process reads) the "
            "first search of a new version loads it, as a small one loads in moments."
        ),
    )
    search_passage_words: int = Field(
        default=0,
        ge=0,
        le=5000,
        description=(
            "Return each hit as the passage of consecutive chunks of its document holding the "
            "chunk that ranked, up to this many words (each passage once); 0 returns chunks. "
            "A search request's passage_words overrides it. It applies to /v1/ask's searches "
            "too."
        ),
    )
    search_split_asks: bool = Field(
        default=True,
        description=(
            "Search a question with several asks ('..., and how long ...?') once whole and "
            "once per ask, and interleave the rankings, so each ask's answer reaches the top "
            "hits."
        ),
    )
    search_translate_questions: bool = Field(
        default=True,
        description=(
            "With an LLM configured (llm_model), a hybrid search of a question in a language "
            "almost none of the caller's passages are in ranks its keyword (BM25) leg on the "
            "question translated into their main language. Without one, or off, that leg is "
            "left out: the two languages share only names and commands."
        ),
    )
    rerank: str = Field(
        default="maxsim",
        description=(
            "Default reranker: maxsim (late interaction over the bundled model's token "
            "vectors, read from the index), none, or a litellm rerank model "
            "(cohere/rerank-...)."
        ),
    )
    rerank_api_base: str | None = Field(
        default=None, description="Endpoint override for a litellm rerank provider."
    )
    ask_context_chunks: int = Field(
        default=8, ge=1, le=50, description="Passages the answerer reads after post-processing."
    )
    answer_min_similarity: float = Field(
        default=DEFAULT_ANSWER_MIN_SIMILARITY,
        ge=0.0,
        le=1.0,
        description=(
            "Extractive answers: a question whose best context sentence is less similar than "
            "this (cosine) is answered as not found."
        ),
    )
    answer_passages_min_similarity: float = Field(
        default=DEFAULT_ANSWER_PASSAGES_MIN_SIMILARITY,
        ge=0.0,
        le=1.0,
        description=(
            "Extractive answers: a question whose best context sentence is at least this "
            "similar, but under LOREHOUSE_ANSWER_MIN_SIMILARITY, is answered with the closest "
            "passages, asserting nothing; below it, as not found."
        ),
    )
    answer_sentence_vectors_kept: int = Field(
        default=20_000,
        ge=0,
        description=(
            "Extractive answers: vectors of the last this many context sentences are kept "
            "(about 1.5 KB each), so passages that recur across questions are not embedded "
            "again: embedding them is most of an extractive answer's time. 0 keeps none."
        ),
    )
    answer_max_words: int = Field(
        default=DEFAULT_ANSWER_MAX_WORDS,
        ge=10,
        le=1000,
        description=(
            "Extractive answers: at most this many words per ask of the question (a question "
            "with two asks gets twice as many); each sentence after the first must add a "
            "number or name not yet stated."
        ),
    )
    answer_assert_threshold: float = Field(
        default=DEFAULT_ANSWER_ASSERT_THRESHOLD,
        ge=0.0,
        le=1.0,
        description=(
            "Extractive answers: a lead less likely than this to state the answer is not "
            "asserted; the answer says the documents don't state it directly and shows the "
            "closest passages. 0 asserts every lead; higher asserts fewer, more of them right; "
            "1 asserts none. A lead under the section the question asks about (an FAQ's own "
            'question, or "What does X say about Y?") is asserted below 1 whatever its chance.'
        ),
    )
    answer_decline_unmentioned: bool = Field(
        default=True,
        description=(
            "Extractive answers: 'not found' when the question names something (a name, an "
            "acronym, a year) that no document the caller may read mentions, rather than "
            "the nearest sentence about something else. A question using another word than "
            "the documents ('PTO' for 'annual leave') is declined too; answers written by an "
            "LLM judge that themselves."
        ),
    )
    eval_golden_set: Path = Field(
        default=REPO_ROOT / "evals" / "golden" / "sample_corpus.jsonl",
        description="Golden set the retrieval_eval asset scores (JSONL).",
    )
    eval_gate: Literal["warn", "error"] = Field(
        default="warn",
        description="How the recall gate reports a drop of more than 3 points of recall@8.",
    )
    api_keys_file: Path | None = Field(
        default=None,
        description="YAML file of hashed API keys and their groups; set means keys are required.",
    )
    slack_bot_token: str | None = Field(
        default=None,
        description="Bot token (xoxb-...) of the Slack app; with the signing secret, turns on "
        "the bot at /slack/events.",
    )
    slack_signing_secret: str | None = Field(
        default=None, description="Signing secret Slack signs its requests with."
    )
    slack_access_file: Path | None = Field(
        default=None,
        description="YAML map of Slack users (for direct messages) and channels to access "
        "groups; unset or unlisted: public documents only.",
    )
    slack_api_url: str | None = Field(
        default=None, description="Slack Web API base URL (a proxy); unset: Slack's own."
    )
    conversations_url: str | None = Field(
        default=None,
        description="SQLAlchemy URL of the database saved conversations live in: "
        "postgresql+psycopg2://... for the pods of a cluster to share; unset: a SQLite file in "
        "the data folder (conversations.sqlite3), which one host's server processes share.",
    )
    conversation_retention_days: int = Field(
        default=90,
        ge=0,
        description="How long a saved conversation is kept after its last question, in days; "
        "older ones are deleted. 0: until its owner deletes it.",
    )
    upload_folder: str | None = Field(
        default=None,
        description="Where files dropped into the chat page go, as a document path: a "
        "subfolder of a lone local folder source ('uploads'), or a local folder source named "
        "in LOREHOUSE_SOURCE_URI ('uploads' with 'docs=/srv/docs uploads=/srv/uploads'). "
        "The API and the Dagster runs must share it (one volume); unset: no uploads.",
    )
    upload_max_bytes: int = Field(
        default=25 * 1024 * 1024,
        ge=1,
        description="The largest file the chat page takes, in bytes; a larger one is a 413 "
        "before it is stored. Above max_file_bytes, the parse stage would refuse it anyway.",
    )
    mcp_allowed_hosts: str = Field(
        default="127.0.0.1:*, localhost:*, [::1]:*",
        description="Host headers the MCP endpoint (/mcp) answers, as host:port (* for any "
        "port) separated by commas; a page elsewhere that points its own name at this server "
        "(DNS rebinding) is refused. `*`: any host, for a server behind a name of its own.",
    )
    mcp_api_key: str | None = Field(
        default=None,
        description="The key `lorehouse mcp` (stdio) answers as, from the keys file; required "
        "when API keys are, and checked again on every call, so a revoked key stops working.",
    )
    public_url: str | None = Field(
        default=None,
        description="Address people reach the chat page at, for links in Slack answers; "
        "unset: http://API_HOST:API_PORT.",
    )
    api_host: str = Field(default="127.0.0.1", description="Where `lorehouse serve` listens.")
    api_port: int = Field(default=8000, ge=1, le=65535, description="Port of `lorehouse serve`.")
    api_keep_alive_seconds: int = Field(
        default=75,
        ge=1,
        description=(
            "How long `lorehouse serve` keeps an idle connection open. Longer than clients' "
            "own idle timeouts (httpx and most load balancers: 5-60 s), so the server is "
            "never the side closing a connection a client is about to reuse."
        ),
    )
    api_max_body_bytes: int = Field(
        default=4 * 1024 * 1024,
        ge=64 * 1024,
        description=(
            "The largest request body the API reads, in bytes; a larger one is a 413, "
            "refused from its Content-Length before any of it is read, or as soon as a body "
            "sent without one passes the limit. The largest valid request (an ask with 20 "
            "turns of history and 1,000 document ids) is under 2.6 MB even with every "
            "character escaped, and parsing JSON takes several times a body's size."
        ),
    )
    api_max_concurrent_asks: int = Field(
        default=4,
        ge=1,
        le=256,
        description=(
            "Answers computed at once per server process; each holds tens of MB while it runs, "
            "so this bounds memory. Further asks wait their turn."
        ),
    )
    api_workers: int = Field(
        default=1,
        ge=1,
        le=256,
        description=(
            "Server processes of `lorehouse serve` (its `--workers` option overrides it and "
            "tells the processes it starts)."
        ),
    )
    api_search_threads: int = Field(
        default_factory=lambda data: search_turns_default(data["api_workers"]),
        ge=1,
        le=256,
        description=(
            "Searches (`/v1/search`) computed at once per server process; default: the CPU "
            "cores this process may use, shared among the `api_workers` processes (at least "
            "1). A search is CPU work, so more at once only makes them take turns on the "
            "cores and spend more CPU each. Further searches wait on the event loop, holding "
            "no thread."
        ),
    )
    api_blas_threads: int = Field(
        default=1,
        ge=1,
        le=64,
        description=(
            "BLAS threads per numpy call in a server process. Requests already run on many "
            "threads; BLAS threads of their own spin against each other and cut the requests "
            "served by several times."
        ),
    )
    api_stream_ping_seconds: float = Field(
        default=15.0,
        gt=0,
        description=(
            "Seconds of silence after which a streamed answer sends a keep-alive comment, so "
            "proxies and load balancers (idle timeouts of 30-60 s) do not cut an answer whose "
            "model is still thinking."
        ),
    )
    api_ask_wait_seconds: float = Field(
        default=30.0,
        gt=0,
        description="How long an ask waits for its turn before a 503 with Retry-After.",
    )
    api_feedback_per_key: int = Field(
        default=20,
        ge=1,
        le=100_000,
        description=(
            "Verdicts (POST /v1/feedback) one API key may send per "
            "api_feedback_window_seconds; further ones get a 429 with Retry-After. Each "
            "verdict is a golden-set candidate a person reviews, so one key must not be able "
            "to fill the review queue. Without a keys file every caller is the one "
            "anonymous caller and shares this allowance."
        ),
    )
    api_feedback_window_seconds: int = Field(
        default=3600,
        ge=1,
        le=366 * 24 * 3600,
        description="The sliding window api_feedback_per_key counts a key's verdicts in.",
    )
    s3_endpoint_url: str | None = Field(
        default=None, description="S3-compatible endpoint (MinIO, moto); unset means AWS."
    )
    s3_region: str | None = Field(
        default=None, description="AWS region of the buckets (source, LanceDB, partitions)."
    )
    dagster_executor: Literal["in_process", "multiprocess"] = Field(
        default="in_process",
        description=(
            "How Dagster runs the steps of a run launched by the daemon, the UI or `dagster job "
            "execute`: in one process (stages are sequential and parsing has its own pool), or "
            "one process per step, up to `workers` at a time, which is how the steps spread "
            "over pods or workers in a cluster. `lorehouse materialize` always runs in process."
        ),
    )
    reindex_cron: str = Field(
        default="0 2 * * *", description="When the nightly reindex schedule runs."
    )
    index_max_age_hours: float = Field(
        default=26.0,
        gt=0,
        description=(
            "A stage that has not succeeded for this long is flagged stale in the Dagster UI "
            "(the nightly interval plus slack)."
        ),
    )
    source_poll_seconds: int = Field(
        default=60,
        ge=5,
        description="How often the sensors look for work: the change sensor lists the source "
        "for added, changed or removed files, and the partitions sensor carries an inventory "
        "run on to its partitions' runs and the merge.",
    )
    partition_stall_seconds: int = Field(
        default=1800,
        ge=60,
        description="How long a partition run may go without a log event, or a queued one "
        "wait with nothing ahead of it in the run queue, before `lorehouse partitions` and the "
        "partitions sensor call it stalled rather than running or waiting: the stages log "
        "progress every few seconds, so a run this quiet has lost its process or hangs on a "
        "call, and a queued run with a free slot this long waits on a daemon that is not "
        "dequeuing.",
    )

    @field_validator("source_uri")
    @classmethod
    def _source_uri_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError(
                "LOREHOUSE_SOURCE_URI must name a folder, an s3:// prefix, a gdrive://, "
                "confluence+https:// or sharepoint:// source, or a web site"
            )
        return value.strip()

    @field_validator("languages")
    @classmethod
    def _languages_are_stemmed(cls, value: str) -> str:
        codes = value.split()
        unknown = [code for code in codes if code not in _SNOWBALL_CODES]
        if not codes or unknown:
            raise ValueError(
                f"LOREHOUSE_LANGUAGES takes ISO 639-1 codes among {' '.join(_SNOWBALL_CODES)}, "
                f"not {value!r}"
            )
        return " ".join(dict.fromkeys(codes))

    @property
    def language_codes(self) -> tuple[str, ...]:
        """`languages` as codes, the first the default."""
        return tuple(self.languages.split())

    @field_validator("upload_folder")
    @classmethod
    def _upload_folder_is_a_plain_path(cls, value: str | None) -> str | None:
        """A relative path of plain folder names: a '..' or a dot-folder (which the
        inventory never lists) would put uploads where nothing indexes them."""
        if value is None or not value.strip():
            return None
        parts = value.strip().strip("/").split("/")
        if any(not part or part in {".", ".."} or part.startswith(".") for part in parts):
            raise ValueError(
                f"LOREHOUSE_UPLOAD_FOLDER must be a relative path of plain folder names, "
                f"not {value!r}"
            )
        return "/".join(parts)

    @field_validator("web_allowed_networks")
    @classmethod
    def _web_allowed_networks_parse(cls, value: str) -> str:
        from lorehouse.sources.addresses import parse_networks

        parse_networks(value)  # raises ValueError naming the entry it cannot read
        return value

    @field_validator("partitions_uri")
    @classmethod
    def _partitions_uri_in_a_bucket(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        value = value.strip()
        if not value.startswith("s3://") or len(value) <= len("s3://"):
            raise ValueError(
                "LOREHOUSE_PARTITIONS_URI must be an s3:// bucket prefix "
                "(partitions on a shared volume need no setting: they stay under data_dir)"
            )
        return value

    @field_validator("source_sync_minutes")
    @classmethod
    def _sync_minutes_readable(cls, value: str) -> str:
        source_sync_minutes(value)  # raises ValueError naming the entry it cannot read
        return value.strip()

    def sync_interval(self, name: str | None) -> timedelta | None:
        """How long after its last sync the source `name` (None: a lone source) is due again;
        None: at every inventory."""
        minutes = source_sync_minutes(self.source_sync_minutes)
        found = minutes.get(name) if name else None
        if found is None:
            found = minutes.get("*")
        return timedelta(minutes=found) if found else None

    @property
    def lancedb_location(self) -> str:
        """The LanceDB database holding the `chunks` table and its indexes."""
        return self.lancedb_uri or str((self.data_dir / "lancedb").resolve())

    @property
    def snapshot_folder(self) -> Path | None:
        """Where the host's processes share searched table snapshots; None when each holds
        its own (`search_shared_snapshot`)."""
        return self.data_dir / "cache" / "snapshots" if self.search_shared_snapshot else None

    @property
    def chat_url(self) -> str:
        """The chat page's address, as links in Slack answers point at it."""
        base = self.public_url or f"http://{self.api_host}:{self.api_port}"
        return base.rstrip("/") + "/chat"

    @property
    def duckdb_path(self) -> Path:
        """The feature-store database every stage reads and writes."""
        return self.data_dir / "lorehouse.duckdb"

    @property
    def conversations_database(self) -> str:
        """The SQLAlchemy URL of the saved conversations' database."""
        return self.conversations_url or f"sqlite:///{self.data_dir / 'conversations.sqlite3'}"


def source_sync_minutes(value: str) -> dict[str, float]:
    """`source_sync_minutes` read: source name -> minutes, with "*" for a lone number (every
    source)."""
    found: dict[str, float] = {}
    for entry in value.split():
        name, _, minutes = entry.rpartition("=")
        try:
            number = float(minutes)
        except ValueError:
            number = -1.0
        if number < 0 or (name and not name.replace("-", "").replace("_", "").isalnum()):
            raise ValueError(
                f"LOREHOUSE_SOURCE_SYNC_MINUTES: {entry!r} is neither minutes nor NAME=MINUTES"
            )
        found[name or "*"] = number
    return found


#: Every setting under the heading the configuration page and `.env.example` list it under
#: (both are generated from this and the descriptions: `python -m lorehouse.settings_docs`).
SETTING_GROUPS: dict[str, tuple[str, ...]] = {
    "Sources": (
        "source_uri",
        "source_include",
        "source_permission_map",
        "source_sync_minutes",
        "s3_endpoint_url",
        "s3_region",
        "gdrive_service_account_file",
        "gdrive_subject",
        "gdrive_api_url",
        "confluence_email",
        "confluence_token",
        "confluence_cloud",
        "msgraph_tenant_id",
        "msgraph_client_id",
        "msgraph_client_secret",
        "msgraph_api_url",
        "msgraph_login_url",
        "web_max_pages",
        "web_allowed_networks",
        "web_page_seconds",
    ),
    "Parse": (
        "workers",
        "parse_timeout_seconds",
        "parse_timeout_seconds_per_mb",
        "max_file_bytes",
        "parse_memory_mb",
        "pdf_ocr_languages",
        "pdf_ocr_dpi",
        "chunk_max_tokens",
    ),
    "LLM": (
        "llm_model",
        "llm_api_base",
        "llm_concurrency",
        "llm_max_attempts",
        "llm_timeout_seconds",
        "enrichment_max_output_tokens",
        "answer_max_output_tokens",
        "prompts_dir",
    ),
    "Embedding": (
        "languages",
        "embed_model",
        "embed_api_base",
        "embed_batch_size",
        "embed_threads",
        "embed_query_threads",
        "embed_query_cache_bytes",
        "index_sentence_windows",
        "index_token_vectors",
    ),
    "Search": (
        "lancedb_uri",
        "ann_index_min_rows",
        "search_index_cache_mib",
        "search_metadata_cache_mib",
        "citation_retention_hours",
        "search_candidates",
        "search_query_cache_size",
        "search_shared_snapshot",
        "search_warm_min_rows",
        "search_passage_words",
        "search_split_asks",
        "search_translate_questions",
        "rerank",
        "rerank_api_base",
    ),
    "Ask": (
        "ask_context_chunks",
        "answer_min_similarity",
        "answer_passages_min_similarity",
        "answer_max_words",
        "answer_assert_threshold",
        "answer_decline_unmentioned",
        "answer_sentence_vectors_kept",
    ),
    "API": (
        "api_host",
        "api_port",
        "public_url",
        "api_keys_file",
        "api_workers",
        "api_search_threads",
        "api_blas_threads",
        "api_max_concurrent_asks",
        "api_ask_wait_seconds",
        "api_max_body_bytes",
        "api_keep_alive_seconds",
        "api_stream_ping_seconds",
        "api_feedback_per_key",
        "api_feedback_window_seconds",
        "slack_bot_token",
        "slack_signing_secret",
        "slack_access_file",
        "slack_api_url",
        "conversations_url",
        "conversation_retention_days",
        "upload_folder",
        "upload_max_bytes",
        "mcp_allowed_hosts",
        "mcp_api_key",
    ),
    "Orchestration": (
        "data_dir",
        "index_partitions",
        "partitions_uri",
        "writer_run_k8s_config",
        "index_batch_documents",
        "dagster_executor",
        "reindex_cron",
        "index_max_age_hours",
        "source_poll_seconds",
        "partition_stall_seconds",
    ),
    "Evaluation": (
        "eval_golden_set",
        "eval_gate",
        "judge_model",
        "judge_api_base",
        "judge_max_output_tokens",
    ),
}


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once; tests build their own `Settings(...)` instead."""
    return Settings()


#: LOREHOUSE_* names that are no setting and are read by name where they are used: the test
#: suite's own variables (LOREHOUSE_TEST_*) and the chat page test's screenshot folder.
NOT_SETTINGS = ("LOREHOUSE_TEST_", "LOREHOUSE_SCREENSHOT_DIR")


def unknown_variables(
    environ: Mapping[str, str], env_file: Path | None = None
) -> list[tuple[str, str | None]]:
    """Each LOREHOUSE_* variable of `environ` and of `env_file` (a `.env`) that names no
    setting, with the setting's variable closest to it (None when none is close).

    Settings pass over a name they do not know, so a misspelt variable would leave its
    setting at the default without a word: LOREHOUSE_SOURCE_URL would index the bundled
    sample corpus instead of the folder meant.
    """
    names = list(environ)
    if env_file is not None and env_file.is_file():
        from dotenv import dotenv_values

        names += [name for name in dotenv_values(env_file) if name not in environ]
    known = {name.upper(): f"LOREHOUSE_{name.upper()}" for name in Settings.model_fields}
    unknown = []
    for name in names:
        # Variables are read whatever their case, as the settings read them.
        upper = name.upper()
        if not upper.startswith("LOREHOUSE_") or upper.startswith(NOT_SETTINGS):
            continue
        field = upper.removeprefix("LOREHOUSE_")
        if field not in known:
            # Compared without the prefix every name shares, which would make any two close;
            # a typo is closer than 0.7, and a guess below it would mislead.
            closest = difflib.get_close_matches(field, known, n=1, cutoff=0.7)
            unknown.append((name, known[closest[0]] if closest else None))
    return unknown
