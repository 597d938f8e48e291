"""What the Dagster UI shows about each asset beyond its code: the version of the stage that
built it, the columns of the table it writes, and who owns it.

Code versions come from the versions the stages already keep (each parser's, the chunker's,
the enrichment model and prompts, the embedding model and table layout), so after a change
that makes a stage redo its work the UI marks the asset and everything below it as changed.

Column schemas come from the stores themselves (`declared_columns`, `chunk_schema`), so a new
column shows up without being listed here; what each column holds is said here, once, for
whoever reads the table in the UI (tests/dagster/test_column_schemas.py fails on a column
left undescribed).
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

import dagster as dg

from lorehouse.embedding.base import BUNDLED_EMBED_MODELS
from lorehouse.embedding.minilm import EMBEDDING_DIMENSION
from lorehouse.models import NOBODY_GROUP, PUBLIC_GROUP, FileType
from lorehouse.parsing.runner import parser_version_of
from lorehouse.search.tables import TABLE_LAYOUT, TABLE_NAME, local_folder
from lorehouse.stages.embed import SENTENCE_WINDOW, SENTENCE_WINDOW_STRIDE
from lorehouse.stages.features import FEATURES_VERSION
from lorehouse.stages.index_merge import INDEX_MERGE_VERSION
from lorehouse.stores.duckdb_store import declared_columns
from lorehouse.stores.lance_index import chunk_schema
from lorehouse.stores.partitions import MERGE_VERSION
from lorehouse.wiring import Lorehouse

_log = logging.getLogger(__name__)

OWNERS = ["team:lorehouse"]

#: asset -> the table it writes (DuckDB unless marked lancedb).
TABLES = {
    "raw_documents": "documents_raw",
    "parsed_documents": "documents_parsed",
    "chunks": "chunks",
    "enriched_chunks": "enriched_chunks",
    "merged_partitions": "partition_merges",
    "document_features": "documents",
    "chunk_embeddings": "lancedb.chunks",
    "published_partition": "lancedb.chunks",
    "search_index": "lancedb.chunks",
    "retrieval_eval": "eval_retrieval",
    "answer_eval": "eval_answers",
}


def code_versions(lorehouse: Lorehouse) -> dict[str, str]:
    """asset -> the version of the stage that builds it, for the assets whose stage has one."""
    settings = lorehouse.settings
    options = lorehouse.parse_options()
    parsers = ",".join(
        f"{file_type.value}={parser_version_of(file_type, options)}"
        for file_type in FileType
        if file_type is not FileType.UNKNOWN
    )
    windows = (
        f"{SENTENCE_WINDOW}/{SENTENCE_WINDOW_STRIDE}" if settings.index_sentence_windows else "off"
    )
    embedding = (
        f"{lorehouse.embed_model}|layout{TABLE_LAYOUT}"
        f"|windows{windows}|tokens{settings.index_token_vectors}"
    )
    return {
        "parsed_documents": _short(parsers),
        "chunks": lorehouse.chunker().version,
        "enriched_chunks": _short(lorehouse.enricher().version),
        "merged_partitions": _short(f"{MERGE_VERSION}|{settings.index_partitions}"),
        "document_features": FEATURES_VERSION,
        "chunk_embeddings": _short(embedding),
        "search_index": _short(f"{INDEX_MERGE_VERSION}|{embedding}"),
    }


#: What a column holds, by name, wherever the name means the same; `TABLE_COLUMN_DESCRIPTIONS`
#: says it per table where one name means different things.
COLUMN_DESCRIPTIONS = {
    # -- documents and chunks -------------------------------------------------------------------
    "doc_id": "Document id: a hash of the file's path in the source, kept across runs.",
    "source_uri": "Where a person can open the original file (file://, s3:// or the page URL).",
    "rel_path": "The file's path within its source, as citations name it.",
    "file_type": "Format read from the file's content (pdf, docx, md, ...), else from its name.",
    "size_bytes": "The file's size in bytes, as the source lists it.",
    "content_sha256": "SHA-256 of the file's bytes (of its size and time when too large to read).",
    "modified_at": "When the file last changed, as the source reports it.",
    "acl_groups": (
        "Groups allowed to read the document, from its access files or its source; empty means "
        f"public, {NOBODY_GROUP} nobody."
    ),
    "inventoried_at": "When the inventory last saw this row change (new file, bytes or access).",
    "title": "The document's title: the parser's, else one an LLM wrote, else its path.",
    "markdown": "The document's text as Markdown, with its headings, lists and tables.",
    "page_map": (
        "JSON list of {page, start, end, label}: the page, slide or sheet each run of Markdown "
        "characters came from."
    ),
    "page_count": "Pages, slides or sheets the text came from; 1 for formats without pages.",
    "parser": "The parser that read the file (pymupdf, python-docx, markdown, ...).",
    "parser_version": "Parser version and non-default options; a new one parses the file again.",
    "parse_ms": "Milliseconds the parse took.",
    "warnings": "What the parser could not read as usual (skipped pages, OCR, hidden sheets).",
    "parsed_at": "When the document was last parsed.",
    "chunk_id": "Chunk id: a hash of its document, position and text.",
    "position": "The chunk's place in its document, 0 for the first.",
    "heading_path": "Headings the chunk sits under, outermost first.",
    "text_embed": "What is embedded: the heading path, then the chunk's plain text.",
    "text_chat": "The chunk as Markdown under its heading path, as readers and the LLM see it.",
    "page_start": "First page, slide or sheet the chunk comes from; 1 for formats without pages.",
    "page_end": "Last page, slide or sheet the chunk comes from; 1 for formats without pages.",
    "is_table": "Whether the chunk holds a table (a part of a long one repeats its header).",
    "token_count": "Embedding-model tokens in text_embed, [CLS] and [SEP] included.",
    "acl": (
        "Groups allowed to read it, as the inventory last found them; empty means public, "
        f"{NOBODY_GROUP} nobody."
    ),
    "source_fingerprint": "Content hash, parser and chunker versions it was cut with.",
    "chunked_at": "When the chunk was cut from its document.",
    "language": (
        "ISO 639-1 code told among LOREHOUSE_LANGUAGES: a chunk's own (one too short to tell "
        "has its document's); a document's is that of most of its chunks' tokens."
    ),
    # -- enrichment and the document list -------------------------------------------------------
    "summary": (
        "The document's summary: an LLM's 2-3 sentences, or its most central sentences when "
        "extractive; empty if not enriched."
    ),
    "faqs": "Questions the chunk answers, written by the LLM; empty when extractive or failed.",
    "keywords": "Up to 8 key phrases of the chunk, from the LLM or YAKE.",
    "enrichment_mode": "'llm' or 'extractive': how the enrichment was made.",
    "model": "The LLM that enriched the chunk, or the extractive method's name.",
    "prompt_version": "The prompt the LLM was given; 'extractive' without an LLM.",
    "status": "'enriched', or 'failed' (see error); a failed chunk is tried again next run.",
    "error": "Why the enrichment failed; empty when it succeeded.",
    "n_chunks": "How many chunks the document was cut into.",
    "n_pages": "Pages, slides or sheets of the document; 1 for formats without pages.",
    "updated_at": "When the document was last parsed or chunked, whichever is later.",
    # -- index partitions -----------------------------------------------------------------------
    "partition_key": "The index partition (p00, p01, ...).",
    "digest": "Partition count and a hash of the partition's stage tables when last merged.",
    "merged_at": "When the partition's rows were last copied into the shared store.",
    # -- the search index -----------------------------------------------------------------------
    "text_enriched": "Document title and the chunk's summary, FAQs and keywords, for BM25.",
    "embed_key": "Hash of the model and text_embed: an equal key reuses the stored vector.",
    "row_hash": "Hash of the row's other columns: an unchanged row is not rewritten.",
    "vector": "Unit-length embedding of text_embed, compared by cosine.",
    # -- evals ----------------------------------------------------------------------------------
    "run_id": "The eval run; every row of one run shares it.",
    "evaluated_at": "When the eval run started.",
    "golden_set": "File name of the golden set scored.",
    "index_version": "Version of the LanceDB chunks table the run searched.",
    "retriever": "What was scored: vector, bm25, hybrid(+reranker), agentic or naive.",
    "case_type": "Kind of question: lookup, table, paraphrase, multi_doc, ambiguous, unanswerable.",
    "k": "How many top results count.",
    "recall": "Share of the questions with all their evidence in the top k.",
    "mrr": "Mean reciprocal rank of each question's first hit (0 for a miss); the same for all k.",
    "n_questions": "Questions with evidence the row averages over.",
    "is_default": "Whether this is the retriever /v1/search uses by default.",
    "case_id": "The golden case's id.",
    "question": "The golden case's question.",
    "reference_answer": "The expert's answer from the golden set.",
    "answer": "What the reader was shown: the lead, then each cited excerpt under its number.",
    "answer_mode": "'llm' or 'extractive': how the answer was written.",
    "degraded": "Whether the LLM's answer failed and the extractive one stood in.",
    "n_citations": "How many sources the answer cites.",
    "judge_model": "The LLM that graded the answer; 'none' when only key facts were scored.",
    "score": "The judge's grade, 0-5; empty without a judge or when it failed.",
    "label": "correct, partial, incorrect or refused, from the score; empty when not graded.",
    "reasoning": "The judge's reasons for its score.",
    "judge_error": "Why the judge could not grade the answer; empty when it did.",
    "answer_seconds": "Seconds the pipeline took to answer.",
    "key_facts": "Numbers and named terms in the reference answer.",
    "key_facts_found": "How many of the key facts the shown answer states.",
    "declined": "Whether the pipeline said the documents do not answer.",
    "lead": "The answer's first statement, with its citation.",
    "lead_words": "Words in the lead, citations left out.",
    "lead_key_facts_found": "Key facts the lead alone states.",
    "shown_key_facts_found": "Key facts the lead and the excerpts state together.",
    "lead_from_evidence": (
        "Whether a statement of the lead is part of an evidence excerpt; empty without evidence."
    ),
    "asserted": (
        "Whether the answer asserted its lead; false when it showed the closest passages only "
        "or declined."
    ),
}

#: table -> column -> what it holds, where that differs from `COLUMN_DESCRIPTIONS`.
TABLE_COLUMN_DESCRIPTIONS = {
    "documents_parsed": {
        "title": "Title from the file's metadata or its first heading; empty if it has neither.",
    },
    "enriched_chunks": {
        "summary": (
            "Two-line summary of a table chunk (the extractive one names its columns and first "
            "row); empty for prose."
        ),
    },
    "lancedb.chunks": {
        "title": "The document's title, as in the documents table.",
        "acl": f"Groups allowed to read the chunk; {PUBLIC_GROUP} for a public one.",
    },
    "eval_retrieval": {
        "case_type": "Kind of question the row averages over, or 'all' for every kind.",
    },
}

#: The vector column's type while the provider model has not embedded anything yet.
PROVIDER_VECTOR_TYPE = "fixed_size_list<item: float>[provider dimension]"


def column_description(table: str, column: str) -> str:
    """What `column` of `table` holds; empty for a column nobody described yet (the test of
    the column schemas fails on it, where failing here would stop the code location)."""
    overrides = TABLE_COLUMN_DESCRIPTIONS.get(table, {})
    return overrides.get(column) or COLUMN_DESCRIPTIONS.get(column, "")


def column_schemas(lorehouse: Lorehouse | None = None) -> dict[str, dg.TableSchema]:
    """asset -> the columns of the table it writes, with their types and descriptions.

    `lorehouse` (the process's settings when None) says which embedding model fills the
    vector column, so the UI shows its real width."""
    lorehouse = lorehouse or Lorehouse()
    tables = {**declared_columns(), "lancedb.chunks": lance_columns(lorehouse)}
    schemas = {}
    for asset, table in TABLES.items():
        schemas[asset] = dg.TableSchema(
            columns=[
                dg.TableColumn(name, kind, description=column_description(table, name))
                for name, kind in tables[table]
            ]
        )
    return schemas


def lance_columns(lorehouse: Lorehouse) -> list[tuple[str, str]]:
    """(column, Arrow type) of the LanceDB chunks table, the vector as wide as the model's."""
    dimension = vector_dimension(lorehouse)
    columns = []
    for field in chunk_schema(dimension or 1, lorehouse.embed_model):
        kind = str(field.type)
        if field.name == "vector" and dimension is None:
            kind = PROVIDER_VECTOR_TYPE
        columns.append((field.name, kind))
    return columns


def vector_dimension(lorehouse: Lorehouse) -> int | None:
    """The width of the configured model's vectors, when known without embedding anything.

    The bundled models' is a constant (both give 384 dimensions). A provider model's is only
    known from a vector: the chunks table records it, so it is read from there when that
    table holds this model's vectors; otherwise None. No provider is called, as the
    definitions load in every run's process and must not wait for one, pay for one, or fail
    with one.
    """
    if lorehouse.embed_model in BUNDLED_EMBED_MODELS:
        return EMBEDDING_DIMENSION
    return _stored_dimension(lorehouse)


def _stored_dimension(lorehouse: Lorehouse) -> int | None:
    """The dimension the chunks table records for the configured model, if it is a local
    table built with that model.

    An object store is not asked: at definitions-load time an unreachable endpoint would hold
    up every run's start for a column's description. A local table's folder is looked for
    first, because connecting to LanceDB creates the database folder it names.
    """
    folder = local_folder(lorehouse.settings.lancedb_location)
    if folder is None or not (folder / f"{TABLE_NAME}.lance").is_dir():
        return None
    try:
        model, dimension = lorehouse.chunk_index().embedding_model()
    except Exception:  # noqa: BLE001 - a broken table must not stop the code location loading
        _log.warning("could not read the embedding dimension of %s", folder, exc_info=True)
        return None
    return dimension if model == lorehouse.embed_model else None


def with_attributes(spec: dg.AssetSpec, versions: dict[str, str], schemas: dict) -> dg.AssetSpec:
    """`spec` with its code version, owners, table name and column schema."""
    name = spec.key.to_user_string()
    metadata: dict[str, Any] = dict(spec.metadata or {})
    if name in TABLES:
        metadata["dagster/table_name"] = TABLES[name]
        metadata["dagster/column_schema"] = schemas[name]
    return spec.replace_attributes(
        code_version=versions.get(name, spec.code_version),
        owners=OWNERS,
        metadata=metadata,
    )


def _short(text: str) -> str:
    """A readable version for long descriptions: a 12-hex digest."""
    return hashlib.sha256(text.encode()).hexdigest()[:12]
