"""Confluence spaces indexed end to end through the configured source URI, with the token
taken from the environment as the Dagster resource reads it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lorehouse.embedding.minilm import default_embedder
from lorehouse.search.retriever import Retriever
from lorehouse.stores.lance_index import ChunkIndex
from tests.confluence_server import Wiki, serve
from tests.conftest import materialize_everything


def test_a_restricted_page_is_found_only_by_its_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wiki = Wiki(cloud=False)
    wiki.space_groups = {"OPS": ["confluence-users"]}
    wiki.add("1", "OPS", "Incidents", "<p>Page the on-call engineer within 5 minutes.</p>")
    wiki.add("2", "OPS", "Vendors", "<p>Our pager vendor contract renews in March.</p>")
    wiki.restrict("2", groups=["finance"])
    mapping = tmp_path / "permissions.json"
    mapping.write_text(json.dumps({"groups": {"confluence-users": "staff", "finance": "finance"}}))
    monkeypatch.setenv("LOREHOUSE_CONFLUENCE_TOKEN", wiki.token)
    data_dir = tmp_path / "data"
    with serve(wiki):
        uri = f"confluence+{wiki.base_url}/confluence?spaces=OPS"
        settings = {
            "confluence_token": wiki.token,
            "confluence_cloud": False,
            "source_permission_map": mapping,
            "index_partitions": 2,
        }
        assert materialize_everything(uri, data_dir, with_evals=False, **settings).success
    retriever = Retriever(ChunkIndex(str(data_dir / "lancedb")), default_embedder())

    def paths(groups: list[str]) -> set[str]:
        return {
            h.rel_path for h in retriever.search("pager vendor contract", caller_groups=groups).hits
        }

    assert paths(["staff"]) == {"OPS/Incidents.html"}
    assert "OPS/Vendors.html" in paths(["finance"])
