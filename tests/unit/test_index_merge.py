"""The index merge publishes what it merged only at its end: a merge stopped between its
commits leaves search reading the last published state, all of it, and the rerun the new one.

Two documents restricted together and one deleted, merged from two partitions: a merge that
stops after any of its partition commits must not show one of the two restricted and the
other still public, nor the deleted one in some tables and not in others.
"""

from __future__ import annotations

import shutil
import uuid
from datetime import timedelta
from pathlib import Path

import pandas as pd
import pytest

from lorehouse.embedding.base import MULTILINGUAL_EMBED_MODEL, Embedder
from lorehouse.embedding.minilm import OnnxMiniLMEmbedder
from lorehouse.search.filters import access_clause
from lorehouse.search.retriever import Retriever
from lorehouse.settings import Settings
from lorehouse.stages.embed import (
    EmbedReport,
    keyed_rows,
    sync_sentences,
    sync_table,
)
from lorehouse.stages.index_merge import run_index_merge
from lorehouse.stores.duckdb_store import DuckDBStore
from lorehouse.stores.lance_index import ChunkIndex, chunk_schema, document_schema
from lorehouse.stores.partitions import PartitionLayout, PartitionsBehind, bucket_of
from lorehouse.wiring import Lorehouse
from tests.conftest import default_embedder

PARTITIONS = 2
# Document ids are digests: the first eight hex digits choose the bucket.
ALPHA, BETA, GAMMA, DELTA = (f"0000000{d}{'0' * 12}" for d in "abde")
TEXTS = {
    ALPHA: "Alpacas graze on the upper meadow. They are shorn in May. The wool is sold in June. "
    "Two shepherds look after them.",
    BETA: "Beehives stand by the orchard wall. Honey is taken in August. The queen is marked "
    "blue. Smoke calms the bees.",
    GAMMA: "Goats climb the old quarry. They eat the brambles. Their milk makes a soft cheese. "
    "The herd has twelve goats.",
    DELTA: "Ducks swim on the mill pond. Eggs are collected at dawn. A fox was seen last week. "
    "The fence was mended.",
}
QUESTION = "What do the animals on the farm do?"
#: Each document's visibility, by what a reader sees of it: the API's search and citations,
#: and the sentence-window and document-profile tables searched beside the chunks.
VIEWS = ("search", "citations", "sentences", "documents")
BEFORE = {view: dict.fromkeys([ALPHA, BETA, GAMMA, DELTA], "public") for view in VIEWS}
AFTER = {view: {ALPHA: "restricted", BETA: "restricted", DELTA: "public"} for view in VIEWS}
#: The partition commits of a merge of these tables (chunks, sentences, documents), two each.
COMMITS = 6


class Stopped(Exception):
    """What stops the merge between two of its commits (as a kill would)."""


def _chunks(docs: dict[str, list[str]], model: str) -> pd.DataFrame:
    ids = sorted(docs)
    frame = pd.DataFrame(
        {
            "chunk_id": [f"chunk-{d[7]}" for d in ids],
            "doc_id": ids,
            "title": [f"Notes {d[7]}" for d in ids],
            "rel_path": [f"notes-{d[7]}.md" for d in ids],
            "source_uri": [f"file:///notes-{d[7]}.md" for d in ids],
            "file_type": "md",
            "position": pd.Series([0] * len(ids), dtype="int32"),
            "heading_path": [[f"Notes {d[7]}"] for d in ids],
            "page_start": pd.Series([None] * len(ids), dtype="Int32"),
            "page_end": pd.Series([None] * len(ids), dtype="Int32"),
            "is_table": False,
            "language": "en",
            "acl": [docs[d] for d in ids],
            "text_chat": [TEXTS[d] for d in ids],
            "text_embed": [f"Notes {d[7]}\n{TEXTS[d]}" for d in ids],
            "text_enriched": "",
        }
    )
    return keyed_rows(frame, "text_embed", model)


def _profiles(docs: dict[str, list[str]], model: str) -> pd.DataFrame:
    ids = sorted(docs)
    frame = pd.DataFrame(
        {
            "doc_id": ids,
            "title": [f"Notes {d[7]}" for d in ids],
            "rel_path": [f"notes-{d[7]}.md" for d in ids],
            "acl": [docs[d] for d in ids],
            "summary": [TEXTS[d] for d in ids],
            "faqs": [[] for _ in ids],
            "profile_text": [f"Notes {d[7]}\n{TEXTS[d]}" for d in ids],
        }
    )
    return keyed_rows(frame, "profile_text", model)


