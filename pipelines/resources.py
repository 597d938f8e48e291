"""Dagster resources: thin, configurable wrappers that hand Lorehouse library objects to assets."""

from pathlib import Path

import dagster as dg
from dagster_aws.s3 import S3Resource
from pydantic import Field

from lorehouse.agents.pipeline import AskOptions
from lorehouse.chunking import Chunker
from lorehouse.components import (
    JUDGE_MAX_OUTPUT_TOKENS,
    lance_storage_options,
    optional_llm_client,
)
from lorehouse.embedding import default_embedder, default_token_counter
from lorehouse.embedding_providers import Embedder, embedder_for
from lorehouse.enrichment import Enricher
from lorehouse.llm import LLMClient
from lorehouse.parsing.registry import ParseOptions
from lorehouse.parsing.runner import ParseLimits
from lorehouse.settings import (
    DEFAULT_ANN_INDEX_MIN_ROWS,
    DEFAULT_ANSWER_MAX_WORDS,
    DEFAULT_ANSWER_MIN_SIMILARITY,
    DEFAULT_BM25_WEIGHT,
    DEFAULT_ENRICHED_WEIGHT,
    Settings,
)
from lorehouse.sources import DocumentSource, LocalFolderSource, S3PrefixSource
from lorehouse.stores import DuckDBStore
from lorehouse.stores.lance_index import ChunkIndex
from lorehouse.token_vectors import TokenEncoder


class DocumentSourceResource(dg.ConfigurableResource):
    """The raw documents: a local folder, or an S3 prefix read through dagster-aws."""

    uri: str = Field(description="Folder path or s3://bucket/prefix")
    s3_endpoint_url: str | None = Field(default=None, description="S3-compatible endpoint")
    s3_region: str | None = Field(default=None, description="Region of the bucket")
    aws_access_key_id: str | None = Field(
        default=None, description="Use dg.EnvVar, never a literal"
    )
    aws_secret_access_key: str | None = Field(default=None, description="Use dg.EnvVar")

    def open(self) -> DocumentSource:
        """The library-level source this resource describes."""
        if self.uri.startswith("s3://"):
            s3 = S3Resource(
                endpoint_url=self.s3_endpoint_url,
                region_name=self.s3_region,
                aws_access_key_id=self.aws_access_key_id,
                aws_secret_access_key=self.aws_secret_access_key,
            )
            return S3PrefixSource(s3.get_client(), self.uri)
        return LocalFolderSource(self.uri)


class FeatureStoreResource(dg.ConfigurableResource):
    """The DuckDB feature store file shared by every stage, the API and the CLI."""

    database_path: str

    def open(self) -> DuckDBStore:
        return DuckDBStore(self.database_path)


class ParsingResource(dg.ConfigurableResource):
    """How the parse stage works: pool size, per-file timeout, size limit and OCR of scans."""

    workers: int = Field(ge=1)
    timeout_seconds: float = Field(gt=0)
    max_file_bytes: int = Field(gt=0)
    memory_mb: int | None = Field(default=None, ge=64)
    ocr_languages: str | None = None
    ocr_dpi: int = Field(default=300, ge=72, le=600)

    def options(self) -> ParseOptions:
        """The parser options these settings ask for."""
        return ParseOptions(ocr_languages=self.ocr_languages, ocr_dpi=self.ocr_dpi)

    def limits(self) -> ParseLimits:
        """Pool size and what one file may cost in time, bytes and memory."""
        return ParseLimits(
            workers=self.workers,
            timeout_seconds=self.timeout_seconds,
            max_file_bytes=self.max_file_bytes,
            memory_mb=self.memory_mb,
        )


class ChunkingResource(dg.ConfigurableResource):
    """The chunk size limit, counted with the embedding model's tokenizer."""

    max_tokens: int = Field(default=256, ge=32, le=256)

    def chunker(self) -> Chunker:
        """A chunker counting tokens exactly as the embedder will see them."""
        return Chunker(self.max_tokens, default_token_counter().count)


