"""A Google Drive folder indexed end to end, and a sharing change that re-labels a document
without parsing or embedding it again."""

from __future__ import annotations

import json
from pathlib import Path

from lorehouse.search.retriever import Retriever
from lorehouse.sources.gdrive import FOLDER
from lorehouse.stores.lance_index import ChunkIndex
from tests.conftest import default_embedder, materialize_everything
from tests.dagster.conftest import metadata_of
from tests.drive_server import Drive, serve


def test_a_sharing_change_at_the_source_reaches_search_without_embedding(tmp_path: Path) -> None:
    drive = Drive()
    drive.add("handbook", "Handbook", "root", mime=FOLDER)
    drive.add("f-hotels", "hotels.md", "handbook", b"# Hotels\nToronto hotels: CAD 240 a night.")
    drive.add("f-leave", "leave.md", "handbook", b"# Leave\nGive eight weeks of notice.")
    drive.add("f-bands", "bands.md", "handbook", b"# Salary bands\nLevel 5 earns EUR 98,000.")
    for file_id in ("f-hotels", "f-leave"):
        drive.share(file_id, type="domain", domain="example.com")
    drive.share("f-bands", type="group", emailAddress="hr@example.com")
    mapping = tmp_path / "permissions.json"
    mapping.write_text(
        json.dumps({"domains": {"example.com": "staff"}, "groups": {"hr@example.com": "hr"}})
    )
    data_dir = tmp_path / "data"
    with serve(drive):
        settings = {
            "gdrive_service_account_file": drive.service_account(tmp_path / "key.json"),
            "gdrive_api_url": drive.base_url,
            "source_permission_map": mapping,
            "index_partitions": 1,
        }
        first = materialize_everything("gdrive://handbook", data_dir, with_evals=False, **settings)
        assert first.success
        retriever = Retriever(ChunkIndex(str(data_dir / "lancedb")), default_embedder())

        def paths(groups: list[str]) -> set[str]:
            hits = retriever.search("salary band of level 5", caller_groups=groups).hits
            return {hit.rel_path for hit in hits}

        assert "bands.md" in paths(["hr"])
        assert "bands.md" not in paths(["staff"])  # the outsider

        drive.share("f-bands", type="domain", domain="example.com")
        again = materialize_everything("gdrive://handbook", data_dir, with_evals=False, **settings)
        assert again.success
        assert "bands.md" in paths(["staff"])
        inventory = metadata_of(again, "raw_documents")
        assert inventory["changed"] == 0  # the content did not change: nothing re-read
        embedded = metadata_of(again, "chunk_embeddings")
        assert (embedded["embedded"], embedded["documents_embedded"]) == (0, 0)
        chunked = metadata_of(again, "chunks")
        assert (chunked["documents_relabeled"], chunked["documents_chunked"]) == (1, 0)
