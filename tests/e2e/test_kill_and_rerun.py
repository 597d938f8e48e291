"""A reindex killed with SIGKILL mid-enrichment and mid-embedding, then rerun, ends with the
stores a clean build of the same corpus has; so does a BEIR eval's index killed while it
embeds sentence windows.

The LLM and the embedding model are an OpenAI-compatible server on 127.0.0.1 (reached through
litellm); it stops answering after a set number of calls, so the kill lands at a known point
of a real `lorehouse materialize` process, whose whole process group is then SIGKILLed.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest

from evals.runner import run_beir_for_settings
from lorehouse.settings import BUNDLED_SAMPLE_CORPUS, REPO_ROOT, Settings
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
        # Sixteen partitions, as deployed: the changed documents fall in several of them, so
        # the first commits land before the held embedding call.
        "index_partitions": 16,
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
    command: Sequence[str] = ("materialize", "--select", "not group:evals"),
    **settings: object,
) -> None:
    """Runs `lorehouse <command>` until the server holds a call and `settled()` holds (the
    run has written what it does with the answers it got), then SIGKILLs its process group.

    `settings` are set for the run on top of the test settings, as LOREHOUSE_* variables."""
    env = {
        **os.environ,
        "OPENAI_API_KEY": "sk-local-test",
        "LOREHOUSE_SOURCE_URI": str(source),
        "LOREHOUSE_DATA_DIR": str(data_dir),
        "LOREHOUSE_WORKERS": "1",
        **{f"LOREHOUSE_{k.upper()}": str(v) for k, v in {**_settings(server), **settings}.items()},
    }
    env.pop("DAGSTER_HOME", None)
    with log.open("w") as output:
        process = subprocess.Popen(
            [str(BIN / "lorehouse"), *command],
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


def _partition_chunk_ids(data_dir: Path) -> set[str]:
    """The chunks the partitions hold now (merged into the shared store only later)."""
    return {
        chunk_id
        for path in (data_dir / "partitions").glob("*.duckdb")
        for chunk_id in DuckDBStore(path).column_values("chunks", "chunk_id").to_pylist()
    }


def _partition_index_keys(data_dir: Path) -> set[str]:
    """Chunks with vectors committed in the partitions' own LanceDB folders."""
    return {
        key
        for path in (data_dir / "partitions").glob("*.lancedb")
        for key in ChunkIndex(str(path)).stored_keys()
    }


def _cached_enrichments(data_dir: Path) -> int:
    """Enrichment answers cached so far: each partition caches its own as they come."""
    return sum(
        DuckDBStore(path).row_count("enrichment_cache")
        for path in (data_dir / "partitions").glob("*.duckdb")
    )


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
        "lance_sentences": _windows(data_dir / "lancedb"),
    }


def _windows(lancedb: Path) -> list[tuple]:
    """Every sentence-window row as a user's search reads it: key, text, pages, vector."""
    table = ChunkIndex(str(lancedb)).sentences().table().to_arrow()
    columns = ["sentence_id", "text_embed", "page_start", "page_end", "vector"]
    return sorted(
        tuple(_plain(value) for value in row)
        for row in zip(*(table[c].to_pylist() for c in columns), strict=True)
    )


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
        cached = _cached_enrichments(data_dir)
        _change_corpus(source)

        # 1. Killed while the LLM enriches the changed and new chunks.
        # Two calls in flight, the 13th held: answers 1-10 are checkpointed, 11-12 are not.
        server.hold_chat_after = server.chat_calls + 12
        _run_until_held(
            source,
            data_dir,
            server,
            tmp_path / "enrichment-kill.log",
            settled=lambda: _cached_enrichments(data_dir) > cached,
        )
        # Answers are saved every 10 and at the end of each partition's enrichment: the ones
        # saved before the kill are kept, at most the two in flight are lost.
        assert 10 <= _cached_enrichments(data_dir) - cached <= 12
        assert set(index.stored_keys()) == old_chunks, "search changed before enrichment ended"

        # 2. Rerun, killed while embedding: some documents are committed, others not yet.
        calls_before_rerun = server.chat_calls
        server.hold_embedding_after = server.embedding_calls + 10
        new_chunks = _partition_chunk_ids(data_dir)
        _run_until_held(
            source,
            data_dir,
            server,
            tmp_path / "embedding-kill.log",
            settled=lambda: bool(_partition_index_keys(data_dir) - old_chunks),
        )
        enrichment_calls = server.chat_calls - calls_before_rerun
        stored = _partition_index_keys(data_dir)
        assert stored & (new_chunks - old_chunks), "nothing was committed before the kill"
        assert (new_chunks - old_chunks) - stored, "the kill came after the last commit"
        # Search reads the shared tables, merged only once every partition's vectors are
        # done: until then every document is found as it was, never half replaced.
        assert set(index.stored_keys()) == old_chunks

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


