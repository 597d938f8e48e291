"""The parser registry: one parser per file type, each with a name and a version.

The version is stored with every parsed document, so changing a parser (or upgrading the
library under it) re-parses exactly the documents that parser produced.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from lorehouse.models import FileType
from lorehouse.parsing.markdown import MarkdownBuilder


@dataclass
class ParseOutput:
    """What a parser hands back: the built Markdown plus what went imperfectly."""

    builder: MarkdownBuilder
    warnings: list[str] = field(default_factory=list)
    title: str | None = None


ParserFunction = Callable[[bytes, str], ParseOutput]


@dataclass(frozen=True)
class Parser:
    """A registered parser: the function and the identity recorded with its output."""

    file_type: FileType
    name: str
    version: str
    function: ParserFunction

    @property
    def qualified_version(self) -> str:
        return f"{self.name}/{self.version}"


_PARSERS: dict[FileType, Parser] = {}


def register_parser(
    file_type: str, name: str, version: str
) -> Callable[[ParserFunction], ParserFunction]:
    """Registers a function as the parser of one file type (last registration wins)."""

    def decorate(function: ParserFunction) -> ParserFunction:
        kind = FileType(file_type)
        _PARSERS[kind] = Parser(file_type=kind, name=name, version=version, function=function)
        return function

    return decorate


def parser_for(file_type: FileType) -> Parser | None:
    """The parser registered for a type, or None when the type is unsupported."""
    _load_builtin_parsers()
    return _PARSERS.get(file_type)


def _load_builtin_parsers() -> None:
    # Imported for their registration side effect; deferred so that importing the registry
    # does not load PyMuPDF, python-docx and friends into processes that never parse.
    from lorehouse.parsing import docx, html, markdown_text, pdf, pptx, xlsx  # noqa: F401
