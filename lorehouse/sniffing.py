"""Detects a file's real format from its bytes, and decodes text whatever its encoding.

Extensions lie (a renamed binary, an encrypted workbook saved as .xlsx), and a wrong guess
sends a file to a parser that crashes or, worse, emits garbage that then gets indexed.
"""

from __future__ import annotations

import io
import re
import zipfile
from pathlib import PurePosixPath

from charset_normalizer import from_bytes

from lorehouse.models import FileType

PDF_MAGIC = b"%PDF-"
ZIP_MAGIC = b"PK\x03\x04"
OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_OOXML_MAIN_PART = {
    "word/document.xml": FileType.DOCX,
    "ppt/presentation.xml": FileType.PPTX,
    "xl/workbook.xml": FileType.XLSX,
}
_EXTENSION_TYPES = {
    ".pdf": FileType.PDF,
    ".docx": FileType.DOCX,
    ".pptx": FileType.PPTX,
    ".xlsx": FileType.XLSX,
    ".xlsm": FileType.XLSX,
    ".html": FileType.HTML,
    ".htm": FileType.HTML,
    ".md": FileType.MARKDOWN,
    ".markdown": FileType.MARKDOWN,
    ".txt": FileType.TEXT,
    ".text": FileType.TEXT,
    ".rst": FileType.RST,
    ".eml": FileType.EMAIL,
    ".msg": FileType.OUTLOOK,
    ".rtf": FileType.RTF,
    ".odt": FileType.ODT,
    ".epub": FileType.EPUB,
}
#: The extensions a file may have for a parser to read it.
READABLE_EXTENSIONS = tuple(sorted(_EXTENSION_TYPES))
#: Zip containers that name their type in a first entry called `mimetype` (OpenDocument, EPUB).
_ZIP_MIMETYPES = {
    b"application/vnd.oasis.opendocument.text": FileType.ODT,
    b"application/epub+zip": FileType.EPUB,
}
RTF_MAGIC = b"{\\rtf"
#: Text types whose name is trusted once the bytes are text: nothing in them tells them apart.
_TEXT_TYPES = {FileType.MARKDOWN, FileType.TEXT, FileType.HTML, FileType.RST, FileType.EMAIL}
_OOXML_TYPES = {FileType.DOCX, FileType.PPTX, FileType.XLSX}
_HTML_SIGNATURE = re.compile(rb"<!doctype\s+html|<html[\s>]|<head[\s>]|<body[\s>]", re.IGNORECASE)
_SNIFF_BYTES = 8192


def extension_type(rel_path: str) -> FileType:
    """The type a file's name claims, used only to break ties the content leaves open."""
    return _EXTENSION_TYPES.get(PurePosixPath(rel_path).suffix.lower(), FileType.UNKNOWN)


def detect_file_type(data: bytes, rel_path: str) -> FileType:
    """The format the bytes actually hold.

    An OLE2 container named like an Office Open XML file is reported as that type: it is how
    Office stores a password-protected .docx/.xlsx/.pptx, and the parser reports it as encrypted.
    One named .msg is an Outlook message, which is an OLE2 container too.
    """
    claimed = extension_type(rel_path)
    head = data[:1024]
    if PDF_MAGIC in head:
        return FileType.PDF
    if data.startswith(ZIP_MAGIC):
        return _zip_type(data)
    if data.startswith(OLE_MAGIC):
        return claimed if claimed in _OOXML_TYPES | {FileType.OUTLOOK} else FileType.UNKNOWN
    sample = data[:_SNIFF_BYTES]
    if not sample or not looks_like_text(sample):
        return FileType.UNKNOWN
    if sample.lstrip().startswith(RTF_MAGIC):
        return FileType.RTF
    if _HTML_SIGNATURE.search(sample) and claimed != FileType.EMAIL:
        return FileType.HTML
    if claimed in _TEXT_TYPES:
        return claimed
    return FileType.TEXT if claimed == FileType.UNKNOWN else FileType.UNKNOWN


def _zip_type(data: bytes) -> FileType:
    """An Office Open XML file by its main part, an OpenDocument text or EPUB by its
    `mimetype` entry."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            names = set(archive.namelist())
            mimetype = archive.read("mimetype").strip() if "mimetype" in names else b""
    except (zipfile.BadZipFile, ValueError, OSError, KeyError):
        return FileType.UNKNOWN
    if mimetype in _ZIP_MIMETYPES:
        return _ZIP_MIMETYPES[mimetype]
    for part, file_type in _OOXML_MAIN_PART.items():
        if part in names:
            return file_type
    return FileType.UNKNOWN


def looks_like_text(sample: bytes) -> bool:
    """True when a byte sample is text in some encoding rather than binary data."""
    if b"\x00" in sample:
        # UTF-16 text has NULs too; it announces itself with a byte-order mark.
        return sample.startswith((b"\xff\xfe", b"\xfe\xff"))
    control = sum(1 for byte in sample if byte < 9 or 13 < byte < 32)
    return control <= len(sample) * 0.01


def decode_text(data: bytes) -> tuple[str, str]:
    """The text and the encoding it was read with: UTF-8 first, then the best detected guess.

    cp1252 and latin-1 files are common in old intranets; decoding them as UTF-8 with
    replacement characters would silently corrupt every accented word.
    """
    if data.startswith(b"\xef\xbb\xbf"):
        return data[3:].decode("utf-8", errors="replace"), "utf-8-sig"
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    best = from_bytes(data).best()
    if best is None or _is_latin_single_byte(best.encoding):
        # Detectors cannot tell cp1250 from cp1252 on short Western text (both decode "ä"
        # alike); cp1252 is by far the commonest legacy encoding of office documents, and
        # it is the one that gets "é", "ñ" and "€" right where cp1250 does not.
        try:
            return data.decode("cp1252"), "cp1252"
        except UnicodeDecodeError:
            pass
    if best is not None and best.encoding:
        try:
            return data.decode(best.encoding), best.encoding
        except (UnicodeDecodeError, LookupError):
            pass
    return data.decode("cp1252", errors="replace"), "cp1252"


_LATIN_SINGLE_BYTE = {
    "cp1250", "cp1252", "cp1257", "latin_1", "iso8859_1", "iso8859_2", "iso8859_3",
    "iso8859_4", "iso8859_9", "iso8859_10", "iso8859_13", "iso8859_14", "iso8859_15",
    "iso8859_16", "mac_latin2", "mac_iceland", "mac_roman", "cp850", "cp852", "cp858",
    "cp775", "hp_roman8",
}  # fmt: skip


def _is_latin_single_byte(encoding: str | None) -> bool:
    return (encoding or "").lower() in _LATIN_SINGLE_BYTE
