"""Several sources as one: each under its own name, the first folder of its documents' paths.

A deployment reads its wiki, its drive and its file share into one index:
`LOREHOUSE_SOURCE_URI="wiki=confluence+https://example.atlassian.net/wiki?spaces=ENG
drive=gdrive://FOLDER_ID"`. A document's path is `wiki/ENG/Runbooks.html`, so the sources'
paths never collide, its id follows from that path as any document's does, and a filter or
an access file can name one source's documents by their first folder.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from lorehouse.errors import SourceError
from lorehouse.sources.base import DocumentSource, SourceFile
from lorehouse.sources.connectors import ConnectorSource

log = logging.getLogger(__name__)

#: A named entry: a name of letters, digits, '-' or '_', then '=' and the source's URI.
_NAMED = re.compile(r"^([A-Za-z0-9_-]+)=(\S+)$")


def named_sources(value: str) -> dict[str, str] | None:
    """The named sources of a source setting, or None when it names one source by itself.

    Entries are separated by whitespace. A lone URI (a folder, `s3://...`, a site) is one
    source, even with '=' in its query: a name cannot hold ':' or '/'.
    """
    entries = value.split()
    named = [_NAMED.match(entry) for entry in entries]
    if len(entries) == 1 and named[0] is None:
        return None
    if not all(named):
        bad = next(e for e, m in zip(entries, named, strict=True) if m is None)
        raise SourceError(f"several sources are written as NAME=URI, each apart: {bad!r}")
    found: dict[str, str] = {}
    for match in named:
        assert match is not None
        name, uri = match.groups()
        if name in found:
            raise SourceError(f"two sources are named {name!r}")
        found[name] = uri
    return found


class CompositeSource:
    """Named sources listed one after another, each document's path under its source's name.

    The connected services are synced first, side by side (each waits on its own service),
    and one that cannot be reached keeps what its last good sync listed while the others go
    on: its failure is in its `last_sync`, and its documents stay as they were instead of
    leaving the index. A folder or an S3 prefix that cannot be listed fails the listing, as it
    would alone, so the last inventory stays.
    """

    def __init__(self, sources: Mapping[str, DocumentSource]) -> None:
        self.sources = dict(sources)

    @property
    def uri(self) -> str:
        return " ".join(f"{name}={source.uri}" for name, source in self.sources.items())

    def list_files(self) -> Iterator[SourceFile]:
        connected = {n: s for n, s in self.sources.items() if isinstance(s, ConnectorSource)}
        reachable = self._sync(connected)
        for name, source in self.sources.items():
            if name in reachable:
                files = reachable[name]
            elif name in connected:
                files = connected[name].list_known()
            else:
                files = source.list_files()
            for file in files:
                yield replace(file, rel_path=f"{name}/{file.rel_path}")

    def _sync(self, connected: Mapping[str, ConnectorSource]) -> dict[str, Iterator[SourceFile]]:
        """Syncs the connected sources at once; the listings of those that answered."""
        listings: dict[str, Iterator[SourceFile]] = {}
        if not connected:
            return listings
        with ThreadPoolExecutor(max_workers=len(connected)) as pool:
            futures = {name: pool.submit(source.sync) for name, source in connected.items()}
        for name, future in futures.items():
            try:
                listings[name] = connected[name].listing(future.result())
            except SourceError as error:
                log.warning("source %s is kept as last listed: %s", name, error)
        return listings

    def _split(self, rel_path: str) -> tuple[DocumentSource, str]:
        name, _, inner = rel_path.partition("/")
        source = self.sources.get(name)
        if source is None or not inner:
            raise SourceError(f"{rel_path} is in none of the sources {', '.join(self.sources)}")
        return source, inner

    def read_bytes(self, rel_path: str) -> bytes:
        source, inner = self._split(rel_path)
        return source.read_bytes(inner)

    def file_uri(self, rel_path: str) -> str:
        source, inner = self._split(rel_path)
        return source.file_uri(inner)


def connected_sources(source: DocumentSource) -> dict[str, ConnectorSource]:
    """The connected services `source` reads, by source name; a lone one under its kind."""
    from lorehouse.sources.included import IncludedFiles

    if isinstance(source, IncludedFiles):
        source = source.inner
    if isinstance(source, CompositeSource):
        return {n: s for n, s in source.sources.items() if isinstance(s, ConnectorSource)}
    if isinstance(source, ConnectorSource):
        return {source.connector.kind: source}
    return {}