class EnrichmentResource(dg.ConfigurableResource):
    """Which model enriches chunks (none: extractive) and how hard it may be driven.

    API keys are not configuration here: litellm reads each provider's standard variable
    (OPENAI_API_KEY, ANTHROPIC_API_KEY, AWS_* for Bedrock) from the environment itself.
    """

    llm_model: str | None = None
    llm_api_base: str | None = None
    concurrency: int = Field(default=4, ge=1)
    max_attempts: int = Field(default=3, ge=1)
    timeout_seconds: float = Field(default=60.0, gt=0)
    models_dir: str = ".lorehouse/models"
    prompts_dir: str | None = Field(default=None, description="Folder of prompt overrides")

    def llm_client(self) -> LLMClient | None:
        """A client for the configured model; None means extractive."""
        return optional_llm_client(
            self.llm_model,
            api_base=self.llm_api_base,
            max_attempts=self.max_attempts,
            timeout_seconds=self.timeout_seconds,
            models_dir=Path(self.models_dir),
            prompts_dir=Path(self.prompts_dir) if self.prompts_dir else None,
        )

    def enricher(self) -> Enricher:
        """An enricher for the configured model, or the extractive one."""
        return Enricher(self.llm_client(), concurrency=self.concurrency)


class VectorIndexResource(dg.ConfigurableResource):
    """The LanceDB chunks table and the model that fills it.

    Provider keys, like the LLM's, are read by litellm from each provider's own variables.
    """

    uri: str = Field(description="LanceDB folder or s3:// URI")
    embed_model: str = Field(default="local", description="'local' MiniLM or a litellm model")
    embed_api_base: str | None = None
    batch_size: int = Field(default=64, ge=1)
    token_vectors: bool = Field(default=True, description="Store token vectors for maxsim")
    ann_min_rows: int = Field(default=DEFAULT_ANN_INDEX_MIN_ROWS, ge=1)
    s3_endpoint_url: str | None = None
    s3_region: str | None = None

    def token_encoder(self) -> TokenEncoder | None:
        """The bundled model whose token vectors late interaction reads, if they are stored."""
        return default_embedder() if self.token_vectors else None

    def open(self) -> ChunkIndex:
        """The chunk index at the configured location."""
        options = lance_storage_options(self.uri, self.s3_endpoint_url, self.s3_region)
        return ChunkIndex(self.uri, self.ann_min_rows, options)

    def embedder(self) -> Embedder:
        """The embedder both the index build and query time use."""
        return embedder_for(self.embed_model, self.embed_api_base)


class EvalResource(dg.ConfigurableResource):
    """Which golden set the retrieval eval scores and how its gate reports a drop."""

    golden_set: str
    gate: str = Field(default="warn", pattern="^(warn|error)$")
    plot_dir: str
    search_candidates: int = Field(default=50, ge=1)
    search_bm25_weight: float = Field(default=DEFAULT_BM25_WEIGHT, ge=0.0)
    search_enriched_weight: float = Field(default=DEFAULT_ENRICHED_WEIGHT, ge=0.0)
    rerank: str = "maxsim"
    rerank_api_base: str | None = None
    ask_context_chunks: int = Field(default=8, ge=1)
    ask_neighbours: int = Field(default=0, ge=0)
    answer_min_similarity: float = DEFAULT_ANSWER_MIN_SIMILARITY
    answer_max_words: int = Field(default=DEFAULT_ANSWER_MAX_WORDS, ge=10)
    judge_model: str | None = None
    judge_api_base: str | None = None
    judge_concurrency: int = Field(default=4, ge=1)
    judge_max_attempts: int = Field(default=3, ge=1)
    judge_timeout_seconds: float = Field(default=60.0, gt=0)
    prompts_dir: str | None = Field(default=None, description="Folder of prompt overrides")

    def ask_options(self) -> AskOptions:
        """The answer pipeline's options, as /v1/ask uses them."""
        return AskOptions(
            context_chunks=self.ask_context_chunks,
            neighbours=self.ask_neighbours,
            answer_min_similarity=self.answer_min_similarity,
            answer_max_words=self.answer_max_words,
        )

    def judge_client(self) -> LLMClient | None:
        """The answer-eval judge, or None: the answer eval is then skipped, never faked."""
        return optional_llm_client(
            self.judge_model,
            api_base=self.judge_api_base,
            max_attempts=self.judge_max_attempts,
            timeout_seconds=self.judge_timeout_seconds,
            max_output_tokens=JUDGE_MAX_OUTPUT_TOKENS,
            prompts_dir=Path(self.prompts_dir) if self.prompts_dir else None,
        )


