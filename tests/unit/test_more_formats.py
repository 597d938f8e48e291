"""Formats connected sources hold: e-mail, reStructuredText, RTF, OpenDocument text and EPUB,
each detected from its bytes and read with its headings and tables."""

from __future__ import annotations

from email.message import EmailMessage
from pathlib import Path

import pypandoc
import pytest

from lorehouse.models import FileType
from lorehouse.parsing.registry import ParseOptions, parser_for
from lorehouse.sniffing import detect_file_type

MARKDOWN = """# Travel policy

Hotels are reimbursed up to the nightly limit of each city.

| City | Limit |
|---|---|
| Toronto | CAD 240 |
| Berlin | EUR 180 |
"""


def _parse(data: bytes, rel_path: str) -> tuple[FileType, str, str | None]:
    kind = detect_file_type(data, rel_path)
    parser = parser_for(kind)
    assert parser is not None, kind
    output = parser.function(data, rel_path, ParseOptions())
    return kind, output.builder.build()[0], output.title


def _converted(tmp_path: Path, extension: str) -> bytes:
    target = tmp_path / f"travel.{extension}"
    pypandoc.convert_text(MARKDOWN, extension, format="md", outputfile=str(target))
    return target.read_bytes()


@pytest.mark.parametrize(("extension", "kind"), [("odt", FileType.ODT), ("epub", FileType.EPUB)])
def test_opendocument_and_epub_keep_their_headings_and_tables(
    tmp_path: Path, extension: str, kind: FileType
) -> None:
    found, markdown, _ = _parse(_converted(tmp_path, extension), f"policies/travel.{extension}")
    assert found == kind
    assert "Travel policy" in markdown and markdown.count("#") >= 1
    assert "| Toronto | CAD 240 |" in markdown


def test_rtf_and_restructuredtext_are_read_with_their_structure() -> None:
    rtf = rb"{\rtf1\ansi{\b Travel policy}\par Hotels in Toronto: CAD 240 a night.\par}"
    found, markdown, _ = _parse(rtf, "old/travel.doc.rtf")
    assert found == FileType.RTF and "CAD 240 a night" in markdown
    rst = pypandoc.convert_text(MARKDOWN, "rst", format="md").encode()
    found, markdown, _ = _parse(rst, "docs/travel.rst")
    assert found == FileType.RST
    assert markdown.startswith("# Travel policy") and "| Berlin | EUR 180 |" in markdown


def test_an_email_reads_as_subject_senders_and_its_html_body() -> None:
    message = EmailMessage()
    message["Subject"] = "New hotel limits"
    message["From"] = "Finance <finance@example.com>"
    message["To"] = "all@example.com"
    message.set_content("Toronto: CAD 240. Berlin: EUR 180.")
    message.add_alternative(
        "<p>From Monday:</p><table><tr><th>City</th><th>Limit</th></tr>"
        "<tr><td>Toronto</td><td>CAD 240</td></tr></table>",
        subtype="html",
    )
    message.add_attachment(b"%PDF-1.4", maintype="application", subtype="pdf", filename="x.pdf")
    found, markdown, title = _parse(message.as_bytes(), "mail/limits.eml")
    assert (found, title) == (FileType.EMAIL, "New hotel limits")
    assert "From: Finance <finance@example.com>" in markdown
    assert "| Toronto | CAD 240 |" in markdown
    assert "Attachments: x.pdf" in markdown
