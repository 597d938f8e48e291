"""Settings: Embedding.

The embedding model, the languages the corpus is read in, and what the index stores per
chunk: a change here re-embeds, so these are chosen together.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, Field, field_validator

#: The languages BM25 has a Snowball stemmer for (lorehouse/search/bm25.py's table).
STEMMED_LANGUAGES = ("en", "de", "fr", "es", "it", "nl", "pt", "sv", "da", "no", "fi", "ru")
#: Bytes of recent queries' vectors the bundled embedder keeps (see `embed_query_cache_bytes`).
DEFAULT_EMBED_QUERY_CACHE_BYTES = 64 * 1024 * 1024


class EmbeddingSettings(BaseModel):
    """The embedding settings: model, languages, and what the index stores per chunk."""

    #: The heading the configuration page lists these settings under.
    heading: ClassVar[str] = "Embedding"

    languages: str = Field(
        default="en",
        description="The languages of the documents and questions, as ISO 639-1 codes separated "
        "by spaces, the most common first ('de en'): BM25 stems each chunk and each question "
        "in its own language, told among these (one language needs no telling); a text too "
        "short to tell counts as the first. Stemmed: " + " ".join(STEMMED_LANGUAGES) + ".",
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

    @field_validator("languages")
    @classmethod
    def _languages_are_stemmed(cls, value: str) -> str:
        codes = value.split()
        unknown = [code for code in codes if code not in STEMMED_LANGUAGES]
        if not codes or unknown:
            raise ValueError(
                f"LOREHOUSE_LANGUAGES takes ISO 639-1 codes among {' '.join(STEMMED_LANGUAGES)}, "
                f"not {value!r}"
            )
        return " ".join(dict.fromkeys(codes))

    @property
    def language_codes(self) -> tuple[str, ...]:
        """`languages` as codes, the first the default."""
        return tuple(self.languages.split())
