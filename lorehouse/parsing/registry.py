"""The parser registry: one parser per file type, each with a name and a version.

The version is stored with every parsed document, so changing a parser (or upgrading the
library under it) re-parses exactly the documents that parser produced.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field

from lorehouse.models import FileType
from lorehouse.parsing.markdown_builder import MarkdownBuilder


@dataclass
class ParseOutput:
    """What a parser hands back: the built Markdown plus what went imperfectly."""

    builder: MarkdownBuilder
    warnings: list[str] = field(default_factory=list)
    title: str | None = None


@dataclass(frozen=True)
class ParseOptions:
    """Choices that change what a parser produces, so they are part of its recorded version."""

    ocr_languages: str | None = None
    ocr_dpi: int = 300

    @property
    def fingerprint(self) -> str:
        """A short tag for the version string; empty when every option is at its default."""
        return f"ocr-{self.ocr_languages}@{self.ocr_dpi}" if self.ocr_languages else ""


ParserFunction = Callable[[bytes, str, ParseOptions], ParseOutput]


@dataclass(frozen=True)
class Parser:
    """A registered parser: the function and the identity recorded with its output."""

    file_type: FileType
    name: str
    version: str
    function: ParserFunction
    reads_options: bool = False
    #: Libraries the function imports when it runs, not when its module is imported: the code
    #: location asks every parser for its version, and a library that takes a second to load
    #: (PyMuPDF) would be loaded by every Dagster process that never parses.
    libraries: tuple[str, ...] = ()

    def qualified_version(self, options: ParseOptions) -> str:
        """Name and version, plus the options this parser honours when they are not defaults."""
        base = f"{self.name}/{self.version}"
        if self.reads_options and options.fingerprint:
            return f"{base}+{options.fingerprint}"
        return base


_PARSERS: dict[FileType, Parser] = {}


def register_parser(
    file_type: str,
    name: str,
    version: str,
    reads_options: bool = False,
    libraries: tuple[str, ...] = (),
) -> Callable[[ParserFunction], ParserFunction]:
    """Registers a function as the parser of one file type (last registration wins).

    `reads_options` marks a parser whose output depends on ParseOptions, so that changing
    them re-parses that parser's documents and no others. `libraries` names what the
    function imports when it runs (`import_parser_libraries`).
    """

    def decorate(function: ParserFunction) -> ParserFunction:
        kind = FileType(file_type)
        _PARSERS[kind] = Parser(
            file_type=kind,
            name=name,
            version=version,
            function=function,
            reads_options=reads_options,
            libraries=libraries,
        )
        return function

    return decorate


def parser_for(file_type: FileType) -> Parser | None:
    """The parser registered for a type, or None when the type is unsupported."""
    load_builtin_parsers()
    return _PARSERS.get(file_type)


def load_builtin_parsers() -> None:
    """Registers the bundled parsers; idempotent, as each module is imported once.

    Deferred to first use so that importing the registry does not load PyMuPDF, python-docx
    and friends into processes that never parse.
    """
    from lorehouse.parsing import (  # noqa: F401
        docx,
        html,
        mail,
        markdown_and_text,
        pandoc,
        pdf,
        pptx,
        xlsx,
    )


def import_parser_libraries() -> None:
    """Imports the libraries the registered parsers load when they run.

    A parse pool calls this before its workers start, so that workers forked from it share
    the libraries instead of each importing them again, and each worker's memory ceiling is
    measured with them already mapped.
    """
    load_builtin_parsers()
    for parser in list(_PARSERS.values()):
        for library in parser.libraries:
            importlib.import_module(library)
