"""A source narrowed to the documents a deployment indexes: `LOREHOUSE_SOURCE_INCLUDE`.

A folder often holds more than its documents: a documentation package ships its HTML beside
style sheets, scripts, a search index and the same text again as a PDF and an EPUB. Include
patterns name what is indexed, so nothing else is listed, hashed or parsed, and a copy of
the same text in another format does not crowd out the one searched for.

Access files (`_access.json`, sidecars) are always listed and read, included or not: they
describe documents, and leaving one out would publish what it restricts.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from fnmatch import fnmatchcase

from lorehouse.errors import SourceError
from lorehouse.sources.base import DocumentSource, SourceFile, is_sidecar


def include_patterns(value: str | None) -> tuple[str, ...]:
    """The patterns of a `source_include` setting: separated by whitespace."""
    return tuple(value.split()) if value else ()


class IncludedFiles:
    """`inner`'s documents whose paths match one of `patterns` (shell-style, case-sensitive,
    `*` matching across folders: `manuals/*.de.html`), with every access file."""

    def __init__(self, inner: DocumentSource, patterns: Sequence[str]) -> None:
        self.inner = inner
        self.patterns = tuple(patterns)

    @property
    def uri(self) -> str:
        return self.inner.uri

    def included(self, rel_path: str) -> bool:
        return is_sidecar(rel_path) or any(fnmatchcase(rel_path, p) for p in self.patterns)

    def list_files(self) -> Iterator[SourceFile]:
        return (file for file in self.inner.list_files() if self.included(file.rel_path))

    def read_bytes(self, rel_path: str) -> bytes:
        if not self.included(rel_path):
            raise SourceError(f"{rel_path} is not among the source's included documents")
        return self.inner.read_bytes(rel_path)

    def file_uri(self, rel_path: str) -> str:
        return self.inner.file_uri(rel_path)
