"""Formats connected sources hold: e-mail, reStructuredText, RTF, OpenDocument text and EPUB,
each detected from its bytes and read with its headings and tables."""

from __future__ import annotations

from datetime import UTC, datetime
from email.message import EmailMessage
from pathlib import Path

import pypandoc
import pytest
from aspose.email_foss import msg

from lorehouse.errors import ParseError
from lorehouse.models import FailureReason, FileType
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


def _outlook_message(html: str | None) -> bytes:
    """An .msg as Outlook saves one, written by a MAPI writer of its own (not the reader's)."""
    message = msg.MapiMessage.create("New hotel limits", "Toronto: CAD 240.\r\n\r\nBook early.")
    if html is not None:
        message.body_html = html
    message.set_property(msg.PropertyId.SENDER_NAME, "Finance")
    message.set_property(msg.PropertyId.SENDER_EMAIL_ADDRESS, "finance@example.com")
    message.set_property(
        msg.PropertyId.MESSAGE_DELIVERY_TIME, datetime(2026, 3, 2, 9, 30, tzinfo=UTC)
    )
    message.add_recipient("all@example.com", display_name="Everyone")
    message.add_attachment("limits.xlsx", b"PK\x03\x04", mime_type="application/octet-stream")
    return message.to_bytes()


def test_an_outlook_message_reads_like_an_email_with_its_table() -> None:
    html = (
        "<html><body><p>From Monday:</p><table><tr><th>City</th><th>Limit</th></tr>"
        "<tr><td>Toronto</td><td>CAD 240</td></tr></table></body></html>"
    )
    found, markdown, title = _parse(_outlook_message(html), "mail/limits.msg")
    assert (found, title) == (FileType.OUTLOOK, "New hotel limits")
    assert 'From: "Finance" <finance@example.com>' in markdown
    assert "To: all@example.com" in markdown and "Date: Mon, 02 Mar 2026 09:30:00" in markdown
    assert "| Toronto | CAD 240 |" in markdown
    assert "Attachments: limits.xlsx" in markdown
    # Without an HTML body, the text body's paragraphs.
    _, plain, _ = _parse(_outlook_message(None), "mail/limits.msg")
    assert "Toronto: CAD 240.\n\nBook early." in plain


def test_a_damaged_outlook_message_fails_with_its_reason() -> None:
    data = _outlook_message(None)
    damaged = data[:4096] + bytes(len(data) - 4096)  # the directory and streams zeroed
    assert detect_file_type(damaged, "mail/x.msg") == FileType.OUTLOOK
    with pytest.raises(ParseError, match="not an Outlook message") as failure:
        _parse(damaged, "mail/x.msg")
    assert failure.value.reason == FailureReason.CORRUPT
    # Text named .msg is not a message, and no parser is offered it.
    assert detect_file_type(b"just a note", "notes/x.msg") == FileType.UNKNOWN
