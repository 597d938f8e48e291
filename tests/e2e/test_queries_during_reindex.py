"""Queries keep succeeding, with consistent results, while a reindex rewrites the stores.

A real `lorehouse serve` answers /v1/search, /v1/ask and /v1/documents from several client
threads while a separate `lorehouse materialize` process applies an edited, a removed and an
added document: the nightly reindex racing live traffic, as in production.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from lorehouse.settings import BUNDLED_SAMPLE_CORPUS, REPO_ROOT
from lorehouse.stores.duckdb_store import DuckDBStore
from tests.conftest import materialize_everything, shown

sys.path.insert(0, str(REPO_ROOT / "bench"))
import load  # bench/load.py: starts and stops `lorehouse serve`

pytestmark = pytest.mark.slow  # a whole build of the sample corpus, more than once

QUESTION = "How many weeks of parental leave do primary caregivers get?"
FAQ = "hr/parental-leave-faq.md"
REMOVED = "engineering/oncall-runbook.md"
ADDED = "it/remote-work.md"
KEPT = "it/acceptable-use-policy.html"
#: Clients querying throughout: one keeps a request in flight at every moment of the reindex
#: (what the test needs); more only take the cores the reindex needs too.
CLIENTS = 1


@dataclass
class Observed:
    """What the clients saw, per endpoint."""

    statuses: Counter[tuple[str, int]] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    hit_sets: list[frozenset[str]] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _materialize(source: Path, data_dir: Path) -> subprocess.Popen[bytes]:
    home = data_dir / "dagster_home"
    home.mkdir(parents=True, exist_ok=True)
    env = load.subprocess_env(
        data_dir, LOREHOUSE_SOURCE_URI=str(source), DAGSTER_HOME=str(home), LOREHOUSE_WORKERS="1"
    )
    return subprocess.Popen(
        # The evals score the sample corpus's golden set: time, and no part of this test.
        [str(load.BIN / "lorehouse"), "materialize", "--select", "not group:evals"],
        env=env,
        cwd=data_dir,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _query_until(base_url: str, stop: threading.Event, seen: Observed) -> None:
    """One client: search, ask and list documents in turn until told to stop."""
    with httpx.Client(base_url=base_url, timeout=60) as client:
        while not stop.is_set():
            for name, send in (
                ("search", lambda: client.post("/v1/search", json={"query": QUESTION})),
                ("ask", lambda: client.post("/v1/ask", json={"question": QUESTION})),
                ("documents", lambda: client.get("/v1/documents")),
            ):
                try:
                    response = send()
                except httpx.HTTPError as error:
                    with seen.lock:
                        seen.errors.append(f"{name}: {type(error).__name__}: {error}")
                    continue
                with seen.lock:
                    seen.statuses[(name, response.status_code)] += 1
                    if response.status_code != 200:
                        seen.errors.append(f"{name}: {response.status_code} {response.text[:300]}")
                    elif name == "search":
                        seen.hit_sets.append(
                            frozenset(h["chunk_id"] for h in response.json()["hits"])
                        )
                    elif name == "ask":
                        seen.answers.append(shown(response.json()))


@pytest.mark.timeout(600)
def test_queries_succeed_and_stay_consistent_while_a_reindex_changes_documents(
    tmp_path: Path,
) -> None:
    source, data_dir = tmp_path / "source", tmp_path / "data"
    for rel_path in (FAQ, REMOVED, KEPT):
        (source / rel_path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(BUNDLED_SAMPLE_CORPUS / rel_path, source / rel_path)
    data_dir.mkdir()
    assert materialize_everything(source, data_dir, with_evals=False).success
    store = DuckDBStore(data_dir / "lorehouse.duckdb")
    old_chunks = store.table("chunks")

    faq = source / FAQ
    faq.write_text(faq.read_text().replace("**20 weeks**", "**26 weeks**"))
    (source / REMOVED).unlink()
    (source / ADDED).write_text(
        "# Remote work\n\nStaff may work remotely up to three days a week with their "
        "manager's agreement. Equipment is provided by IT.\n"
    )

    server = load.start_server(data_dir, tmp_path, tmp_path)
    seen = Observed()
    stop = threading.Event()
    try:
        load.wait_until_healthy(server, timeout_seconds=120)
        cited = _citations_before(server.base_url)
        clients = [
            threading.Thread(target=_query_until, args=(server.base_url, stop, seen))
            for _ in range(CLIENTS)
        ]
        for client in clients:
            client.start()
        time.sleep(1)  # traffic before the reindex starts
        reindex = _materialize(source, data_dir)
        code = reindex.wait(timeout=300)
        assert code == 0, reindex.stderr.read().decode()[-3000:] if reindex.stderr else ""
        time.sleep(1)  # and after it ends
        stop.set()
        for client in clients:
            client.join(timeout=120)
        with httpx.Client(base_url=server.base_url, timeout=60) as client:
            after_search = client.post("/v1/search", json={"query": QUESTION, "top_k": 20}).json()
            after_ask = client.post("/v1/ask", json={"question": QUESTION}).json()
            listed = client.get("/v1/documents").json()["documents"]
            pinned = {rel_path: client.get(path) for rel_path, path in cited.items()}
            unpinned = client.get(cited[FAQ].split("?")[0])
    finally:
        stop.set()
        load.stop_process_group(server.process)

    print(f"served during the reindex: {dict(seen.statuses)}")
    assert not seen.errors, seen.errors[:5]
    assert all(seen.statuses[(name, 200)] > 3 for name in ("search", "ask", "documents"))
    new_chunks = store.table("chunks")
    old_ids, new_ids = set(old_chunks["chunk_id"]), set(new_chunks["chunk_id"])
    # Every result came from one version of the index or the other: no phantom chunk.
    assert all(hits <= old_ids | new_ids for hits in seen.hit_sets)
    # Served the whole time, and the answer moved from the old text to the new.
    assert "20 weeks" in seen.answers[0] and "26 weeks" in shown(after_ask)
    assert {h["chunk_id"] for h in after_search["hits"]} <= new_ids
    assert {d["rel_path"] for d in listed} == {FAQ, ADDED, KEPT}

    # Citations made before the reindex still open the passage they cited, and say what
    # became of it; without their version, the edited chunk is gone.
    assert all(response.status_code == 200 for response in pinned.values()), pinned
    previews = {rel_path: response.json() for rel_path, response in pinned.items()}
    assert previews[FAQ]["changed_since"] == "changed"
    assert "20 weeks" in previews[FAQ]["chunk"]["text_chat"]
    assert previews[REMOVED]["changed_since"] == "removed"
    assert previews[KEPT]["changed_since"] == "unchanged"
    assert unpinned.status_code == 404


def _citations_before(base_url: str) -> dict[str, str]:
    """A pinned citation path per document: the answer's for the edited FAQ, a search hit's
    for the others."""
    with httpx.Client(base_url=base_url, timeout=60) as client:
        answer = client.post("/v1/ask", json={"question": QUESTION}).json()
        found = client.post(
            "/v1/search", json={"query": "on-call runbook acceptable use", "top_k": 20}
        ).json()["hits"]
    (faq,) = [c for c in answer["citations"] if c["rel_path"] == FAQ][:1]
    cited = {FAQ: faq["citation"]}
    for rel_path in (REMOVED, KEPT):
        cited[rel_path] = next(hit["citation"] for hit in found if hit["rel_path"] == rel_path)
    assert all("?version=" in path for path in cited.values()), cited
    return cited
