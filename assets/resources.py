"""Dagster resources: the settings a data engineer sees and changes in the UI, per concern.

Each resource's fields are named exactly like the `Settings` fields they set and carry no
defaults of their own: `build_resources` fills them from the deployment's Settings by name,
and every object is then built by the composition root (`lorehouse.wiring.Lorehouse`) from
the resources an asset holds, so a run configured in the launchpad and `lorehouse serve`
build the same retriever, pipeline and clients from the same values.
"""

# No `from __future__ import annotations` here: Dagster reads the connector fields' annotations
# at class creation to let them hold resources configured at launch.
from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import Field

from lorehouse.chunking import Chunker
from lorehouse.embedding.base import Embedder
from lorehouse.enrichment import Enricher
from lorehouse.parsing.registry import ParseOptions
from lorehouse.parsing.runner import ParseLimits
from lorehouse.search.token_vectors import TokenEncoder
from lorehouse.settings import Settings
from lorehouse.sources import DocumentSource
from lorehouse.stores import DuckDBStore
from lorehouse.stores.lance_index import ChunkIndex
from lorehouse.stores.partitions import PartitionLayout
from lorehouse.wiring import Lorehouse


def _setting(name: str, **constraints: Any) -> Any:
    """A resource field described as the setting of the same name is."""
    return Field(description=Settings.model_fields[name].description, **constraints)


class SettingsResource(dg.ConfigurableResource):
    """A resource whose fields are settings: `wiring()` builds from them."""

    def setting_values(self) -> dict[str, Any]:
        """This resource's fields that are settings, by name; a field left unset (None)
        takes the setting's own value."""
        return {
            name: getattr(self, name)
            for name in type(self).model_fields
            if name in Settings.model_fields and getattr(self, name) is not None
        }

    def wiring(self) -> Lorehouse:
        """The composition root for this resource's settings (the rest from the environment)."""
        return wiring_for(self)


def wiring_for(*resources: SettingsResource) -> Lorehouse:
    """The composition root for the settings of several resources, as one asset holds them."""
    values: dict[str, Any] = {}
    for resource in resources:
        values.update(resource.setting_values())
    return Lorehouse(Settings(**values))


class GoogleDriveResource(SettingsResource):
    """Google Drive sources (`gdrive://FOLDER_ID`): the service account that reads them."""

    gdrive_service_account_file: str | None = _setting("gdrive_service_account_file", default=None)
    gdrive_subject: str | None = _setting("gdrive_subject", default=None)
    gdrive_api_url: str | None = _setting("gdrive_api_url", default=None)


class ConfluenceResource(SettingsResource):
    """Confluence sources (`confluence+https://SITE?spaces=...`): who signs in, Cloud or Data
    Center."""

    confluence_email: str | None = _setting("confluence_email", default=None)
    confluence_token: str | None = Field(
        default=None, description="API token or personal access token: dg.EnvVar, never a literal"
    )
    confluence_cloud: bool | None = _setting("confluence_cloud", default=None)


class SharePointResource(SettingsResource):
    """SharePoint and OneDrive sources (`sharepoint://...`): the app that signs in to
    Microsoft Graph."""

    msgraph_tenant_id: str | None = _setting("msgraph_tenant_id", default=None)
    msgraph_client_id: str | None = _setting("msgraph_client_id", default=None)
    msgraph_client_secret: str | None = Field(
        default=None, description="The app's client secret: dg.EnvVar, never a literal"
    )
    msgraph_api_url: str | None = _setting("msgraph_api_url", default=None)
    msgraph_login_url: str | None = _setting("msgraph_login_url", default=None)


class WebSiteResource(SettingsResource):
    """Web site sources (an http(s):// start URL): how far a crawl goes, how long a page may
    take, and which non-public networks it may reach."""

    web_max_pages: int | None = _setting("web_max_pages", default=None, ge=1)
    web_allowed_networks: str | None = _setting("web_allowed_networks", default=None)
    web_page_seconds: float | None = _setting("web_page_seconds", default=None, gt=0)


#: The connected services' resources by key: each is a resource of its own in the Dagster UI
#: and the launchpad, configured at launch, and `document_source` reads its sources with them.
CONNECTOR_RESOURCES: dict[str, type[SettingsResource]] = {
    "google_drive": GoogleDriveResource,
    "confluence": ConfluenceResource,
    "sharepoint": SharePointResource,
    "web_site": WebSiteResource,
}


