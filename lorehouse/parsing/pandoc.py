"""reStructuredText, RTF, OpenDocument text and EPUB, converted by pandoc to HTML and read by
Lorehouse's HTML parser.

pandoc reads each of these formats with its structure (headings, lists, tables), and the
HTML parser turns that into the Markdown every later stage reads, tables as tables. The
same route unstructured's partitioners take for these formats (pypandoc, then HTML), minus
the step that flattens a table into one text element. pandoc comes with the `formats` extra
(`pypandoc-binary`, which ships the pandoc program); without it these files are recorded
as unsupported, saying so, and reStructuredText is read as plain text.
"""

from __future__ import annotations

import tempfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from lorehouse.errors import ParseError
from lorehouse.models import FailureReason
from lorehouse.parsing.html import parse_html
from lorehouse.parsing.markdown_and_text import parse_text
from lorehouse.parsing.registry import ParseOptions, ParseOutput, register_parser
from lorehouse.sniffing import decode_text


def _pandoc_version() -> str:
    try:
        return version("pypandoc-binary")
    except PackageNotFoundError:
        return "none"


#: Read once: whether pandoc is installed decides how .rst is read, and the parser version.
_PANDOC = _pandoc_version()
_VERSION = f"1+pandoc{_PANDOC}"


def _to_html(data: bytes, source_format: str, binary: bool) -> str:
    try:
        import pypandoc
    except ImportError as error:
        raise ParseError(
            FailureReason.UNSUPPORTED_TYPE,
            f"{source_format} needs pandoc: install Lorehouse with the 'formats' extra",
        ) from error
    try:
        if binary:  # pandoc reads zip containers from a file, not from standard input
            with tempfile.TemporaryDirectory() as folder:
                path = Path(folder) / f"document.{source_format}"
                path.write_bytes(data)
                return pypandoc.convert_file(str(path), "html", format=source_format)
        text, _ = decode_text(data)
        return pypandoc.convert_text(text, "html", format=source_format)
    except (RuntimeError, OSError) as error:
        raise ParseError(FailureReason.CORRUPT, f"pandoc cannot read it: {error}") from error


def _through_html(data: bytes, rel_path: str, options: ParseOptions, fmt: str) -> ParseOutput:
    html = _to_html(data, fmt, binary=fmt in ("odt", "epub"))
    return parse_html(f"<html><body>{html}</body></html>".encode(), rel_path, options)


@register_parser(file_type="rst", name="pandoc-rst", version=_VERSION)
def parse_rst(data: bytes, rel_path: str, options: ParseOptions) -> ParseOutput:
    """reStructuredText with its headings, lists and tables; as plain text without pandoc."""
    if _PANDOC == "none":
        return parse_text(data, rel_path, options)
    return _through_html(data, rel_path, options, "rst")


@register_parser(file_type="rtf", name="pandoc-rtf", version=_VERSION)
def parse_rtf(data: bytes, rel_path: str, options: ParseOptions) -> ParseOutput:
    return _through_html(data, rel_path, options, "rtf")


@register_parser(file_type="odt", name="pandoc-odt", version=_VERSION)
def parse_odt(data: bytes, rel_path: str, options: ParseOptions) -> ParseOutput:
    return _through_html(data, rel_path, options, "odt")


@register_parser(file_type="epub", name="pandoc-epub", version=_VERSION)
def parse_epub(data: bytes, rel_path: str, options: ParseOptions) -> ParseOutput:
    return _through_html(data, rel_path, options, "epub")
