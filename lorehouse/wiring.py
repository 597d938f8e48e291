"""The composition root: every store, client and pipeline Lorehouse runs, built from Settings.

The API, the CLI, the Dagster resources and the eval runners all ask a `Lorehouse` for what
they need, so `/v1/ask`, `lorehouse ask`, the `answer_eval` asset and `lorehouse eval answers`
answer with the same retriever, the same options and the same LLM limits. Nothing else in the
code base constructs a store, a model client or a pipeline from settings (a test guards it).

Objects are built on first use and kept: a process that only reads the feature store never
loads the embedding model, and one that serves requests builds the retriever once.

Longer than most modules because it is the one place every client is built: each is a
few lines, and together they are the whole deployment.
"""

from __future__ import annotations

from datetime import timedelta
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lorehouse.settings import Settings, get_settings

if TYPE_CHECKING:
    from lorehouse.agents.ask import AskOptions, AskPipeline
    from lorehouse.chunking import Chunker
    from lorehouse.embedding.base import Embedder, VectorCache
    from lorehouse.embedding.minilm import OnnxMiniLMEmbedder
    from lorehouse.enrichment import Enricher
    from lorehouse.llm import LLMClient
    from lorehouse.parsing.registry import ParseOptions
    from lorehouse.parsing.runner import ParseLimits
    from lorehouse.search.ann import NeighbourSearch
    from lorehouse.search.bm25 import TextAnalyzer
    from lorehouse.search.retriever import QueryTranslator, Retriever
    from lorehouse.search.tables import ChunkTable
    from lorehouse.search.token_vectors import TokenEncoder
    from lorehouse.sources import DocumentSource
    from lorehouse.sources.uploads import UploadFolder
    from lorehouse.stores.conversations import ConversationStore
    from lorehouse.stores.duckdb_store import DuckDBStore
    from lorehouse.stores.lance_index import ChunkIndex
    from lorehouse.stores.partitions import PartitionLayout


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


