"""Several sources as one: each under its own name, the first folder of its documents' paths.

A deployment reads its wiki, its drive and its file share into one index:
`LOREHOUSE_SOURCE_URI="wiki=confluence+https://example.atlassian.net/wiki?spaces=ENG
drive=gdrive://FOLDER_ID"`. A document's path is `wiki/ENG/Runbooks.html`, so the sources'
paths never collide, its id follows from that path as any document's does, and a filter or
an access file can name one source's documents by their first folder.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import replace

from lorehouse.errors import SourceError
from lorehouse.sources.base import DocumentSource, SourceFile

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
    """Named sources listed one after another, each document's path under its source's name."""

    def __init__(self, sources: Mapping[str, DocumentSource]) -> None:
        self.sources = dict(sources)

    @property
    def uri(self) -> str:
        return " ".join(f"{name}={source.uri}" for name, source in self.sources.items())

    def list_files(self) -> Iterator[SourceFile]:
        for name, source in self.sources.items():
            for file in source.list_files():
                yield replace(file, rel_path=f"{name}/{file.rel_path}")

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
