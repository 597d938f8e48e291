"""Bytes -> structure-preserving Markdown, one parser per format, run in a process pool."""

from lorehouse.parsing.registry import ParseOptions, ParseOutput, Parser, parser_for
from lorehouse.parsing.runner import (
    ParseJob,
    ParseLimits,
    parse_document,
    parse_many,
    parser_version_of,
)

__all__ = [
    "ParseJob",
    "ParseLimits",
    "ParseOptions",
    "ParseOutput",
    "Parser",
    "parse_document",
    "parse_many",
    "parser_for",
    "parser_version_of",
]
