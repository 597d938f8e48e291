"""Symbolic links, swapped files and odd names in a local corpus, against a real `lorehouse
serve`: nothing outside the source folder is read, a link never borrows its folder's access
list, and an original is served only while it holds the bytes that were indexed."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from lorehouse.api_keys import add_key
from lorehouse.errors import SourceError
from lorehouse.sources.local import LocalFolderSource
from lorehouse.stores.duckdb_store import DuckDBStore
from tests.bench_scripts import bench_script
from tests.conftest import materialize_everything

load = bench_script("load")

OUTSIDE = "Zanzibar outside canary: the quarterly vault code is 7314."
RESTRICTED = "Quokka restricted canary: executive bonuses are 41 percent."
LATIN = "Kestrel latin canary: the cafe opens at seven."
ENVIRON_CANARY = "LOREHOUSE_TEST_ENVIRON_CANARY"
SECRET_VALUE = "environ-canary-9c1f4e"


#: Sentences enough for every document to be cut into sentence windows, as real ones are.
FILLER = " ".join(
    f"Section {n} of this page describes routine matters for the staff of the office."
    for n in range(1, 9)
)


@dataclass
class Corpus:
    root: Path
    outside: Path
    data_dir: Path


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    base = tmp_path_factory.mktemp("links")
    root, outside = base / "corpus", base / "elsewhere"
    (root / "public").mkdir(parents=True)
    (root / "restricted").mkdir()
    outside.mkdir()
    (outside / "vault.md").write_text(f"# Vault\n\n{OUTSIDE} {FILLER}\n")
    (root / "restricted" / "_access.json").write_text('{"groups": ["executives"]}')
    (root / "restricted" / "pay.md").write_text(f"# Pay\n\n{RESTRICTED} {FILLER}\n")
    (root / "public" / "handbook.md").write_text(
        "# Handbook\n\nThe office opens at nine and the library lends books for two weeks. "
        f"{FILLER}\n"
    )
    (root / "public" / "page.html").write_text(
        "<html><head><title>Intranet page</title></head><body><h1>Intranet page</h1>"
        f"<p>Lunch is served at noon in the atrium every weekday. {FILLER}</p>"
        "<script>fetch('/v1/documents')</script></body></html>"
    )
    (root / "public" / "to-restricted.md").symlink_to(root / "restricted" / "pay.md")
    (root / "public" / "to-outside.md").symlink_to(outside / "vault.md")
    (root / "public" / "to-proc.md").symlink_to("/proc/self/status")
    (root / "public" / "linked-folder").symlink_to(outside, target_is_directory=True)
    latin = os.fsencode(root / "public") + b"/caf\xe9-latin1.md"
    Path(os.fsdecode(latin)).write_text(f"# Cafe\n\n{LATIN} {FILLER}\n")
    data_dir = base / "data"
    result = materialize_everything(root, data_dir, with_evals=False)
    assert result.success  # type: ignore[attr-defined]
    return Corpus(root, outside, data_dir)


@dataclass
class Live:
    url: str
    outsider: dict[str, str]
    insider: dict[str, str]


@pytest.fixture(scope="module")
def live(corpus: Corpus, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    logs = tmp_path_factory.mktemp("links-serve")
    keys = logs / "keys.yaml"
    outsider, insider = add_key(keys, "outsider", []), add_key(keys, "insider", ["executives"])
    server = load.start_server(
        corpus.data_dir,
        logs,
        logs,
        LOREHOUSE_API_KEYS_FILE=str(keys),
        LOREHOUSE_SOURCE_URI=str(corpus.root),
        **{ENVIRON_CANARY: SECRET_VALUE},
    )
    try:
        load.wait_until_healthy(server, timeout_seconds=120)
        yield Live(server.base_url, {"X-API-Key": outsider}, {"X-API-Key": insider})
    finally:
        load.stop_process_group(server.process)


def _hits(live: Live, query: str, headers: dict[str, str]) -> list[dict]:
    response = httpx.post(
        f"{live.url}/v1/search", json={"query": query, "top_k": 20}, headers=headers, timeout=30
    )
    assert response.status_code == 200, response.text
    return list(response.json()["hits"])


def _chunk_of(live: Live, rel_path: str, query: str) -> str:
    found = [hit for hit in _hits(live, query, live.insider) if hit["rel_path"] == rel_path]
    assert found, f"{rel_path} is not searchable"
    return str(found[0]["chunk_id"])


def test_links_are_recorded_as_failed_and_never_read(corpus: Corpus) -> None:
    store = DuckDBStore(corpus.data_dir / "lorehouse.duckdb")
    failed = store.table("documents_failed", ["rel_path", "detail"])
    reasons = dict(zip(failed["rel_path"], failed["detail"], strict=True))
    for link in ("to-restricted.md", "to-outside.md", "to-proc.md", "linked-folder"):
        assert "symbolic link" in reasons[f"public/{link}"], reasons
    texts = " ".join(store.table("chunks", ["text_chat"])["text_chat"])
    assert "Zanzibar" not in texts and "VmPeak" not in texts and "TracerPid" not in texts
    # The restricted document is indexed once, at its own path, under its own access list.
    chunks = store.table("documents_raw", ["rel_path", "acl_groups"])
    groups = dict(zip(chunks["rel_path"], chunks["acl_groups"], strict=True))
    assert list(groups["restricted/pay.md"]) == ["executives"]


def test_an_outsider_finds_nothing_a_link_pointed_at(live: Live) -> None:
    for query in (RESTRICTED, OUTSIDE, "VmPeak TracerPid"):
        text = " ".join(hit["text_chat"] for hit in _hits(live, query, live.outsider))
        assert "Quokka" not in text and "Zanzibar" not in text and "TracerPid" not in text


def test_a_name_that_is_not_utf8_is_indexed_and_served(live: Live) -> None:
    chunk = _chunk_of(live, "public/caf\\xe9-latin1.md", LATIN)
    response = httpx.get(f"{live.url}/v1/chunks/{chunk}/file", headers=live.outsider)
    assert response.status_code == 200 and LATIN.encode() in response.content


def test_active_originals_are_attachments_in_a_sandbox(live: Live) -> None:
    chunk = _chunk_of(live, "public/page.html", "Lunch is served at noon in the atrium")
    response = httpx.get(f"{live.url}/v1/chunks/{chunk}/file", headers=live.outsider)
    assert response.status_code == 200
    assert response.headers["content-disposition"].startswith("attachment;")
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["content-security-policy"].startswith("sandbox")
    text = _chunk_of(live, "public/handbook.md", "library lends books")
    plain = httpx.get(f"{live.url}/v1/chunks/{text}/file", headers=live.outsider)
    assert plain.headers["content-type"].startswith("text/plain")
    assert plain.headers["content-disposition"].startswith("inline;")


def test_an_original_swapped_after_indexing_is_not_served(live: Live, corpus: Corpus) -> None:
    """The indexed file replaced by links (to the server's environment, a restricted file, a
    file outside), by other bytes, and its folder by a link: never served, a 404 or 409."""
    chunk = _chunk_of(live, "public/handbook.md", "library lends books")
    url = f"{live.url}/v1/chunks/{chunk}/file"
    original = corpus.root / "public" / "handbook.md"
    kept = corpus.root.parent / "handbook.kept"
    shutil.copy2(original, kept)
    leaks = (SECRET_VALUE, "Quokka", "Zanzibar")
    try:
        for target in ("/proc/self/environ", corpus.root / "restricted" / "pay.md"):
            original.unlink()
            original.symlink_to(target)
            response = httpx.get(url, headers=live.outsider)
            assert response.status_code in {404, 409}, response.text
            assert not any(leak in response.text for leak in leaks)
        original.unlink()
        original.write_text("# Handbook\n\nRewritten after indexing.\n")
        response = httpx.get(url, headers=live.outsider)
        assert response.status_code == 409 and "changed since it was indexed" in response.text
        original.unlink()
        shutil.move(corpus.root / "public", corpus.root / "public.real")
        (corpus.root / "public").symlink_to(corpus.outside, target_is_directory=True)
        (corpus.outside / "handbook.md").symlink_to(corpus.outside / "vault.md")
        response = httpx.get(url, headers=live.outsider)
        assert response.status_code in {404, 409} and "Zanzibar" not in response.text
    finally:
        if (corpus.root / "public").is_symlink():
            (corpus.root / "public").unlink()
            shutil.move(corpus.root / "public.real", corpus.root / "public")
        original.unlink(missing_ok=True)
        shutil.copy2(kept, original)
    assert httpx.get(url, headers=live.outsider).status_code == 200


def test_the_source_refuses_links_and_paths_out_of_its_folder(corpus: Corpus) -> None:
    """The source itself, as every stage and route reads it."""
    source = LocalFolderSource(corpus.root)
    for rel_path in ("public/to-proc.md", "public/linked-folder/vault.md", "../elsewhere/vault.md"):
        with pytest.raises(SourceError):
            source.read_bytes(rel_path)