class Lorehouse:
    """Everything a deployment described by one Settings object runs.

    Heavy imports (litellm, the ONNX model, LanceDB) happen inside the methods, so building
    a `Lorehouse` costs nothing and each entry point pays only for what it uses.
    """

    def __init__(
        self, settings: Settings | None = None, answer_llm: LLMClient | None = None
    ) -> None:
        """`answer_llm` replaces the client built from the settings for answers and question
        rewriting (one with extra litellm options, such as a mocked response)."""
        self.settings = settings or get_settings()
        self._answer_llm = answer_llm

    # -- stores ----------------------------------------------------------------------------------

    def feature_store(self, lock_timeout_seconds: float | None = None) -> DuckDBStore:
        """The DuckDB feature store; `lock_timeout_seconds` bounds the wait for a writer's lock
        (a request waits less than a pipeline stage)."""
        from lorehouse.stores.duckdb_store import DuckDBStore

        if lock_timeout_seconds is None:
            return DuckDBStore(self.settings.duckdb_path)
        return DuckDBStore(self.settings.duckdb_path, lock_timeout_seconds=lock_timeout_seconds)

    def conversation_store(self) -> ConversationStore:
        """Saved conversations, in their own database (LOREHOUSE_CONVERSATIONS_URL)."""
        from lorehouse.stores.conversations import ConversationStore

        self.settings.data_dir.mkdir(parents=True, exist_ok=True)
        return ConversationStore(
            self.settings.conversations_database, self.settings.conversation_retention_days
        )

    def partition_layout(self) -> PartitionLayout:
        """Where the index partitions' own files live, and how many there are."""
        from lorehouse.stores.partitions import PartitionLayout

        root = self.settings.data_dir / "partitions"
        remote = None
        if self.settings.partitions_uri:
            from lorehouse.stores.partition_remote import PartitionRemote

            remote = PartitionRemote(self.s3_client, self.settings.partitions_uri, root)
        return PartitionLayout(root, self.settings.index_partitions, remote)

    def partition_store(self, key: str) -> DuckDBStore:
        """The store a partition's run owns: its documents' inventory and stage tables."""
        from lorehouse.stores.duckdb_store import DuckDBStore

        return DuckDBStore(self.partition_layout().store_path(key))

    def partition_index(self, key: str) -> ChunkIndex:
        """The LanceDB folder a partition's run writes its search rows to, beside its store.

        Never searched, only merged into the shared index: so it gets no search indexes (the
        shared tables build theirs once, over every partition's rows)."""
        from lorehouse.stores.lance_index import ChunkIndex

        uri = self.partition_layout().index_uri(key)
        return ChunkIndex(
            uri,
            storage_options=lance_storage_options(
                uri, self.settings.s3_endpoint_url, self.settings.s3_region
            ),
            search_indexes=False,
        )

    @cached_property
    def _chunk_index(self) -> ChunkIndex:
        from lorehouse.stores.lance_index import ChunkIndex

        reader = self.chunk_reader()
        # On the reader's connection: a process that searches and writes (an eval, an asset
        # run) holds one LanceDB cache, not two.
        return ChunkIndex(
            reader.uri,
            self.settings.ann_index_min_rows,
            lance_storage_options(
                reader.uri, self.settings.s3_endpoint_url, self.settings.s3_region
            ),
            db=reader.connection,
            keep_versions=timedelta(hours=self.settings.citation_retention_hours),
            snapshot_folder=self.settings.snapshot_folder,
            warm_min_rows=self.settings.search_warm_min_rows,
            analyzer=reader.analyzer,
            neighbours=reader.neighbours,
        )

    @cached_property
    def _chunk_reader(self) -> ChunkTable:
        from lorehouse.search.tables import ChunkTable

        uri = self.settings.lancedb_location
        return ChunkTable(
            uri,
            lance_storage_options(uri, self.settings.s3_endpoint_url, self.settings.s3_region),
            snapshot_folder=self.settings.snapshot_folder,
            cache_bytes=(
                self.settings.search_index_cache_mib << 20,
                self.settings.search_metadata_cache_mib << 20,
            ),
            warm_min_rows=self.settings.search_warm_min_rows,
            analyzer=self.text_analyzer(),
            keep_versions=timedelta(hours=self.settings.citation_retention_hours),
            neighbours=self.neighbour_search(),
        )

    def neighbour_search(self) -> NeighbourSearch:
        """From what size and through which index vector searches propose candidates."""
        from lorehouse.search.ann import NeighbourSearch

        return NeighbourSearch(
            min_rows=self.settings.ann_index_min_rows,
            probes=self.settings.search_ann_probes,
            engine=self.settings.search_ann_engine,
        )

    def chunk_reader(self) -> ChunkTable:
        """The chunk index as search reads it: the published version, its snapshot and
        cited rows, and nothing that writes. What the API, `lorehouse search` and the answer
        pipeline hold."""
        return self._chunk_reader

    def text_analyzer(self) -> TextAnalyzer:
        """How BM25 reads chunks and queries: each in its own language, among the
        deployment's (LOREHOUSE_LANGUAGES)."""
        from lorehouse.search.bm25 import analyzer_of

        return analyzer_of(self.settings.language_codes)

    def chunk_index(self) -> ChunkIndex:
        """The LanceDB chunk index the embedding stage and the index merge write (searches
        read it through `chunk_reader`)."""
        return self._chunk_index

    def document_source(self, s3_client: Any = None) -> DocumentSource:
        """The raw documents: a local folder, an S3 prefix read with `s3_client` (Dagster
        hands the one dagster-aws builds; without one, boto3 builds it from the settings), a
        connected service, or several of these by name (`wiki=confluence+https://... drive=
        gdrive://...`), each under its name in the paths."""
        from lorehouse.sources.composite import CompositeSource, named_sources

        self._uploads_prepared  # noqa: B018 - listed, with its hiding rule, before any upload
        from lorehouse.sources.included import IncludedFiles, include_patterns

        named = named_sources(self.settings.source_uri)
        source: DocumentSource
        if named is None:
            source = self._source(self.settings.source_uri, s3_client)
        else:
            source = CompositeSource(
                {name: self._source(uri, s3_client, name) for name, uri in named.items()}
            )
        patterns = include_patterns(self.settings.source_include)
        if patterns and self.settings.upload_folder is not None:
            patterns += (f"{self.settings.upload_folder}/*",)  # uploads are always indexed
        return IncludedFiles(source, patterns) if patterns else source

    def _source(self, uri: str, s3_client: Any = None, name: str | None = None) -> DocumentSource:
        from lorehouse.sources import LocalFolderSource, S3PrefixSource
        from lorehouse.sources.registry import CONNECTED_STARTS

        if uri.startswith(CONNECTED_STARTS):
            return self._connector_source(uri, name)
        if not uri.startswith("s3://"):
            return LocalFolderSource(uri)
        return S3PrefixSource(s3_client or self.s3_client(), uri)

    @cached_property
    def _uploads_prepared(self) -> UploadFolder | None:
        """The upload folder, made (with its rule) once per process rather than at every
        source a request or a run opens."""
        uploads = self.upload_folder()
        if uploads is not None:
            uploads.prepare()
        return uploads

    def upload_folder(self) -> UploadFolder | None:
        """Where chat page uploads go (LOREHOUSE_UPLOAD_FOLDER), or None when uploads are
        off: a subfolder of the lone local folder source, or a named local folder source
        (and a subfolder of it). Raises SourceError for one the source does not
        hold, or that is not a local folder, which the API and the runs must share."""
        from lorehouse.errors import SourceError
        from lorehouse.sources.composite import named_sources
        from lorehouse.sources.registry import CONNECTED_STARTS
        from lorehouse.sources.uploads import UploadFolder

        settings = self.settings
        if settings.upload_folder is None:
            return None
        named = named_sources(settings.source_uri)
        if named is None:
            uri, inside = settings.source_uri, settings.upload_folder
        else:
            name, _, inside = settings.upload_folder.partition("/")
            if name not in named:
                raise SourceError(
                    f"LOREHOUSE_UPLOAD_FOLDER {settings.upload_folder!r} must start with the "
                    f"name of one of the sources: {', '.join(named)}"
                )
            uri = named[name]
        if uri.startswith((*CONNECTED_STARTS, "s3://")):
            raise SourceError(
                f"LOREHOUSE_UPLOAD_FOLDER {settings.upload_folder!r} is in {uri}, which is not "
                "a local folder: uploads go into a folder the API and the runs share"
            )
        root = Path(uri).expanduser().resolve() / inside
        return UploadFolder(root, settings.upload_folder, settings.upload_max_bytes)

    def upload_source(self) -> DocumentSource:
        """The upload folder alone, as a source: what the upload sensor lists, at a cost that
        follows the uploads rather than the corpus."""
        from lorehouse.errors import SourceError
        from lorehouse.sources import LocalFolderSource

        uploads = self._uploads_prepared
        if uploads is None:
            raise SourceError("uploads are off: LOREHOUSE_UPLOAD_FOLDER is not set")
        return LocalFolderSource(uploads.root)

    @cached_property
    def _s3_client(self) -> Any:
        import boto3

        return boto3.client(
            "s3", endpoint_url=self.settings.s3_endpoint_url, region_name=self.settings.s3_region
        )

    def s3_client(self) -> Any:
        """A boto3 S3 client for the configured endpoint and region (credentials from the
        environment, an IAM role or the instance profile, as boto3 finds them)."""
        return self._s3_client

    def _connector_source(self, uri: str, name: str | None = None) -> DocumentSource:
        """A connected service's source (`lorehouse.sources.registry` picks its connector):
        its checkpoint and item state (and a web site's page bodies) kept under the data dir,
        one folder per source URI."""
        import hashlib

        from lorehouse.sources.connectors import ConnectorSource, PermissionMap
        from lorehouse.sources.registry import build_connector

        settings = self.settings
        folder = settings.data_dir / "connectors" / hashlib.sha256(uri.encode()).hexdigest()[:16]
        connector, anyone_default = build_connector(
            uri, lambda setting: getattr(settings, setting), folder
        )
        return ConnectorSource(
            connector,
            folder / "state.json",
            PermissionMap.load(settings.source_permission_map),
            anyone_default=anyone_default,
            sync_every=settings.sync_interval(name),
        )

    # -- models ----------------------------------------------------------------------------------

    @property
    def embed_model(self) -> str:
        """The embedding model `embed_model` names, "auto" resolved by the languages: what
        the index records and every embedder of this deployment is."""
        from lorehouse.embedding.base import model_for_languages

        return model_for_languages(self.settings.embed_model, self.settings.language_codes)

    @cached_property
    def _embedder(self) -> Embedder:
        from lorehouse.embedding.base import embedder_for

        return embedder_for(
            self.embed_model,
            self.bundled_model,
            self.settings.embed_api_base,
            max_attempts=self.settings.llm_max_attempts,
            timeout_seconds=self.settings.llm_timeout_seconds,
            multilingual=self._multilingual_model,
        )

    def _multilingual_model(self) -> Embedder:
        from lorehouse.embedding.e5 import shared_multilingual

        return shared_multilingual(self.settings.embed_threads)

    def bundled_model(self) -> OnnxMiniLMEmbedder:
        """The bundled MiniLM with this deployment's threads and query cache: the local
        embedder, and the token encoder of late interaction whatever the embedder."""
        from lorehouse.embedding.minilm import shared_embedder

        return shared_embedder(
            self.settings.embed_threads,
            self.settings.embed_query_cache_bytes,
            self.settings.embed_query_threads,
        )

    def embedder(self) -> Embedder:
        """The embedder the index is built with and queries are embedded with."""
        return self._embedder

    def token_encoder(self) -> TokenEncoder | None:
        """The encoder whose token vectors the index stores for late interaction, if it does."""
        if not self.settings.index_token_vectors:
            return None
        return self.bundled_model()

    def answer_llm(self) -> LLMClient | None:
        """The LLM that rewrites questions and writes answers; None answers extractively."""
        if self._answer_llm is not None:
            return self._answer_llm
        return self._llm(
            self.settings.llm_model,
            self.settings.llm_api_base,
            self.settings.answer_max_output_tokens,
        )

    def enrichment_llm(self) -> LLMClient | None:
        """The LLM that writes chunk summaries, keywords and FAQs; None enriches extractively."""
        return self._llm(
            self.settings.llm_model,
            self.settings.llm_api_base,
            self.settings.enrichment_max_output_tokens,
        )

    def judge_llm(self) -> LLMClient | None:
        """The answer eval's judge; None scores answers by key facts alone."""
        return self._llm(
            self.settings.judge_model,
            self.settings.judge_api_base,
            self.settings.judge_max_output_tokens,
        )

    def _llm(
        self, model: str | None, api_base: str | None, max_output_tokens: int
    ) -> LLMClient | None:
        if not model:
            return None
        from lorehouse.llm import LLMClient  # litellm is slow to import; only when configured

        return LLMClient(
            model,
            api_base=api_base,
            max_attempts=self.settings.llm_max_attempts,
            timeout_seconds=self.settings.llm_timeout_seconds,
            max_output_tokens=max_output_tokens,
            prompts_dir=self.settings.prompts_dir,
        )

    # -- stages ----------------------------------------------------------------------------------

    def parse_options(self) -> ParseOptions:
        """What the parsers do beyond reading text: OCR of scanned pages."""
        from lorehouse.parsing.registry import ParseOptions

        return ParseOptions(
            ocr_languages=self.settings.pdf_ocr_languages, ocr_dpi=self.settings.pdf_ocr_dpi
        )

    def parse_limits(self) -> ParseLimits:
        """Pool size and what one file may cost in time, bytes and memory."""
        from lorehouse.parsing.runner import ParseLimits

        return ParseLimits(
            workers=self.settings.workers,
            timeout_seconds=self.settings.parse_timeout_seconds,
            timeout_seconds_per_mb=self.settings.parse_timeout_seconds_per_mb,
            max_file_bytes=self.settings.max_file_bytes,
            memory_mb=self.settings.parse_memory_mb or None,  # 0: no ceiling
        )

    def chunker(self) -> Chunker:
        """A chunker counting tokens exactly as the embedder will see them."""
        from lorehouse.chunking import Chunker
        from lorehouse.embedding.minilm import default_token_counter
        from lorehouse.language import shared_detector

        return Chunker(
            self.settings.chunk_max_tokens,
            default_token_counter().count,
            shared_detector(self.settings.language_codes),
        )

    def enricher(self) -> Enricher:
        """An enricher for the configured LLM, or the extractive one."""
        from lorehouse.enrichment import Enricher

        return Enricher(self.enrichment_llm(), concurrency=self.settings.llm_concurrency)

    # -- query time ------------------------------------------------------------------------------

    @cached_property
    def _retriever(self) -> Retriever:
        from lorehouse.search.retriever import Retriever

        return Retriever(
            self.chunk_reader(),
            self.embedder(),
            candidates=self.settings.search_candidates,
            query_cache_size=self.settings.search_query_cache_size,
            default_rerank=self.settings.rerank,
            rerank_api_base=self.settings.rerank_api_base,
            split_asks=self.settings.search_split_asks,
            passage_words=self.settings.search_passage_words,
            token_encoder=self.bundled_model(),
            translator=self._question_translator(),
        )

    def _question_translator(self) -> QueryTranslator | None:
        """The LLM that translates cross-lingual questions for BM25; None leaves BM25 out."""
        client = self.answer_llm() if self.settings.search_translate_questions else None
        if client is None:
            return None
        from lorehouse.agents.translation import QuestionTranslator

        return QuestionTranslator(client, self.settings.search_query_cache_size)

    def retriever(self) -> Retriever:
        """The retriever `/v1/search` serves: candidates, weights and default reranker as set."""
        return self._retriever

    def ask_options(self) -> AskOptions:
        """The answer pipeline's options, the same wherever a question is answered."""
        from lorehouse.agents.ask import AskOptions

        return AskOptions(
            context_chunks=self.settings.ask_context_chunks,
            answer_min_similarity=self.settings.answer_min_similarity,
            answer_passages_min_similarity=self.settings.answer_passages_min_similarity,
            answer_max_words=self.settings.answer_max_words,
            answer_assert_threshold=self.settings.answer_assert_threshold,
            decline_unmentioned=self.settings.answer_decline_unmentioned,
        )

    @cached_property
    def _kept_sentence_vectors(self) -> VectorCache | None:
        """Context sentences' vectors, shared by every answer pipeline of this deployment."""
        from lorehouse.embedding.base import VectorCache

        kept = self.settings.answer_sentence_vectors_kept
        return VectorCache(kept) if kept else None

    def ask_pipeline(self) -> AskPipeline:
        """The agentic answer pipeline over `retriever()`, answering with `answer_llm()`."""
        from lorehouse.agents.ask import AskPipeline

        return AskPipeline(
            self.retriever(),
            self.chunk_reader().documents(),
            self.embedder(),
            self.answer_llm(),
            self.ask_options(),
            kept_vectors=self._kept_sentence_vectors,
        )

    def with_index_at(self, lancedb_uri: str | Path) -> Lorehouse:
        """The same deployment over another LanceDB location (a BEIR dataset's own store)."""
        settings = self.settings.model_copy(update={"lancedb_uri": str(lancedb_uri)})
        return Lorehouse(settings, self._answer_llm)
