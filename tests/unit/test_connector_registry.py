"""The connector registry: every connected service is one row, its module names the settings
it reads, the orchestrator has a resource holding them, and the docs name its scheme."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from assets.resources import CONNECTOR_RESOURCES
from lorehouse.settings import REPO_ROOT, Settings
from lorehouse.sources.confluence import ConfluenceConnector
from lorehouse.sources.gdrive import GoogleDriveConnector
from lorehouse.sources.registry import (
    CONNECTORS,
    build_connector,
    connector_kind,
    connector_settings,
)
from lorehouse.sources.sharepoint import SharePointConnector
from lorehouse.sources.web import WebSiteConnector
from tests.drive_server import Drive


def test_every_connector_module_defines_what_the_registry_builds_it_with() -> None:
    for kind in CONNECTORS:
        module = importlib.import_module(kind.module)
        assert callable(module.connector_for), kind.key
        assert module.ANYONE_DEFAULT is None or isinstance(module.ANYONE_DEFAULT, str)
        assert set(connector_settings(kind)) <= set(Settings.model_fields), kind.key


def test_each_connector_has_the_orchestrators_resource_for_its_settings() -> None:
    """A data engineer sets a service's credentials on its resource at launch: one resource
    per registered service, holding only settings its connector reads."""
    assert set(CONNECTOR_RESOURCES) == {kind.key for kind in CONNECTORS}
    for kind in CONNECTORS:
        held = set(CONNECTOR_RESOURCES[kind.key].model_fields)
        assert held and held <= set(connector_settings(kind)), kind.key


def test_the_registry_reads_every_scheme_the_docs_name_and_the_docs_name_every_service() -> None:
    docs = (REPO_ROOT / "docs" / "connectors.md").read_text()
    table = docs[: docs.index("Whatever the source")]
    named = re.findall(r"`([a-z+]+://[^`]*)`", table)
    connected = [uri for uri in named if not uri.startswith("s3://")]
    assert connected and all(connector_kind(uri) is not None for uri in connected), connected
    for kind in CONNECTORS:
        assert any(start in table for start in kind.starts), kind.key


@pytest.mark.parametrize(
    ("uri", "expected", "anyone"),
    [
        ("gdrive://1AbC/", GoogleDriveConnector, None),
        ("confluence+https://example.atlassian.net/wiki?spaces=ENG", ConfluenceConnector, None),
        ("sharepoint://drives/b!xyz", SharePointConnector, None),
        ("https://intranet.example.com/handbook/", WebSiteConnector, "public"),
    ],
)
def test_a_uri_is_read_by_its_services_connector_with_the_deployments_settings(
    tmp_path: Path, uri: str, expected: type, anyone: str | None
) -> None:
    settings = Settings(
        data_dir=tmp_path,
        gdrive_service_account_file=Drive().service_account(tmp_path / "key.json"),
        confluence_token="t",
        confluence_email="a@b.c",
        msgraph_tenant_id="tenant",
        msgraph_client_id="client",
        msgraph_client_secret="secret",
    )
    connector, anyone_default = build_connector(uri, lambda name: getattr(settings, name), tmp_path)
    assert isinstance(connector, expected)
    assert anyone_default == anyone


def test_folders_and_buckets_are_no_connected_service() -> None:
    for uri in ("/srv/docs", "s3://bucket/prefix", "file:///srv/docs"):
        assert connector_kind(uri) is None
    with pytest.raises(ValueError, match="no connected service"):
        build_connector("/srv/docs", lambda name: None, Path("/tmp"))
