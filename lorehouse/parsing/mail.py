"""E-mail messages (.eml): the subject as the title, who wrote to whom and when, then the
body, its HTML part read by the HTML parser (tables kept) or else its text part.

Python's own `email` package reads the MIME structure (multipart alternatives, transfer
encodings, character sets), which is all a message needs; attachments are named, not read.
"""

from __future__ import annotations

import email
import email.policy
from email.message import EmailMessage

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
    subject = str(message.get("Subject", "") or "").strip() or None
    body = message.get_body(preferencelist=("html", "plain"))
    builder = MarkdownBuilder()
    if subject:
        builder.heading(1, subject)
    header_lines = [f"{name}: {message[name]}" for name in _HEADERS if message.get(name)]
    if header_lines:
        builder.paragraph("  \n".join(header_lines))
    warnings: list[str] = []
    if body is not None and body.get_content_type() == "text/html":
        page = parse_html(body.get_content().encode("utf-8"), rel_path, options)
        builder.raw(page.builder.build()[0])
        warnings.extend(page.warnings)
    elif body is not None:
        for paragraph in body.get_content().split("\n\n"):
            if paragraph.strip():
                builder.paragraph(paragraph.strip())
    attachments = [part.get_filename() for part in message.iter_attachments()]
    if any(attachments):
        builder.paragraph("Attachments: " + ", ".join(a for a in attachments if a))
    if body is None and not subject:
        raise ParseError(FailureReason.EMPTY, "the message has neither subject nor body")
    return ParseOutput(builder=builder, warnings=warnings, title=subject)
