"""Settings: Search.

How searches read the index: where it is, what each process caches, how many candidates
are ranked, and the reranker.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, Field

#: Rows from which a vector table gets an ANN index. Below it a search is a product with the
#: vectors held in memory: exact, and as fast as the index up to about this size; past it the
#: index wins as the product grows with the rows (docs/benchmarks.md, "Search latency").
DEFAULT_ANN_INDEX_MIN_ROWS = 50_000
#: Rows from which a searched table's next version is loaded in the background while searches
#: go on with the rows it kept unchanged: loading a large version (reading its rows and
#: vectors, building its postings) takes minutes, and a smaller one loads quicker than a
#: search would notice the difference.
DEFAULT_SEARCH_WARM_MIN_ROWS = 20_000
#: Inverted lists a search of the mapped ANN index reads. Recall follows the lists read more
#: than their share of the table: on sentence-embedding vectors, 64 lists keep about 99 % of
#: the exact top 10 even where there are a thousand lists (a million rows), and cost a few
#: milliseconds there (docs/benchmarks.md, "Serving memory with several workers").
DEFAULT_SEARCH_ANN_PROBES = 64


class SearchSettings(BaseModel):
    """The search settings."""

    #: The heading the configuration page lists these settings under.
    heading: ClassVar[str] = "Search"

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
    search_ann_engine: Literal["mapped", "lancedb"] = Field(
        default="mapped",
        description=(
            'What proposes the nearest rows of a table past ann_index_min_rows: "mapped", '
            "an IVF index with 8-bit codes (faiss) in the host's snapshot files, which every "
            "API process maps, so `--workers N` hold one copy and a process's own memory does "
            'not grow with the table; or "lancedb", LanceDB\'s IVF_HNSW_SQ index, built by '
            "the index merge and cached by each process (search_index_cache_mib)."
        ),
    )
    search_ann_probes: int = Field(
        default=DEFAULT_SEARCH_ANN_PROBES,
        ge=1,
        le=65_536,
        description=(
            "Inverted lists of the mapped index a vector search reads (of about the square "
            "root of the table's rows): more finds more of the exact nearest rows, at a cost "
            "that grows with the probes; candidates are rescored with the full vectors."
        ),
    )
    search_index_cache_mib: int = Field(
        default=1024,
        ge=1,
        description=(
            "Memory each process lets LanceDB keep of the index pages it has read (scalar "
            "indexes; ANN partitions with the lancedb engine), instead of LanceDB's 6 GiB. "
            "With that engine keep it above the vector index's size (about 0.65 KB a "
            "chunk): below it every search reads partitions again, many times slower."
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
