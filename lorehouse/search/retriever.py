"""Hybrid retrieval over the LanceDB chunks table: dense, BM25, fused by reciprocal rank.

Vectors and BM25 are searched over the chunks and their enriched metadata and the results
unioned; filters by file and page range narrow a search, and hits cite chunk ids. Every
filter, the access control one included, is part of the LanceDB query itself.

Longer than most modules because the Retriever is the one object searches, previews and
citations ask, under one access clause: a search whole and by ask, as chunks or passages,
its legs and their fusion, the rows it reads, and the cited chunks shown again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from lorehouse.embedding.base import Embedder, EmbeddingFailure, query_vectors
from lorehouse.models import SearchMode
from lorehouse.search.asks import interleave, question_asks
from lorehouse.search.bm25 import MultilingualAnalyzer
from lorehouse.search.filters import SearchFilters, access_clause, where_clause
from lorehouse.search.hits import HIT_COLUMNS, ChunkSince, SearchHit, SearchResult, hit_from_row
from lorehouse.search.legs import KeywordLeg, Leg, VectorLeg
from lorehouse.search.passages import passage_text
from lorehouse.search.ranking import RankingProfile
from lorehouse.search.rerankers import (
    MAXSIM,
    NONE,
    Candidate,
    RerankFailure,
    build_reranker,
)
from lorehouse.search.snapshot import TableSnapshot
from lorehouse.search.tables import FILE_NAME_FIELD, ChunkTable, IndexNotBuilt, sql_string
from lorehouse.search.token_vectors import TokenEncoder
from lorehouse.search.versions import VersionGone

log = logging.getLogger(__name__)

#: What `Retriever.warm` searches for: any text loads the same tables.
WARM_UP_QUERY = "warm up"

#: Chunks ranked per passage asked for: a passage's chunks often rank together, and each
#: passage is shown once.
PASSAGE_CANDIDATES_PER_HIT = 5


def _cross_lingual(chunks: TableSnapshot, query: str, scope: str, share: float) -> str | None:
    """The question's language when under `share` of the passages in `scope` are in it
    (RankingProfile.cross_lingual_share); None otherwise, and always for a one-language
    deployment."""
    analyzer = chunks.analyzer
    if not isinstance(analyzer, MultilingualAnalyzer):
        return None
    language = analyzer.language_of(query)
    return language if chunks.language_share(language, scope) < share else None


#: (question, ISO 639-1 code) -> the question in that language, for the keyword leg of a
#: cross-lingual search. Raises TranslationFailure when it cannot.
QueryTranslator = Callable[[str, str], str]


class TranslationFailure(RuntimeError):
    """A question could not be translated; the search goes on without the keyword leg."""


class IndexModelMismatch(RuntimeError):
    """The index was built with another embedding model than the one configured."""


class Retriever:
    """Searches one chunk index with the embedder that built it."""

    def __init__(
        self,
        index: ChunkTable,
        embedder: Embedder,
        candidates: int = 50,
        query_cache_size: int = 1024,
        default_rerank: str = NONE,
        rerank_api_base: str | None = None,
        ranking: RankingProfile | None = None,
        split_asks: bool = True,
        passage_words: int = 0,
        token_encoder: TokenEncoder | None = None,
        translator: QueryTranslator | None = None,
    ) -> None:
        self.index = index
        #: Keeps the keyword leg of a cross-lingual search, on the question translated into
        #: the language most of the caller's passages are in (an LLM's, when one is set).
        self.translator = translator
        #: What the maxsim reranker encodes a query's tokens (and passages without stored
        #: token vectors) with: the bundled model, whichever model embeds the index.
        self.token_encoder = token_encoder
        self.passage_words = passage_words
        self.split_asks = split_asks
        self.embedder = embedder
        self.candidates = candidates
        #: Every weight and constant the legs, fusion and reranker rank by.
        self.ranking = ranking or RankingProfile()
        # BM25 reads the chunk text at full weight, what enrichment wrote about it (title,
        # summary, keywords, FAQs) and its file name's words at their profile weights.
        self.text_fields = {
            "text_embed": 1.0,
            "text_enriched": self.ranking.enriched_weight,
            FILE_NAME_FIELD: self.ranking.file_name_weight,
        }
        self.default_rerank = default_rerank
        self.rerank_api_base = rerank_api_base
        # Query vectors by (model, text); a failed embedding raises and is not kept.
        self._query_vector = lru_cache(maxsize=query_cache_size)(self._embed_query)

    def _embed_query(self, model: str, query: str) -> np.ndarray:
        """The query's vector, read-only because the cache hands the same array to every
        search of that text."""
        vector = np.asarray(query_vectors(self.embedder, [query])[0], dtype=np.float32)
        vector.setflags(write=False)
        return vector

    def warm(self) -> bool:
        """Searches once as a caller without groups, so that what every search reads is
        loaded before the first request rather than during it; False when there is no
        index to warm (the first search reports why).

        The first search of a table version loads its vectors and builds the BM25 postings
        of the caller's scope, which takes far longer than any later search: a process
        serving requests made its first callers wait for it, and every request queued
        behind them.
        """
        started = time.perf_counter()
        # A reranker behind an API is not called: the warm-up reads only what is local.
        rerank = self.default_rerank if self.default_rerank in (MAXSIM, NONE) else NONE
        try:
            self.search(WARM_UP_QUERY, top_k=1, rerank=rerank)
        except (IndexNotBuilt, IndexModelMismatch) as error:
            log.info("search not warmed: %s", error)
            return False
        except Exception:  # a store unreachable now: the requests will report it
            log.warning("search not warmed", exc_info=True)
            return False
        log.info("search warmed in %.0f ms", 1000 * (time.perf_counter() - started))
        return True

    def check_model(self, chunks: TableSnapshot | None = None) -> None:
        """Raises IndexModelMismatch when query vectors would land in another vector space."""
        stored, _ = (chunks or self.index.snapshot()).embedding_model()
        if stored != self.embedder.name:
            raise IndexModelMismatch(
                f"the index was built with {stored!r} but the configured embedding model is "
                f"{self.embedder.name!r}; run `lorehouse materialize` to re-embed"
            )

    def search(
        self,
        query: str,
        top_k: int = 8,
        mode: SearchMode | str = SearchMode.HYBRID,
        filters: SearchFilters | None = None,
        caller_groups: Sequence[str] = (),
        rerank: str | None = None,
        passage_words: int | None = None,
    ) -> SearchResult:
        """The top_k chunks for `query` the caller may see, best first.

        A question with several asks is also searched once per ask, and the rankings take
        turns (lorehouse/search/asks.py), so the second ask's answer is not crowded out by the
        first's. With `passage_words` (default: the retriever's), each hit is the passage of
        consecutive chunks holding the chunk that ranked (lorehouse/search/passages.py).
        """
        if not query.strip():
            raise ValueError("the query is empty")
        words = self.passage_words if passage_words is None else passage_words
        # Every query of the question reads this one version of the table.
        chunks = self.index.snapshot()
        # Each leg's candidates: as many for passages as for chunks, so they rank the same.
        depth = max(self.candidates, top_k)
        where = where_clause(filters, caller_groups)
        plan = _SearchPlan(mode, caller_groups, where, rerank, chunks, depth)
        if words <= 0:
            return self._search_chunks(query, top_k, plan)
        # Chunks of one passage rank together: enough are ranked for top_k passages.
        ranked = self._search_chunks(query, top_k * PASSAGE_CANDIDATES_PER_HIT, plan)
        started = time.perf_counter()
        hits = self._as_passages(chunks, ranked.hits, top_k, words, where)
        timings = {**ranked.timings_ms, "passages": 1000 * (time.perf_counter() - started)}
        return ranked.model_copy(
            update={"hits": hits, "timings_ms": {k: round(v, 2) for k, v in timings.items()}}
        )

    def unmentioned(self, phrases: Sequence[str], caller_groups: Sequence[str] = ()) -> list[str]:
        """The `phrases` some word of which no chunk the caller may read holds (see
        `BM25Index.mentions`; "Wi-Fi" is one word, "Cloudflare API" two, which may sit in
        different chunks).

        Only the caller's chunks are looked at: a phrase found in restricted chunks alone is
        unmentioned for an outsider, so what an answer says about it tells nothing of them.
        """
        if not phrases:
            return []
        try:
            chunks = self.index.snapshot()
        except IndexNotBuilt:
            return []
        scope = access_clause(caller_groups)
        return [
            phrase
            for phrase in phrases
            if not all(chunks.mentions(word, scope) for word in phrase.split())
        ]

    def _as_passages(
        self, chunks: TableSnapshot, ranked: list[SearchHit], top_k: int, words: int, where: str
    ) -> list[SearchHit]:
        """The first top_k distinct passages of the ranked chunks, best first, each with the
        text of its chunks that match `where` (the same access and filters as the search)."""
        runs = chunks.passages(words)
        chosen: list[tuple[SearchHit, tuple[str, ...]]] = []
        seen: set[str] = set()
        for hit in ranked:
            members = runs.get(hit.chunk_id, (hit.chunk_id,))
            if members[0] in seen:
                continue
            seen.add(members[0])
            chosen.append((hit, members))
            if len(chosen) == top_k:
                break
        rows = chunks.rows_by_key(
            [key for _, members in chosen for key in members], where, HIT_COLUMNS
        )
        passages = []
        for rank, (hit, members) in enumerate(chosen, start=1):
            # A chunk the caller may not read, or a filter leaves out, is not joined; the
            # ranked chunk itself was found under the same clause.
            shown = [rows[key] for key in members if key in rows]
            pages = [row["page_start"] for row in shown if row["page_start"] is not None]
            ends = [row["page_end"] for row in shown if row["page_end"] is not None]
            passages.append(
                hit.model_copy(
                    update={
                        "rank": rank,
                        "text_chat": passage_text(shown),
                        "page_start": min(pages, default=None),
                        "page_end": max(ends, default=None),
                        "passage_chunk_ids": [row["chunk_id"] for row in shown],
                        "passage_parts": [
                            hit_from_row(row, version=chunks.version) for row in shown
                        ],
                    }
                )
            )
        return passages

    def _search_chunks(self, query: str, top_k: int, plan: _SearchPlan) -> SearchResult:
        """The top_k chunks of the plan's snapshot, the question searched whole and by ask."""
        split = question_asks(query) if self.split_asks else None
        if split is None:
            return self._search_one(query, top_k, plan)
        queries = split.queries()
        result = self._search_one(query, top_k, plan)
        timings = dict(result.timings_ms)
        # One after the other: searched on threads beside the whole question, the searches
        # contend for the cores and a question of two asks takes longer, not less.
        per_ask: list[SearchResult] = _timed(
            timings,
            "asks",
            lambda: [self._search_one(q, top_k, plan) for q in queries],
        )
        hits = interleave(
            result.hits, [r.hits for r in per_ask], key=lambda hit: hit.chunk_id, limit=top_k
        )
        for rank, hit in enumerate(hits, start=1):
            hit.rank = rank
        warnings = [*result.warnings, *(w for r in per_ask for w in r.warnings)]
        return result.model_copy(
            update={
                "hits": hits,
                "asks": queries,
                "warnings": list(dict.fromkeys(warnings)),
                "timings_ms": {k: round(v, 2) for k, v in timings.items()},
            }
        )

    def _search_one(self, query: str, top_k: int, plan: _SearchPlan) -> SearchResult:
        """One query's top_k in the plan's snapshot: its legs (`plan.depth` candidates each,
        `lorehouse.search.legs`), their fusion, the reranker."""
        chunks, depth, where = plan.chunks, plan.depth, plan.where
        mode = SearchMode(plan.mode)
        rerank = plan.rerank or self.default_rerank
        reranker = build_reranker(
            rerank,
            api_base=self.rerank_api_base,
            token_store=self.index.token_vectors(),
            encoder=self.token_encoder,
            ranking=self.ranking,
        )
        timings: dict[str, float] = {}
        warnings: list[str] = []
        if mode is not SearchMode.BM25:
            self.check_model(chunks)

        query_vector = np.zeros(0, dtype=np.float32)
        # Late interaction reads the text as it was embedded (title and headings included).
        columns = [*HIT_COLUMNS, "text_embed"] if rerank == MAXSIM else HIT_COLUMNS
        if mode is not SearchMode.BM25:
            try:
                query_vector = _timed(
                    timings, "embed", lambda: self._query_vector(self.embedder.name, query)
                )
            except EmbeddingFailure as error:
                # Keyword search needs no vector: a hybrid search degrades to it, visibly.
                # A vector-only search has nothing to fall back on and reports the failure.
                if mode is SearchMode.VECTOR:
                    raise
                mode, rerank, reranker = SearchMode.BM25, NONE, build_reranker(NONE)
                warnings.append(f"query embedding failed, keyword (BM25) results only: {error}")
        translations: dict[str, str] = {}
        legs = self._legs(query, mode, query_vector, plan, warnings, translations)
        mode = _mode_of(legs)
        # The legs run one after the other in the calling thread. On threads beside
        # each other a search took as long for more CPU, and under load every core is
        # already busy.
        rankings = [
            _timed(timings, leg.name, lambda leg=leg: leg.rank(chunks, where, depth))
            for leg in legs
        ]

        ordered = self._first_stage_order(mode, rankings)
        # Legs rank ids: only the rows shown, and those the reranker reads, are taken from the
        # snapshot, under the same predicate.
        reads = len(ordered) if reranker.reads is None else max(top_k, reranker.reads)
        ordered = _timed(
            timings, "read", lambda: self._read(chunks, ordered, reads, where, columns)
        )
        if rerank != NONE:
            started = time.perf_counter()
            try:
                ordered = reranker.rerank(query, query_vector, ordered)
            except RerankFailure as error:
                warnings.append(f"reranker failed, first-stage order kept: {error}")
            timings["rerank"] = 1000 * (time.perf_counter() - started)
        decisive = _decisive_stage(mode, rerank, warnings)
        hits = [
            _hit(rank, candidate, decisive, chunks.version)
            for rank, candidate in enumerate(ordered[:top_k], start=1)
        ]
        return SearchResult(
            query=query,
            mode=mode,
            rerank=rerank,
            hits=hits,
            timings_ms={k: round(v, 2) for k, v in timings.items()},
            warnings=warnings,
            translations=translations,
        )

    def _translated(
        self, query: str, language: str | None, warnings: list[str]
    ) -> tuple[str, str] | None:
        """(language, the question in it) for the keyword leg, or None when there is no
        translator, no language to translate into, or the translation failed (said in
        `warnings`)."""
        if self.translator is None or language is None:
            return None
        try:
            translated = self.translator(query, language).strip()
        except TranslationFailure as error:
            warnings.append(f"question not translated for keyword (BM25) ranking: {error}")
            return None
        return (language, translated) if translated else None

    def _legs(
        self,
        query: str,
        mode: SearchMode,
        query_vector: np.ndarray,
        plan: _SearchPlan,
        warnings: list[str],
        translations: dict[str, str],
    ) -> list[Leg]:
        """The legs `mode` names, vector first, less the keyword leg where it cannot rank.

        BM25 matches words: on a question in a language under a tenth of the caller's
        passages are in, it ranks the question translated into the language most of them are
        in (recorded in `translations`), or is left out, said in `warnings`, when there is no
        translation.
        """
        # Terms are weighted by what the caller may see, whatever the filters narrow to.
        scope = access_clause(plan.caller_groups)
        keywords: str | None = query if mode is not SearchMode.VECTOR else None
        if mode is SearchMode.HYBRID and (
            language := _cross_lingual(plan.chunks, query, scope, self.ranking.cross_lingual_share)
        ):
            translated = self._translated(query, plan.chunks.main_language(scope), warnings)
            if translated is None:
                keywords = None
                warnings.append(
                    f"keyword (BM25) ranking left out: almost none of the passages you may "
                    f"read are in the question's language ({language}), so only the meaning "
                    f"can match"
                )
            else:
                keywords = translated[1]
                translations[translated[0]] = translated[1]
        legs: list[Leg] = []
        if mode is not SearchMode.BM25:
            legs.append(
                VectorLeg(
                    query_vector,
                    self._sentence_windows_table,
                    self.ranking.sentences_per_candidate,
                )
            )
        if keywords is not None:
            legs.append(
                KeywordLeg(keywords, self.text_fields, scope, self.ranking.question_word_weight)
            )
        return legs

    def _sentence_windows_table(self) -> TableSnapshot | None:
        """The sentence windows' latest version; None for an index built without them."""
        try:
            # Asked of the table itself: an exists() check would list the tables every query.
            return self.index.sentences().snapshot()
        except IndexNotBuilt:
            return None

    def _read(
        self,
        chunks: TableSnapshot,
        ordered: list[Candidate],
        reads: int,
        where: str,
        columns: Sequence[str],
    ) -> list[Candidate]:
        """`ordered` with the rows of its first `reads` candidates filled in; the rest keep
        only their id and scores.

        A candidate with no row under `where` (a chunk of a sentence window whose chunk is
        gone from this version) is dropped, and the next one is read in its place.
        """
        read: list[Candidate] = []
        tail = ordered
        while len(read) < reads and tail:
            head, tail = tail[: reads - len(read)], tail[reads - len(read) :]
            rows = chunks.rows_by_key([c.chunk_id for c in head], where, columns)
            for candidate in head:
                if candidate.chunk_id in rows:
                    candidate.row = rows[candidate.chunk_id]
                    read.append(candidate)
        return [*read, *tail]

    def _first_stage_order(
        self, mode: SearchMode, rankings: list[list[tuple[str, float]]]
    ) -> list[Candidate]:
        """Candidates (ids and scores; rows come later) in the order the first stage decides."""
        stages = {
            SearchMode.VECTOR: ["vector"],
            SearchMode.BM25: ["bm25"],
            SearchMode.HYBRID: ["vector", "bm25"],
        }[mode]
        # Scores gathered in plain dicts and sorted once: a Candidate per id and a sort
        # through its properties cost more than the rest of the search.
        scores: dict[str, dict[str, float]] = {}
        for stage, ranking in zip(stages, rankings, strict=True):
            for chunk_id, score in ranking:
                scores.setdefault(chunk_id, {})[stage] = float(score)
        decisive = stages[0]
        if mode is SearchMode.HYBRID:
            # The rankings are the vector one, then the BM25 one.
            vector, bm25 = ([chunk_id for chunk_id, _ in ranking] for ranking in rankings)
            fused = self.ranking.fuse(vector, bm25)
            for chunk_id, stage_scores in scores.items():
                stage_scores["rrf"] = fused.get(chunk_id, 0.0)
            decisive = "rrf"
        # Ties broken by chunk id, as `by_score` does, for the same order in every process.
        order = sorted(scores, key=lambda key: (-scores[key].get(decisive, 0.0), key))
        return [Candidate(row={"chunk_id": key}, scores=scores[key]) for key in order]

    def chunk_preview(
        self,
        chunk_id: str,
        caller_groups: Sequence[str],
        window: int = 1,
        version: int | None = None,
    ) -> tuple[dict, list[dict]] | None:
        """A chunk and its neighbours in document order, as the chunks table was at
        `version` (default: now); None when absent or not visible.

        Absent and restricted look the same on purpose: the answer must not reveal that a
        chunk the caller may not see exists. Raises VersionGone for a version not kept.
        """
        access = access_clause(caller_groups)

        def rows(where: str, limit: int) -> list[dict]:
            if version is None:
                return self.index.rows(where, HIT_COLUMNS, limit)
            return self.index.rows_at(version, where, HIT_COLUMNS, limit)

        found = rows(f"chunk_id = {sql_string(chunk_id)} AND {access}", 1)
        if not found:
            return None
        chunk = found[0]
        low, high = chunk["position"] - window, chunk["position"] + window
        around = rows(
            f"doc_id = {sql_string(chunk['doc_id'])} AND position BETWEEN {low} AND {high} "
            f"AND {access}",
            2 * window + 1,
        )
        return chunk, sorted(around, key=lambda row: row["position"])

    def pinned_preview(
        self, chunk_id: str, caller_groups: Sequence[str], window: int, version: int
    ) -> tuple[dict, list[dict], ChunkSince] | None:
        """A chunk and its neighbours as cited from `version`, and what became of it; None
        when the caller may not read them, then or now.

        The strictest of the two access lists holds: the caller must be allowed by the
        version cited and by the index now (`changed_since`), and no text it serves may live
        now only in chunks the caller may not read, as a document moved or copied into a
        restricted folder does under a new id. Raises VersionGone for a version not kept.
        """
        found = self.chunk_preview(chunk_id, caller_groups, window, version)
        if found is None:
            return None
        chunk, around = found
        since = self.changed_since(chunk, caller_groups, version)
        if since is None or self._held_out_of_reach(around, caller_groups):
            return None
        return chunk, around, since

    def readable_as_cited(
        self, chunk_ids: Sequence[str], caller_groups: Sequence[str], version: int | None
    ) -> set[str]:
        """Those of `chunk_ids`, cited from `version`, that the caller may still read: what a
        stored answer may show again. The rule is the pinned preview's (readable then and
        now); a version no longer kept, or none, leaves the chunks readable today."""
        readable = set()
        for chunk_id in dict.fromkeys(chunk_ids):
            found: object = None
            pinned = version is not None
            if version is not None:
                try:
                    found = self.pinned_preview(chunk_id, caller_groups, 0, version)
                except VersionGone:
                    pinned = False
            if not pinned:
                found = self.chunk_preview(chunk_id, caller_groups, 0)
            if found is not None:
                readable.add(chunk_id)
        return readable

    def readable_documents(self, doc_ids: Sequence[str], caller_groups: Sequence[str]) -> set[str]:
        """Those of `doc_ids` the served index holds a chunk of that the caller may read: an
        upload is indexed for its uploader once this names it. Empty before any index."""
        if not doc_ids or not self.index.exists():
            return set()
        holders = self.index.snapshot().holders("doc_id", doc_ids, access_clause(caller_groups))
        return {doc_id for doc_id, readable in holders.items() if readable}

    def changed_since(
        self, chunk: dict, caller_groups: Sequence[str], version: int
    ) -> ChunkSince | None:
        """What became of a chunk read from `version`, for this caller: None when the caller
        may no longer read its document, which then serves nothing of the old one.

        A chunk's id is a digest of its document, position and text, so the same id now
        holds the same text. A document no longer in the index keeps the access list it was
        last indexed with (in the newest version since `version` that holds it): one
        restricted and then deleted stays restricted. When that is not known, as a version in
        between is no longer kept, nothing is served.
        """
        access = access_clause(caller_groups)
        if self.index.rows(
            f"chunk_id = {sql_string(chunk['chunk_id'])} AND {access}", ["chunk_id"], 1
        ):
            return "unchanged"
        document = f"doc_id = {sql_string(chunk['doc_id'])}"
        if self.index.rows(f"{document} AND {access}", ["chunk_id"], 1):
            return "changed"
        if self.index.rows(document, ["chunk_id"], 1):
            return None
        try:
            last = self.index.rows_when_last_held(
                document, f"{document} AND {access}", ["chunk_id"], 1, after=version
            )
        except VersionGone:
            return None
        # None: no version since holds the document, so the one cited was its last.
        return "removed" if last is None or last else None

    def _held_out_of_reach(self, rows: Sequence[dict], caller_groups: Sequence[str]) -> bool:
        """Whether some text of `rows` is held now only by chunks the caller may not read."""
        holders = self.index.snapshot().holders(
            "text_chat", [row["text_chat"] for row in rows], access_clause(caller_groups)
        )
        return not all(holders.values())