class DocumentSourceResource(SettingsResource):
    """The raw documents: a local folder, an S3 prefix read through dagster-aws, a connected
    service (through its connector's resource), or several of these by name."""

    source_uri: str = _setting("source_uri")
    source_include: str | None = _setting("source_include", default=None)
    #: A connected source keeps its checkpoint and fetched items here.
    data_dir: str | None = _setting("data_dir", default=None)
    source_permission_map: str | None = _setting("source_permission_map", default=None)
    source_sync_minutes: str | None = _setting("source_sync_minutes", default=None)
    #: Listed even before the first upload, with the rule that hides a file without groups.
    upload_folder: str | None = _setting("upload_folder", default=None)
    s3_endpoint_url: str | None = _setting("s3_endpoint_url", default=None)
    s3_region: str | None = _setting("s3_region", default=None)
    aws_access_key_id: str | None = Field(
        default=None, description="Use dg.EnvVar, never a literal"
    )
    aws_secret_access_key: str | None = Field(default=None, description="Use dg.EnvVar")
    google_drive: GoogleDriveResource
    confluence: ConfluenceResource
    sharepoint: SharePointResource
    web_site: WebSiteResource

    def setting_values(self) -> dict[str, Any]:
        """This resource's settings and those of the connector resources it reads with."""
        values = super().setting_values()
        for key in CONNECTOR_RESOURCES:
            values.update(getattr(self, key).setting_values())
        return values

    def open(self) -> DocumentSource:
        """The library-level source this resource describes."""
        s3_client = None
        if "s3://" in self.source_uri:  # the source, or one of several
            # Imported here: dagster-aws loads its AWS integrations with it, a share of every
            # run's start that a folder or a service source never uses.
            from dagster_aws.s3 import S3Resource

            s3_client = S3Resource(
                endpoint_url=self.s3_endpoint_url,
                region_name=self.s3_region,
                aws_access_key_id=self.aws_access_key_id,
                aws_secret_access_key=self.aws_secret_access_key,
            ).get_client()
        return self.wiring().document_source(s3_client)


class FeatureStoreResource(SettingsResource):
    """The DuckDB feature store (in `data_dir`) shared by every stage, the API and the CLI."""

    data_dir: str = _setting("data_dir")
    index_partitions: int = _setting("index_partitions", ge=1, le=256)
    #: The languages the documents are expected in (the check of the document list).
    languages: str | None = _setting("languages", default=None)
    partitions_uri: str | None = _setting("partitions_uri", default=None)
    s3_endpoint_url: str | None = _setting("s3_endpoint_url", default=None)
    s3_region: str | None = _setting("s3_region", default=None)

    def open(self) -> DuckDBStore:
        return self.wiring().feature_store()

    def layout(self) -> PartitionLayout:
        """Where each index partition's own store file lives."""
        return self.wiring().partition_layout()

    def open_partition(self, key: str) -> DuckDBStore:
        """The store file that partition `key` owns (its inventory slice and stage tables)."""
        return self.wiring().partition_store(key)

    def open_partition_index(self, key: str) -> ChunkIndex:
        """The LanceDB folder partition `key` writes its search rows to."""
        return self.wiring().partition_index(key)


class ParsingResource(SettingsResource):
    """How the parse stage works: pool size, per-file timeout, size limit and OCR of scans."""

    workers: int = _setting("workers", ge=1)
    parse_timeout_seconds: float = _setting("parse_timeout_seconds", gt=0)
    parse_timeout_seconds_per_mb: float = _setting("parse_timeout_seconds_per_mb", ge=0)
    max_file_bytes: int = _setting("max_file_bytes", gt=0)
    parse_memory_mb: int = _setting("parse_memory_mb", ge=0)
    pdf_ocr_languages: str | None = _setting("pdf_ocr_languages", default=None)
    pdf_ocr_dpi: int = _setting("pdf_ocr_dpi", ge=72, le=600)

    def options(self) -> ParseOptions:
        return self.wiring().parse_options()

    def limits(self) -> ParseLimits:
        return self.wiring().parse_limits()


class ChunkingResource(SettingsResource):
    """The chunk size limit, counted with the embedding model's tokenizer, and the languages
    each chunk's is told among."""

    chunk_max_tokens: int = _setting("chunk_max_tokens", ge=32, le=256)
    languages: str | None = _setting("languages", default=None)

    def chunker(self) -> Chunker:
        return self.wiring().chunker()


class EnrichmentResource(SettingsResource):
    """Which model enriches chunks (none: extractive) and how hard it may be driven.

    API keys are not configuration here: litellm reads each provider's standard variable
    (OPENAI_API_KEY, ANTHROPIC_API_KEY, AWS_* for Bedrock) from the environment itself.
    """

    llm_model: str | None = _setting("llm_model", default=None)
    llm_api_base: str | None = _setting("llm_api_base", default=None)
    llm_concurrency: int = _setting("llm_concurrency", ge=1)
    llm_max_attempts: int = _setting("llm_max_attempts", ge=1)
    llm_timeout_seconds: float = _setting("llm_timeout_seconds", gt=0)
    enrichment_max_output_tokens: int = _setting("enrichment_max_output_tokens", ge=16)
    index_batch_documents: int = _setting("index_batch_documents", ge=1)
    prompts_dir: str | None = _setting("prompts_dir", default=None)
    data_dir: str = _setting("data_dir")

    def enricher(self) -> Enricher:
        """An enricher for the configured model, or the extractive one."""
        return self.wiring().enricher()


