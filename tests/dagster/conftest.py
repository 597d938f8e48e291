"""Materializes the asset graph against stores in a temporary folder."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from assets import documents
from lorehouse.settings import Settings
from pipelines.resources import build_resources


def materialize_all(
    source: Path | str, data_dir: Path, **settings: object
) -> dg.ExecuteInProcessResult:
    """Runs raw_documents and parsed_documents with their checks, as the index job would."""
    resources = build_resources(
        Settings(source_uri=str(source), data_dir=data_dir, workers=2, **settings)
    )
    return dg.materialize(
        [
            documents.raw_documents,
            documents.parsed_documents,
            *dg.load_asset_checks_from_modules([documents]),
        ],
        resources=resources,
        instance=dg.DagsterInstance.ephemeral(),
    )


def metadata_of(result: dg.ExecuteInProcessResult, asset: str) -> dict[str, object]:
    (event,) = [
        e for e in result.get_asset_materialization_events() if e.asset_key == dg.AssetKey(asset)
    ]
    return {k: v.value for k, v in event.materialization.metadata.items()}


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"