def _build(
    data: Path, docs: dict[str, list[str]], embedder: Embedder, only: str | None = None
) -> None:
    """The stores as the partition runs leave them for `docs` (id -> access groups): each
    partition's tables (or partition `only`'s), and the shared document list the merge
    follows."""
    layout = _layout(data)
    for bucket, key in enumerate(layout.keys):
        if only is not None and key != only:
            continue
        mine = {d: groups for d, groups in docs.items() if bucket_of(d, PARTITIONS) == bucket}
        index = ChunkIndex(str(layout.index_path(key)), search_indexes=False)
        report = EmbedReport(model=embedder.name, dimension=embedder.dimension)
        chunks = _chunks(mine, embedder.name)
        sync_table(index, chunks, "text_embed", chunk_schema, embedder, 16, report)
        sync_sentences(index, chunks, embedder, 16, report)
        profiles = _profiles(mine, embedder.name)
        sync_table(
            index.documents(), profiles, "profile_text", document_schema, embedder, 16, report
        )
    store = DuckDBStore(data / "lorehouse.duckdb")
    _record_done(store, layout)
    with store.connect() as connection:
        connection.execute("DELETE FROM documents")
        for doc_id, groups in docs.items():
            connection.execute(
                "INSERT INTO documents VALUES (?, ?, ?, ?, NULL, 1, 1, ?, 'x', NULL, now(), 'en')",
                [doc_id, f"Notes {doc_id[7]}", "file:///n", f"notes-{doc_id[7]}.md", groups],
            )


def _record_done(store: DuckDBStore, layout: PartitionLayout) -> None:
    """What each partition's embedding run and the stage-table merge record of a build: the
    merge takes a partition's rows only while the two agree, and compares only partitions
    whose record moved since it last took them, so each build gets a record of its own."""
    build = uuid.uuid4().hex
    for key in layout.keys:
        partition = DuckDBStore(layout.store_path(key))
        with partition.connect() as connection:
            connection.execute(
                "CREATE TABLE IF NOT EXISTS partition_state "
                "(name VARCHAR PRIMARY KEY, digest VARCHAR)"
            )
            connection.execute(
                "INSERT OR REPLACE INTO partition_state VALUES ('indexed', ?)", [build]
            )
    with store.connect() as connection:
        for key in layout.keys:
            connection.execute(
                "INSERT OR REPLACE INTO partition_merges VALUES (?, ?, now())",
                [key, f"{layout.partitions}:{build}"],
            )


def _layout(data: Path) -> PartitionLayout:
    return PartitionLayout(data / "partitions", PARTITIONS)


def _merge(data: Path, stop_after: int | None = None) -> None:
    """The search_index asset's merge; with `stop_after`, stopped after that many partition
    commits. Its cleanup of the shared chunks keeps no old version it may remove, so one
    that removed the published version would show."""
    layout = _layout(data)

    def progress(done: int, _steps: int) -> None:
        if done == stop_after:
            raise Stopped

    run_index_merge(
        DuckDBStore(data / "lorehouse.duckdb"),
        ChunkIndex(str(data / "lancedb"), keep_versions=timedelta(0)),
        {key: ChunkIndex(str(layout.index_path(key)), search_indexes=False) for key in layout.keys},
        layout,
        on_progress=progress,
    )


def _seen(index: ChunkIndex, embedder: Embedder) -> dict[str, dict[str, str]]:
    """view -> document -> "public" or "restricted", for the documents a reader finds there."""
    retriever = Retriever(index, embedder)
    vector = embedder.embed([QUESTION])[0]
    found: dict[str, dict[str, set[str]]] = {view: {} for view in VIEWS}
    for caller, groups in (("public", []), ("insider", ["security"])):
        where = access_clause(groups)
        hits = retriever.search(QUESTION, top_k=10, caller_groups=groups).hits
        cited = [
            d for d in TEXTS if retriever.chunk_preview(f"chunk-{d[7]}", groups, 0) is not None
        ]
        windows = index.sentences().snapshot().vector_ranking(vector, where, 100, "doc_id")
        profiles = index.documents().snapshot().vector_ranking(vector, where, 100)
        for view, doc_ids in (
            ("search", [hit.doc_id for hit in hits]),
            ("citations", cited),
            ("sentences", [doc_id for doc_id, _ in windows]),
            ("documents", [doc_id for doc_id, _ in profiles]),
        ):
            for doc_id in doc_ids:
                found[view].setdefault(doc_id, set()).add(caller)
    return {
        view: {d: "public" if "public" in who else "restricted" for d, who in docs.items()}
        for view, docs in found.items()
    }


