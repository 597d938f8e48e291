"""Which connector reads a source URI: one row per connected service, from the starts of the
URIs that name it to the module that builds its connector.

A connector is its module and its docs. The module defines `SETTINGS` (the deployment
settings it reads, which the composition root hands over: sources never read the settings
themselves), `ANYONE_DEFAULT` (the group an item shared with "anyone" gets, or None where
that is not the whole company) and `connector_for(uri, options, folder)`. Adding one is a row
here; docs/connectors.md names every scheme, which a test holds against this table.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lorehouse.sources.connectors import Connector


@dataclass(frozen=True)
class ConnectorKind:
    """One connected service."""

    #: Its name in the orchestrator (the resource holding its settings) and in the docs.
    key: str
    #: The starts of the source URIs it reads.
    starts: tuple[str, ...]
    #: The module defining SETTINGS, ANYONE_DEFAULT and connector_for; imported when a
    #: source of its kind is opened, so a deployment pays only for the services it reads.
    module: str

    def reads(self, uri: str) -> bool:
        return uri.startswith(self.starts)


CONNECTORS = (
    ConnectorKind("google_drive", ("gdrive://",), "lorehouse.sources.gdrive"),
    ConnectorKind("confluence", ("confluence+",), "lorehouse.sources.confluence"),
    ConnectorKind("sharepoint", ("sharepoint://",), "lorehouse.sources.sharepoint"),
    ConnectorKind("web_site", ("http://", "https://"), "lorehouse.sources.web"),
)

#: The URI starts of every connected service; any other URI is an S3 prefix or a folder.
CONNECTED_STARTS = tuple(start for kind in CONNECTORS for start in kind.starts)


def connector_kind(uri: str) -> ConnectorKind | None:
    """The connected service `uri` names; None for a folder or an S3 prefix."""
    return next((kind for kind in CONNECTORS if kind.reads(uri)), None)


def connector_settings(kind: ConnectorKind) -> tuple[str, ...]:
    """The names of the deployment settings `kind`'s connector reads."""
    return tuple(importlib.import_module(kind.module).SETTINGS)


def build_connector(
    uri: str, setting: Callable[[str], Any], folder: Path
) -> tuple[Connector, str | None]:
    """The connector reading `uri`, with the value of each setting it names (`setting(name)`),
    keeping what it caches under `folder`; and the group its "anyone" items get."""
    kind = connector_kind(uri)
    if kind is None:
        raise ValueError(f"{uri!r} names no connected service")
    module = importlib.import_module(kind.module)
    options: Mapping[str, Any] = {name: setting(name) for name in module.SETTINGS}
    return module.connector_for(uri, options, folder), module.ANYONE_DEFAULT
