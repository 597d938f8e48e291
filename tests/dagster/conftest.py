"""Materializes the asset graph against stores in a temporary folder."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import dagster as dg
import httpx
import pytest
from moto.server import ThreadedMotoServer

from assets import documents, features
from assets.checks import checks_of
from assets.partitioning import all_partitions_tags, with_index_partitions
from assets.resources import build_resources
from lorehouse.settings import Settings


def materialize_all(
    source: Path | str, data_dir: Path, **settings: object
) -> dg.ExecuteInProcessResult:
    """Runs raw_documents, parsed_documents over every partition and their merge into the
    shared store, with the checks, as the index job would."""
    config = Settings(source_uri=str(source), data_dir=data_dir, workers=2, **settings)
    return dg.materialize(
        [
            *with_index_partitions(
                [documents.raw_documents, documents.parsed_documents, features.merged_partitions],
                config.index_partitions,
            ),
            *checks_of([documents]),
        ],
        resources=build_resources(config),
        instance=dg.DagsterInstance.ephemeral(),
        tags=all_partitions_tags(config.index_partitions),
    )


def metadata_of(result: dg.ExecuteInProcessResult, asset: str) -> dict[str, object]:
    """An asset's materialization metadata; a run over several partitions records the same
    metadata once per partition."""
    events = [
        e for e in result.get_asset_materialization_events() if e.asset_key == dg.AssetKey(asset)
    ]
    found = [{k: v.value for k, v in e.materialization.metadata.items()} for e in events]
    assert found and all(metadata == found[0] for metadata in found), found
    return found[0]


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def s3_endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "lorehouse-test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "lorehouse-test-secret")
    endpoint = f"http://127.0.0.1:{port}"
    try:
        yield endpoint
    finally:
        # moto keeps buckets in process-wide state: without a reset the next test's server
        # would start with this test's objects.
        httpx.post(f"{endpoint}/moto-api/reset", timeout=10)
        server.stop()


def s3_bucket(endpoint: str, bucket: str) -> Any:
    """A boto3 client of the local S3 server, with `bucket` created in eu-west-1."""
    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="eu-west-1",
        aws_access_key_id="lorehouse-test",
        aws_secret_access_key="lorehouse-test-secret",
    )
    client.create_bucket(
        Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": "eu-west-1"}
    )
    return client