@pytest.fixture(scope="module")
def embedder() -> OnnxMiniLMEmbedder:
    return default_embedder()


@pytest.fixture(scope="module")
def changed_stores(tmp_path_factory: pytest.TempPathFactory, embedder: OnnxMiniLMEmbedder) -> Path:
    """A merged and published index of four public documents, and partitions that since
    restricted alpha and beta (in two partitions) and deleted gamma."""
    data = tmp_path_factory.mktemp("stores")
    _build(data, {doc_id: [] for doc_id in TEXTS}, embedder)
    _merge(data)
    _build(data, {ALPHA: ["security"], BETA: ["security"], DELTA: []}, embedder)
    return data


@pytest.mark.parametrize("stop_after", range(1, COMMITS + 1))
def test_a_merge_stopped_between_commits_leaves_search_on_the_last_published_state(
    changed_stores: Path, tmp_path: Path, embedder: OnnxMiniLMEmbedder, stop_after: int
) -> None:
    data = Path(shutil.copytree(changed_stores, tmp_path / "data"))
    lancedb = str(data / "lancedb")
    serving = ChunkIndex(lancedb)  # the API's reader, with caches from before the merge
    assert _seen(serving, embedder) == BEFORE
    cited = serving.latest_version()
    commits_before = ChunkIndex(lancedb).table().version

    with pytest.raises(Stopped):
        _merge(data, stop_after)

    assert ChunkIndex(lancedb).table().version > commits_before, "the merge committed nothing"
    assert _seen(serving, embedder) == BEFORE
    assert _seen(ChunkIndex(lancedb), embedder) == BEFORE  # a server started now
    assert serving.latest_version() == cited

    _merge(data)

    assert _seen(serving, embedder) == AFTER
    assert _seen(ChunkIndex(lancedb), embedder) == AFTER
    # Citations made before both merges still open at their version, under today's access.
    retriever = Retriever(ChunkIndex(lancedb), embedder)
    assert retriever.pinned_preview(f"chunk-{ALPHA[7]}", [], 0, cited) is None
    kept = retriever.pinned_preview(f"chunk-{DELTA[7]}", [], 0, cited)
    assert kept is not None and kept[2] == "unchanged"
    removed = retriever.pinned_preview(f"chunk-{GAMMA[7]}", [], 0, cited)
    assert removed is not None and removed[2] == "removed"


def test_one_partition_holding_a_new_model_publishes_nothing_until_every_partition_does(
    tmp_path: Path, embedder: OnnxMiniLMEmbedder
) -> None:
    """A partition's own publish never replaces the shared tables: a model change is taken
    only by the merge of every partition, once all of them hold the new vectors. Until then
    searches keep the old model's index, all of it."""
    data = tmp_path / "data"
    docs: dict[str, list[str]] = {doc_id: [] for doc_id in TEXTS}
    _build(data, docs, embedder)
    _merge(data)
    layout = _layout(data)
    lancedb = str(data / "lancedb")
    published = ChunkIndex(lancedb).published_versions()
    e5 = Lorehouse(Settings(embed_model=MULTILINGUAL_EMBED_MODEL)).embedder()
    first, second = layout.keys
    _build(data, docs, e5, only=first)

    def publish(keys: list[str], whole: bool) -> None:
        run_index_merge(
            DuckDBStore(data / "lorehouse.duckdb"),
            ChunkIndex(lancedb),
            {key: ChunkIndex(str(layout.index_path(key)), search_indexes=False) for key in keys},
            layout,
            whole=whole,
        )

    with pytest.raises(PartitionsBehind, match="every partition holds it"):
        publish([first], whole=False)
    assert ChunkIndex(lancedb).published_versions() == published
    assert ChunkIndex(lancedb).embedding_model()[0] == embedder.name
    assert _seen(ChunkIndex(lancedb), embedder) == BEFORE

    _build(data, docs, e5, only=second)
    publish(layout.keys, whole=True)
    assert ChunkIndex(lancedb).embedding_model()[0] == e5.name
    assert _seen(ChunkIndex(lancedb), e5) == BEFORE
