"""E-mail messages (.eml) and Outlook messages (.msg): the subject as the title, who wrote
to whom and when, then the body, its HTML part read by the HTML parser (tables kept) or else
its text part; attachments are named, not read.

Python's own `email` package reads an .eml's MIME structure (multipart alternatives,
transfer encodings, character sets), which is all a message needs. An .msg is an OLE2
compound file of MAPI properties, read with python-oxmsg: the reader unstructured's
`partition_msg` uses, installed with unstructured. Its parts then take the .eml's layout
rather than unstructured's elements, so that a table in the HTML body stays a table and a
message reads the same whichever client saved it.
"""

from __future__ import annotations

import email
import email.policy
from collections.abc import Sequence
from email.message import EmailMessage
from importlib.metadata import version

from lorehouse.errors import ParseError
from lorehouse.models import FailureReason
from lorehouse.parsing.html import parse_html
from lorehouse.parsing.markdown_builder import MarkdownBuilder
from lorehouse.parsing.registry import ParseOptions, ParseOutput, register_parser

_HEADERS = ("From", "To", "Cc", "Date")


@register_parser(file_type="eml", name="email-stdlib", version="1")
def parse_email(data: bytes, rel_path: str, options: ParseOptions) -> ParseOutput:
    message = email.message_from_bytes(data, policy=email.policy.default)
    if not isinstance(message, EmailMessage) or not message.keys():
        raise ParseError(FailureReason.CORRUPT, "no message headers")
    body = message.get_body(preferencelist=("html", "plain"))
    is_html = body is not None and body.get_content_type() == "text/html"
    content = body.get_content() if body is not None else None
    return _message(
        str(message.get("Subject", "") or ""),
        [(name, str(message[name])) for name in _HEADERS if message.get(name)],
        content if is_html else None,
        None if is_html else content,
        [part.get_filename() or "" for part in message.iter_attachments()],
        rel_path,
        options,
    )


@register_parser(file_type="msg", name="oxmsg", version=f"1+oxmsg{version('python-oxmsg')}")
def parse_outlook_message(data: bytes, rel_path: str, options: ParseOptions) -> ParseOutput:
    from oxmsg import Message

    try:
        message = Message.load(data)
        subject, sender, html, text = (
            message.subject,
            message.sender,
            message.html_body,
            message.body,
        )
        recipients = ", ".join(r.email_address for r in message.recipients if r.email_address)
        sent = message.sent_date
        attachments = [attachment.file_name or "" for attachment in message.attachments]
    except Exception as error:  # oxmsg raises whatever a damaged stream leads it into
        raise ParseError(
            FailureReason.CORRUPT, f"not an Outlook message: {type(error).__name__}: {error}"
        ) from error
    headers = [
        (name, value)
        for name, value in (
            ("From", sender or ""),
            ("To", recipients),
            ("Date", sent.strftime("%a, %d %b %Y %H:%M:%S %z") if sent else ""),
        )
        if value
    ]
    return _message(subject, headers, html, text, attachments, rel_path, options)


def _message(
    subject: str,
    headers: Sequence[tuple[str, str]],
    html: str | None,
    text: str | None,
    attachments: Sequence[str],
    rel_path: str,
    options: ParseOptions,
) -> ParseOutput:
    """A message's Markdown: the subject, the header lines, the body, the attachments' names."""
    title = subject.strip() or None
    builder = MarkdownBuilder()
    if title:
        builder.heading(1, title)
    if headers:
        builder.paragraph("  \n".join(f"{name}: {value}" for name, value in headers))
    warnings: list[str] = []
    if html and html.strip():
        page = parse_html(html.encode("utf-8"), rel_path, options)
        builder.raw(page.builder.build()[0])
        warnings.extend(page.warnings)
    elif text:
        for paragraph in text.replace("\r\n", "\n").split("\n\n"):
            if paragraph.strip():
                builder.paragraph(paragraph.strip())
    if any(attachments):
        builder.paragraph("Attachments: " + ", ".join(a for a in attachments if a))
    if not (html or text) and not title:
        raise ParseError(FailureReason.EMPTY, "the message has neither subject nor body")
    return ParseOutput(builder=builder, warnings=warnings, title=title)
