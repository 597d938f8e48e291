"""embedding_map: a bounded sample of the chunk vectors drawn by language and by folder."""

from __future__ import annotations

import base64
import re

import dagster as dg

from tests.dagster_daemon import UploadDeployment


def _picture(markdown: str) -> str:
    match = re.fullmatch(r"!\[map\]\(data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)\)", markdown)
    assert match, markdown[:80]
    return base64.b64decode(match.group(1)).decode()


def test_the_map_draws_every_chunk_of_a_small_index_by_language_and_folder(
    upload_deployment: UploadDeployment,
) -> None:
    (record,) = upload_deployment.ticks.instance.fetch_materializations(
        dg.AssetKey("embedding_map"), limit=1
    ).records
    materialization = record.asset_materialization
    assert materialization is not None
    metadata = {key: value.value for key, value in materialization.metadata.items()}
    drawn = metadata["chunks_drawn"]
    assert drawn >= 2
    by_language = _picture(metadata["by_language"])
    assert by_language.count("<circle") == drawn
    # One English and one German document: both languages are told apart and named.
    assert ">en<" in by_language and ">de<" in by_language
    assert "| de |" in metadata["languages"] and "| en |" in metadata["languages"]
    assert ">docs<" in _picture(metadata["by_folder"])
    # No chunk's text is in the picture.
    assert "Hotelkosten" not in by_language and "paid leave" not in by_language
