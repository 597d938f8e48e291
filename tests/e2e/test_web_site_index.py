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
        html(
            "Handbook",
            "Policies of the company.",
            ["travel.html", "leave.html", "vpn.html", "../outside/x.html", "about", "about.html"],
        ),
    )
    site.page("/handbook/about", html("About", "The handbook team, without an extension."))
    site.page("/handbook/about.html", html("About", "The handbook team."))
    site.page("/outside/x.html", html("Outside", "Nothing under the handbook."))
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
    internal = Site(robots=None, sitemap=False)
    internal.page("/secret/creds.txt", "VPN root password: hunter2-internal", "text/plain")
    with serve(internal), serve(_site()) as site:
        # A page that answers with a redirect to another server on the machine.
        site.redirects["/handbook/vpn.html"] = f"{internal.base_url}/secret/creds.txt"
        start = f"{site.base_url}/handbook/"
        settings = {"source_permission_map": mapping, "index_partitions": 1}
        assert materialize_everything(start, data_dir, with_evals=False, **settings).success
        retriever = Retriever(ChunkIndex(str(data_dir / "lancedb")), default_embedder())
        hits = retriever.search("hotel limit in Toronto", caller_groups=["staff"]).hits
        assert hits[0].rel_path == "travel.html"
        raw = DuckDBStore(data_dir / "lorehouse.duckdb").table("documents_raw")
        pages = ("", "about", "about.html", "leave.html", "travel.html")
        assert sorted(raw["source_uri"]) == [f"{start}{p}" for p in pages]
        assert internal.requests == []
        for caller in (["staff"], []):
            found = retriever.search("VPN root password", caller_groups=caller).hits
            assert not any("hunter2" in hit.text_chat for hit in found)
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