class VectorIndexResource(SettingsResource):
    """The LanceDB chunks table and the model that fills it.

    Provider keys, like the LLM's, are read by litellm from each provider's own variables.
    """

    lancedb_uri: str = _setting("lancedb_uri")
    embed_model: str = _setting("embed_model")
    #: How BM25 reads the chunks and questions (the eval's searches).
    languages: str = _setting("languages")
    embed_api_base: str | None = _setting("embed_api_base", default=None)
    embed_batch_size: int = _setting("embed_batch_size", ge=1)
    index_batch_documents: int = _setting("index_batch_documents", ge=1)
    index_sentence_windows: bool = _setting("index_sentence_windows")
    index_token_vectors: bool = _setting("index_token_vectors")
    ann_index_min_rows: int = _setting("ann_index_min_rows", ge=1)
    citation_retention_hours: float = _setting("citation_retention_hours", ge=1)
    s3_endpoint_url: str | None = _setting("s3_endpoint_url", default=None)
    s3_region: str | None = _setting("s3_region", default=None)

    def token_encoder(self) -> TokenEncoder | None:
        return self.wiring().token_encoder()

    def open(self) -> ChunkIndex:
        return self.wiring().chunk_index()

    def embedder(self) -> Embedder:
        return self.wiring().embedder()


class EvalResource(SettingsResource):
    """What the eval assets score, how the gate reports a drop, and the answer settings they
    measure (the ones /v1/ask uses)."""

    eval_golden_set: str = _setting("eval_golden_set")
    eval_gate: str = _setting("eval_gate", pattern="^(warn|error)$")
    search_candidates: int = _setting("search_candidates", ge=1)
    search_query_cache_size: int = _setting("search_query_cache_size", ge=0)
    search_split_asks: bool = _setting("search_split_asks")
    rerank: str = _setting("rerank")
    rerank_api_base: str | None = _setting("rerank_api_base", default=None)
    ask_context_chunks: int = _setting("ask_context_chunks", ge=1)
    answer_min_similarity: float = _setting("answer_min_similarity")
    answer_passages_min_similarity: float = _setting("answer_passages_min_similarity")
    answer_max_words: int = _setting("answer_max_words", ge=10)
    answer_assert_threshold: float = _setting("answer_assert_threshold", ge=0.0, le=1.0)
    answer_decline_unmentioned: bool = _setting("answer_decline_unmentioned")
    answer_max_output_tokens: int = _setting("answer_max_output_tokens", ge=16)
    judge_model: str | None = _setting("judge_model", default=None)
    judge_api_base: str | None = _setting("judge_api_base", default=None)
    judge_max_output_tokens: int = _setting("judge_max_output_tokens", ge=16)
    data_dir: str = _setting("data_dir")

    @property
    def golden_set(self) -> Path:
        return Path(self.eval_golden_set)


#: Resource keys as assets name their parameters, and the class each is.
RESOURCE_CLASSES: dict[str, type[SettingsResource]] = {
    "document_source": DocumentSourceResource,
    "feature_store": FeatureStoreResource,
    "parsing": ParsingResource,
    "chunking": ChunkingResource,
    "enrichment": EnrichmentResource,
    "vector_index": VectorIndexResource,
    "evaluation": EvalResource,
}


def build_resources(settings: Settings) -> dict[str, Any]:
    """Resources for a deployment described by `settings`; secrets come from the environment.

    Every field takes the value of the setting of the same name. Paths are made absolute, so
    a run launched from another working directory reads the same stores. The connector
    resources are configured at launch (`configure_at_launch`): what the launchpad sets on
    one of them is what `document_source` reads with in that run. Outside a run, initialize
    them with `dg.build_resources`.
    """
    values = _config_values(settings)

    def fields(cls: type[SettingsResource]) -> dict[str, Any]:
        return {name: values[name] for name in cls.model_fields if name in values}

    # Secrets reach the launchpad as EnvVars, never as their values.
    secrets: dict[str, Any] = {
        name: dg.EnvVar(f"LOREHOUSE_{name.upper()}")
        for name in ("confluence_token", "msgraph_client_secret")
        if getattr(settings, name) is not None
    }
    if "s3://" in settings.source_uri:  # the source, or one of several
        secrets["aws_access_key_id"] = dg.EnvVar("AWS_ACCESS_KEY_ID")
        secrets["aws_secret_access_key"] = dg.EnvVar("AWS_SECRET_ACCESS_KEY")

    def configured(cls: type[SettingsResource]) -> dict[str, Any]:
        own = {k: v for k, v in secrets.items() if k in cls.model_fields}
        return {**{k: v for k, v in fields(cls).items() if v is not None}, **own}

    connectors = {
        key: cls.configure_at_launch(**configured(cls)) for key, cls in CONNECTOR_RESOURCES.items()
    }
    resources: dict[str, Any] = {
        key: cls(**fields(cls)) for key, cls in RESOURCE_CLASSES.items() if key != "document_source"
    }
    resources["document_source"] = DocumentSourceResource(
        **configured(DocumentSourceResource), **connectors
    )
    return {**resources, **connectors}


def _config_values(settings: Settings) -> dict[str, Any]:
    """The settings as Dagster config values: paths absolute and as text."""
    values = {
        name: str(value.resolve()) if isinstance(value, Path) else value
        for name, value in settings.model_dump().items()
    }
    values["lancedb_uri"] = settings.lancedb_location
    return values
