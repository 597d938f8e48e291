"""Library objects built from a Settings object: the one place the CLI, the API and the
evaluation runner assemble stores, the embedder, the retriever and the LLM client.

Dagster resources describe the same things field by field (they must be configurable in the
UI) and call the shared pieces here, such as `lance_storage_options`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from lorehouse.embedding import default_embedder
from lorehouse.embedding_providers import Embedder, embedder_for
from lorehouse.retrieval import Retriever
from lorehouse.settings import Settings
from lorehouse.stores.lance_index import ChunkIndex
from lorehouse.token_vectors import TokenEncoder

if TYPE_CHECKING:
    from lorehouse.agents.pipeline import AskOptions
    from lorehouse.llm import LLMClient


def lance_storage_options(
    uri: str, endpoint_url: str | None, region: str | None
) -> dict[str, str] | None:
    """Object-store options LanceDB needs for an S3-compatible endpoint; None for local paths."""
    if not uri.startswith("s3://"):
        return None
    options = {}
    if endpoint_url:
        options["endpoint"] = endpoint_url
        options["allow_http"] = str(endpoint_url.startswith("http://")).lower()
    if region:
        options["region"] = region
    return options


def open_chunk_index(settings: Settings) -> ChunkIndex:
    """The LanceDB chunk index a deployment writes and searches."""
    uri = settings.lancedb_location
    return ChunkIndex(
        uri,
        settings.ann_index_min_rows,
        lance_storage_options(uri, settings.s3_endpoint_url, settings.s3_region),
    )


def embedder_from(settings: Settings) -> Embedder:
    return embedder_for(settings.embed_model, settings.embed_api_base)


def token_encoder_from(settings: Settings) -> TokenEncoder | None:
    """The encoder whose token vectors the index stores for late interaction, if it does."""
    return default_embedder() if settings.index_token_vectors else None


def retriever_for(settings: Settings, index: ChunkIndex, embedder: Embedder) -> Retriever:
    """The retriever the API serves: candidates, default reranker and its endpoint as set."""
    return Retriever(
        index,
        embedder,
        candidates=settings.search_candidates,
        query_cache_size=settings.search_query_cache_size,
        default_rerank=settings.rerank,
        rerank_api_base=settings.rerank_api_base,
        bm25_weight=settings.search_bm25_weight,
        enriched_weight=settings.search_enriched_weight,
    )


def llm_client_for(settings: Settings, max_output_tokens: int = 400) -> LLMClient | None:
    """A client for the configured LLM, or None when answers and enrichment are extractive."""
    return _client(settings, settings.llm_model, settings.llm_api_base, max_output_tokens)


def ask_options_for(settings: Settings) -> AskOptions:
    """The answer pipeline's options: the same for /v1/ask, the CLI and the answer eval."""
    from lorehouse.agents.pipeline import AskOptions  # imports litellm

    return AskOptions(
        context_chunks=settings.ask_context_chunks,
        neighbours=settings.ask_neighbours,
        answer_min_similarity=settings.answer_min_similarity,
        answer_max_words=settings.answer_max_words,
        source_prior_weight=settings.ask_source_prior_weight,
    )


#: Room for the judge's reasoning, score and refusal flag.
JUDGE_MAX_OUTPUT_TOKENS = 500


def judge_client_for(settings: Settings) -> LLMClient | None:
    """A client for the answer-eval judge, or None when no judge model is configured."""
    return _client(settings, settings.judge_model, settings.judge_api_base, JUDGE_MAX_OUTPUT_TOKENS)


def _client(
    settings: Settings, model: str | None, api_base: str | None, max_output_tokens: int
) -> LLMClient | None:
    return optional_llm_client(
        model,
        api_base=api_base,
        max_attempts=settings.llm_max_attempts,
        timeout_seconds=settings.llm_timeout_seconds,
        max_output_tokens=max_output_tokens,
        models_dir=settings.models_dir,
        prompts_dir=settings.prompts_dir,
    )


def optional_llm_client(
    model: str | None,
    *,
    api_base: str | None,
    max_attempts: int,
    timeout_seconds: float,
    max_output_tokens: int = 400,
    models_dir: Path | None = None,
    prompts_dir: Path | None = None,
) -> LLMClient | None:
    """A client for `model`, or None when none is configured (extractive, or eval skipped).

    Settings and the Dagster resources both build their clients here.
    """
    if not model:
        return None
    from lorehouse.llm import LLMClient  # litellm is slow to import; only load it when needed

    return LLMClient(
        model,
        api_base=api_base,
        max_attempts=max_attempts,
        timeout_seconds=timeout_seconds,
        max_output_tokens=max_output_tokens,
        models_dir=models_dir,
        prompts_dir=prompts_dir,
    )