def build_resources(settings: Settings) -> dict[str, dg.ConfigurableResource]:
    """Resources for a deployment described by `settings`; S3 secrets come from the environment."""
    is_s3 = settings.source_uri.startswith("s3://")
    prompts_dir = str(settings.prompts_dir.resolve()) if settings.prompts_dir else None
    return {
        "document_source": DocumentSourceResource(
            uri=settings.source_uri,
            s3_endpoint_url=settings.s3_endpoint_url,
            s3_region=settings.s3_region,
            aws_access_key_id=dg.EnvVar("AWS_ACCESS_KEY_ID") if is_s3 else None,
            aws_secret_access_key=dg.EnvVar("AWS_SECRET_ACCESS_KEY") if is_s3 else None,
        ),
        "feature_store": FeatureStoreResource(database_path=str(settings.duckdb_path.resolve())),
        "chunking": ChunkingResource(max_tokens=settings.chunk_max_tokens),
        "enrichment": EnrichmentResource(
            llm_model=settings.llm_model,
            llm_api_base=settings.llm_api_base,
            concurrency=settings.llm_concurrency,
            max_attempts=settings.llm_max_attempts,
            timeout_seconds=settings.llm_timeout_seconds,
            models_dir=str(settings.models_dir.resolve()),
            prompts_dir=prompts_dir,
        ),
        "vector_index": VectorIndexResource(
            uri=settings.lancedb_location,
            embed_model=settings.embed_model,
            embed_api_base=settings.embed_api_base,
            batch_size=settings.embed_batch_size,
            token_vectors=settings.index_token_vectors,
            ann_min_rows=settings.ann_index_min_rows,
            s3_endpoint_url=settings.s3_endpoint_url,
            s3_region=settings.s3_region,
        ),
        "evaluation": EvalResource(
            golden_set=str(settings.eval_golden_set),
            gate=settings.eval_gate,
            plot_dir=str((settings.data_dir / "evals").resolve()),
            search_candidates=settings.search_candidates,
            search_bm25_weight=settings.search_bm25_weight,
            search_enriched_weight=settings.search_enriched_weight,
            rerank=settings.rerank,
            rerank_api_base=settings.rerank_api_base,
            ask_context_chunks=settings.ask_context_chunks,
            ask_neighbours=settings.ask_neighbours,
            answer_min_similarity=settings.answer_min_similarity,
            answer_max_words=settings.answer_max_words,
            judge_model=settings.judge_model,
            judge_api_base=settings.judge_api_base,
            judge_concurrency=settings.llm_concurrency,
            judge_max_attempts=settings.llm_max_attempts,
            judge_timeout_seconds=settings.llm_timeout_seconds,
            prompts_dir=prompts_dir,
        ),
        "parsing": ParsingResource(
            workers=settings.workers,
            timeout_seconds=settings.parse_timeout_seconds,
            max_file_bytes=settings.max_file_bytes,
            memory_mb=settings.parse_memory_mb,
            ocr_languages=settings.pdf_ocr_languages,
            ocr_dpi=settings.pdf_ocr_dpi,
        ),
    }
