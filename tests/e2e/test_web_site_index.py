"""A web site indexed end to end: crawled, parsed, searchable with its pages' addresses, and
re-crawled without embedding what did not change."""

from __future__ import annotations

import json
from pathlib import Path

from lorehouse.search.retriever import Retriever
from lorehouse.stores.duckdb_store import DuckDBStore
from lorehouse.stores.lance_index import ChunkIndex
from tests.conftest import default_embedder, materialize_everything
from tests.dagster.conftest import metadata_of
from tests.web_site import Site, html, serve


def _site() -> Site:
    site = Site()
    site.page(
        "/handbook/",
        html("Handbook", "Policies of the company.", ["travel.html", "leave.html"]),
    )
    site.page(
        "/handbook/travel.html",
        html("Travel", "Hotels in Toronto are reimbursed up to CAD 240 a night."),
    )
    site.page(
        "/handbook/leave.html",
        html("Parental leave", "Tell your manager eight weeks before parental leave starts."),
    )
    return site


def test_a_site_is_crawled_indexed_and_searched_then_only_its_edit_embedded(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    mapping = tmp_path / "permissions.json"
    mapping.write_text(json.dumps({"anyone": "staff"}))
    with serve(_site()) as site:
        start = f"{site.base_url}/handbook/"
        settings = {"source_permission_map": mapping, "index_partitions": 1}
        assert materialize_everything(start, data_dir, with_evals=False, **settings).success
        retriever = Retriever(ChunkIndex(str(data_dir / "lancedb")), default_embedder())
        hits = retriever.search("hotel limit in Toronto", caller_groups=["staff"]).hits
        assert hits[0].rel_path == "travel.html"
        raw = DuckDBStore(data_dir / "lorehouse.duckdb").table("documents_raw")
        assert sorted(raw["source_uri"]) == [
            f"{start}{p}" for p in ("", "leave.html", "travel.html")
        ]
        assert retriever.search("hotel limit in Toronto", caller_groups=["sales"]).hits == []

        site.page(
            "/handbook/leave.html",
            html("Parental leave", "Tell your manager ten weeks before parental leave starts."),
        )
        again = materialize_everything(start, data_dir, with_evals=False, **settings)
        embedded = metadata_of(again, "chunk_embeddings")
        assert (embedded["embedded"], embedded["documents_embedded"]) == (1, 1)
        hits = retriever.search("weeks notice parental leave", caller_groups=["staff"]).hits
        assert "ten weeks" in hits[0].text_chat