#: What the BEIR eval's run sets: provider vectors only, so the run's calls are all counted.
BEIR_SETTINGS: dict[str, object] = {"index_token_vectors": False, "rerank": "none"}


def _pageless_dataset(root: Path, documents: int = 8, sentences: int = 12) -> Path:
    """A BEIR dataset of abstracts (no pages) long enough for several windows each."""
    root.mkdir(parents=True)
    rows = [
        {
            "_id": f"doc-{d:02}",
            "title": f"Trial {d} of compound {chr(65 + d)}",
            "text": " ".join(
                f"In cohort {s} of trial {d} the marker rose by {d * sentences + s} units."
                for s in range(sentences)
            ),
        }
        for d in range(documents)
    ]
    (root / "corpus.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    queries = [{"_id": "q1", "text": "How much did the marker rise in trial 3?"}]
    (root / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (root / "qrels").mkdir()
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\tdoc-03\t1\n")
    return root


def test_beir_index_killed_while_embedding_sentence_windows_then_rerun(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed after some documents' sentence windows were committed and before the others':
    the rerun writes the missing windows beside the kept ones and scores the dataset."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local-test")
    dataset = _pageless_dataset(tmp_path / "abstracts")
    data_dir, reference = tmp_path / "data", tmp_path / "reference"
    lancedb = data_dir / "beir" / "abstracts" / "lancedb"
    # Texts the server had embedded when each embedding call arrived: where calls begin.
    call_starts: list[int] = []
    count_call = ProviderServer.count_call

    def recording(server: ProviderServer, kind: str) -> None:
        if kind == "embedding":
            call_starts.append(len(server.texts_embedded))
        count_call(server, kind)

    monkeypatch.setattr(ProviderServer, "count_call", recording)
    with provider_server() as server:
        settings = {**_settings(server), **BEIR_SETTINGS}
        # A clean run first: the same dataset makes the same calls in the same order, so it
        # tells which call carries the last sentence windows.
        run_beir_for_settings(Settings(data_dir=reference, **settings), dataset)
        clean = _windows(reference / "beir" / "abstracts" / "lancedb")
        assert all(row[2:4] == (None, None) for row in clean)
        window_texts = {row[1] for row in clean}
        last_window = max(
            position for position, text in enumerate(server.texts_embedded) if text in window_texts
        )
        last_window_call = max(
            call for call, start in enumerate(call_starts) if start <= last_window
        )

        # Killed while that call is held: every document's row is stored, and the windows
        # of the documents committed before it.
        index = ChunkIndex(str(lancedb))
        server.hold_embedding_after = server.embedding_calls + last_window_call
        _run_until_held(
            dataset,
            data_dir,
            server,
            tmp_path / "window-kill.log",
            settled=lambda: index.sentences().exists() and bool(index.sentences().stored_keys()),
            command=("eval", "beir", str(dataset), "--json"),
            **BEIR_SETTINGS,
        )
        assert len(index.stored_keys()) == 8
        kept = len(index.sentences().stored_keys())
        assert 0 < kept < len(clean), "the kill did not land between window commits"

        rerun = subprocess.run(
            [str(BIN / "lorehouse"), "eval", "beir", str(dataset), "--json"],
            cwd=REPO_ROOT,
            env={
                **os.environ,
                "LOREHOUSE_DATA_DIR": str(data_dir),
                **{f"LOREHOUSE_{k.upper()}": str(v) for k, v in settings.items()},
            },
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert rerun.returncode == 0, rerun.stderr[-3000:]
        report = json.loads(rerun.stdout)
        assert report["documents_embedded"] == 0
        assert report["sentence_windows_embedded"] == len(clean) - kept
        assert report["n_queries"] == 1 and [r["retriever"] for r in report["results"]] == [
            "vector",
            "bm25",
            "hybrid",
        ]
    assert _windows(lancedb) == clean
