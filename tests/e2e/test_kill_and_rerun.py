"""A reindex killed with SIGKILL mid-enrichment and mid-embedding, then rerun, ends with the
stores a clean build of the same corpus has.

The LLM and the embedding model are an OpenAI-compatible server on 127.0.0.1 (reached through
litellm); it stops answering after a set number of calls, so the kill lands at a known point
of a real `lorehouse materialize` process, whose whole process group is then SIGKILLed.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from lorehouse.settings import BUNDLED_SAMPLE_CORPUS, REPO_ROOT
from lorehouse.stores.duckdb_store import DuckDBStore
from lorehouse.stores.lance_index import ChunkIndex
from tests.conftest import materialize_everything
from tests.dagster.conftest import metadata_of
from tests.e2e.test_cli import BIN
from tests.provider_server import ProviderServer, provider_server

pytestmark = pytest.mark.slow  # a whole build of the sample corpus, more than once

BEFORE = ["hr/parental-leave-faq.md", "engineering/oncall-runbook.md", "finance/budget-2026.xlsx"]
ADDED = ["it/acceptable-use-policy.html", "security/incident-response-plan.docx"]


def _settings(server: ProviderServer) -> dict[str, object]:
    return {
        "llm_model": "openai/lorehouse-test-chat",
        "llm_api_base": server.base_url,
        "llm_concurrency": 2,
        "embed_model": "openai/lorehouse-test-embedding",
        "embed_api_base": server.base_url,
        # 16 rows per LanceDB commit, so the corpus change below takes several commits
        "embed_batch_size": 2,
    }


def _copy(names: list[str], root: Path) -> None:
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(BUNDLED_SAMPLE_CORPUS / name, root / name)


def _change_corpus(source: Path) -> None:
    """An edited document, a deleted one and two new ones."""
    runbook = source / "engineering" / "oncall-runbook.md"
    runbook.write_text(runbook.read_text().replace("EUR 250", "EUR 275"))
    (source / "hr" / "parental-leave-faq.md").unlink()
    _copy(ADDED, source)


def _run_until_held(
    source: Path,
    data_dir: Path,
    server: ProviderServer,
    log: Path,
    settled: Callable[[], bool],
) -> None:
    """Runs `lorehouse materialize` until the server holds a call and `settled()` holds (the
    run has written what it does with the answers it got), then SIGKILLs its process group."""
    env = {
        **os.environ,
        "OPENAI_API_KEY": "sk-local-test",
        "LOREHOUSE_SOURCE_URI": str(source),
        "LOREHOUSE_DATA_DIR": str(data_dir),
        "LOREHOUSE_WORKERS": "1",
        **{f"LOREHOUSE_{k.upper()}": str(v) for k, v in _settings(server).items()},
    }
    env.pop("DAGSTER_HOME", None)
    with log.open("w") as output:
        process = subprocess.Popen(
            [str(BIN / "lorehouse"), "materialize", "--select", "not group:evals"],
            cwd=REPO_ROOT,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            held = server.holding.wait(timeout=240)
            assert held, f"the run never reached the held call:\n{log.read_text()[-3000:]}"
            deadline = time.monotonic() + 60
            while not settled() and time.monotonic() < deadline:
                time.sleep(0.2)
            assert settled(), log.read_text()[-3000:]
            assert process.poll() is None, log.read_text()[-3000:]
            os.killpg(process.pid, signal.SIGKILL)
            assert process.wait(timeout=60) == -signal.SIGKILL
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
            server.hold_chat_after = server.hold_embedding_after = None
            server.release.set()
    server.holding.clear()
    server.release.clear()


def _stores(data_dir: Path) -> dict[str, object]:
    """What a user can observe: feature rows, chunk ids, texts and vectors."""
    store = DuckDBStore(data_dir / "lorehouse.duckdb")

    def rows(table: str, columns: list[str]) -> list[tuple]:
        frame = store.table(table)[columns]
        return sorted(tuple(map(_plain, row)) for row in frame.itertuples(index=False))

    index = ChunkIndex(str(data_dir / "lancedb"))
    lance = index.table().to_arrow()
    documents = index.documents().table().to_arrow()
    return {
        "documents": rows("documents", ["doc_id", "title", "summary", "n_chunks", "n_pages"]),
        "chunks": rows("chunks", ["chunk_id", "doc_id", "position", "text_embed"]),
        "enriched": rows("enriched_chunks", ["chunk_id", "status", "faqs", "keywords"]),
        "faqs": rows("chunk_faqs", ["chunk_id", "question"]),
        "keywords": rows("chunk_keywords", ["chunk_id", "keyword"]),
        "lance_chunks": sorted(
            zip(
                lance["chunk_id"].to_pylist(),
                lance["text_enriched"].to_pylist(),
                map(_plain, lance["vector"].to_pylist()),
                strict=True,
            )
        ),
        "lance_documents": sorted(
            zip(
                documents["doc_id"].to_pylist(),
                map(_plain, documents["vector"].to_pylist()),
                strict=True,
            )
        ),
    }


def _plain(value: object) -> object:
    """Comparable and hashable: lists as tuples, vectors rounded to float32 precision."""
    if isinstance(value, np.ndarray | list):
        array = np.asarray(value)
        if array.dtype.kind == "f":
            return tuple(np.round(array, 6).tolist())
        return tuple(array.tolist())
    return value


def test_killed_reindex_then_rerun_equals_a_clean_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local-test")
    source, data_dir = tmp_path / "corpus", tmp_path / "data"
    _copy(BEFORE, source)
    with provider_server() as server:
        settings = _settings(server)
        assert materialize_everything(source, data_dir, **settings, with_evals=False).success
        store = DuckDBStore(data_dir / "lorehouse.duckdb")
        index = ChunkIndex(str(data_dir / "lancedb"))
        old_chunks = set(store.table("chunks")["chunk_id"])
        searchable_before = {row.doc_id for row in index.stored_keys().values()}
        cached = store.row_count("enrichment_cache")
        _change_corpus(source)

        # 1. Killed while the LLM enriches the changed and new chunks.
        # Two calls in flight, the 13th held: answers 1-10 are checkpointed, 11-12 are not.
        server.hold_chat_after = server.chat_calls + 12
        _run_until_held(
            source,
            data_dir,
            server,
            tmp_path / "enrichment-kill.log",
            settled=lambda: store.row_count("enrichment_cache") > cached,
        )
        assert store.row_count("enrichment_cache") - cached == 10
        assert set(index.stored_keys()) == old_chunks, "search changed before enrichment ended"

        # 2. Rerun, killed while embedding: some documents are committed, others not yet.
        calls_before_rerun = server.chat_calls
        server.hold_embedding_after = server.embedding_calls + 10
        new_chunks = set(store.table("chunks")["chunk_id"])
        _run_until_held(
            source,
            data_dir,
            server,
            tmp_path / "embedding-kill.log",
            settled=lambda: bool(index.stored_keys().keys() - old_chunks),
        )
        enrichment_calls = server.chat_calls - calls_before_rerun
        stored = index.stored_keys()
        assert stored.keys() & (new_chunks - old_chunks), "nothing was committed before the kill"
        assert (new_chunks - old_chunks) - stored.keys(), "the kill came after the last commit"
        # Every document that was searchable still is: old chunks or new, never neither.
        searchable = {row.doc_id for row in stored.values()}
        kept = searchable_before & set(store.table("chunks")["doc_id"])
        assert len(kept) == len(BEFORE) - 1
        assert kept <= searchable

        # 3. A clean rerun completes the reindex and redoes only what was lost.
        rerun = materialize_everything(source, data_dir, **settings, with_evals=False)
        assert rerun.success
        enriched = metadata_of(rerun, "enriched_chunks")
        assert enriched["computed"] == 0, "answers of the killed runs were asked for again"
        assert enrichment_calls > 0
        embedded = metadata_of(rerun, "chunk_embeddings")
        assert 0 < embedded["embedded"] < len(new_chunks - old_chunks)

        reference = tmp_path / "reference"
        assert materialize_everything(source, reference, **settings, with_evals=False).success
        after_crashes, clean = _stores(data_dir), _stores(reference)
        for name in clean:
            assert after_crashes[name] == clean[name], name
