"""Bytes -> structure-preserving Markdown, one parser per format, run in a process pool."""

from lorehouse.parsing.registry import ParseOutput, Parser, parser_for
from lorehouse.parsing.runner import ParseJob, parse_document, parse_many, parser_version_of

__all__ = [
    "ParseJob",
    "ParseOutput",
    "Parser",
    "parse_document",
    "parse_many",
    "parser_for",
    "parser_version_of",
]
