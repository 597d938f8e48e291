"""One corpus file as Lorehouse reads it: its real type, and the Markdown its parser makes.

Golden-set checks compare excerpts with this Markdown for formats that are not plain text
(PDF, DOCX, PPTX, XLSX), since that is the text Lorehouse chunks and indexes. Parsing runs in
this process, as one pool worker of the parse stage would run it, with the default options.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from pathlib import Path

from lorehouse.inventory import document_id
from lorehouse.models import DocumentFailure, FileType, ParsedDocument, RawDocument
from lorehouse.sniffing import detect_file_type

#: Formats whose raw bytes are text a reader can quote; everything else is checked parsed.
TEXT_FILE_TYPES = frozenset({FileType.MARKDOWN, FileType.TEXT, FileType.HTML})


def raw_document_for(path: Path, rel_path: str, data: bytes | None = None) -> RawDocument:
    """The inventory record of one file, as the raw_documents stage would write it."""
    data = path.read_bytes() if data is None else data
    return RawDocument(
        doc_id=document_id(rel_path),
        source_uri=path.resolve().as_uri(),
        rel_path=rel_path,
        file_type=detect_file_type(data, rel_path),
        size_bytes=len(data),
        content_sha256=hashlib.sha256(data).hexdigest(),
        modified_at=datetime.fromtimestamp(path.stat().st_mtime, tz=UTC),
    )


def parse_file(
    path: Path, rel_path: str, data: bytes | None = None
) -> ParsedDocument | DocumentFailure:
    """Lorehouse's parse of the file at `path` (every failure returned, not raised)."""
    from lorehouse.parsing.runner import parse_document  # loads every parser: import on use

    data = path.read_bytes() if data is None else data
    return parse_document(data, raw_document_for(path, rel_path, data))