@dataclass(frozen=True)
class _SearchPlan:
    """What every query of one search shares: how to rank, for whom, in which version, and
    how many candidates each leg proposes."""

    mode: SearchMode | str
    caller_groups: Sequence[str]
    #: The filters and the caller's access as one clause, validated once.
    where: str
    rerank: str | None
    chunks: TableSnapshot
    depth: int


def _timed(timings: dict[str, float], stage: str, action: object) -> object:
    started = time.perf_counter()
    value = action()  # type: ignore[operator]
    timings[stage] = 1000 * (time.perf_counter() - started)
    return value


def _mode_of(legs: Sequence[Leg]) -> SearchMode:
    """The mode a search ran in: the legs it kept."""
    names = [leg.name for leg in legs]
    if names == ["vector"]:
        return SearchMode.VECTOR
    return SearchMode.BM25 if names == ["bm25"] else SearchMode.HYBRID


def _decisive_stage(mode: SearchMode, rerank: str, warnings: list[str]) -> str:
    if rerank != NONE and not warnings:
        return "rerank"
    return {SearchMode.VECTOR: "vector", SearchMode.BM25: "bm25"}.get(mode, "rrf")


def _hit(rank: int, candidate: Candidate, decisive: str, version: int) -> SearchHit:
    return hit_from_row(candidate.row, rank, candidate.scores, decisive, version)
