"""File types come from content, and legacy encodings decode to the right characters."""

from __future__ import annotations

import io
import zipfile

import pytest

from lorehouse.models import FileType
from lorehouse.sniffing import OLE_MAGIC, decode_text, detect_file_type
from tests.conftest import DOCS_CORPUS


def _zip_with(part: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(part, "<xml/>")
    return buffer.getvalue()


def test_office_type_is_read_from_the_package_not_the_name() -> None:
    assert detect_file_type(_zip_with("word/document.xml"), "report.xlsx") == FileType.DOCX
    assert detect_file_type(_zip_with("xl/workbook.xml"), "data.bin") == FileType.XLSX
    assert detect_file_type(_zip_with("ppt/presentation.xml"), "deck") == FileType.PPTX
    assert detect_file_type(_zip_with("random.txt"), "archive.docx") == FileType.UNKNOWN


def test_pdf_is_detected_whatever_its_name() -> None:
    assert detect_file_type(b"%PDF-1.7\n...", "notes.md") == FileType.PDF


def test_binary_named_markdown_is_unknown() -> None:
    assert detect_file_type(bytes(range(256)) * 8, "readme.md") == FileType.UNKNOWN


def test_html_content_in_a_txt_file_is_html() -> None:
    assert detect_file_type(b"<!DOCTYPE html><html><body>x</body></html>", "a.txt") == (
        FileType.HTML
    )


def test_encrypted_office_container_keeps_its_office_type_for_a_clear_failure() -> None:
    assert detect_file_type(OLE_MAGIC + b"\x00" * 600, "budget.xlsx") == FileType.XLSX
    assert detect_file_type(OLE_MAGIC + b"\x00" * 600, "old.doc") == FileType.UNKNOWN


@pytest.mark.corpus
def test_cp1252_and_latin1_files_decode_to_the_intended_characters() -> None:
    html, encoding = decode_text(
        (DOCS_CORPUS / "html/edge-cases/fake-html-cp1252.html").read_bytes()
    )
    assert encoding == "cp1252"
    assert "Der Preis betrug 15,50 €" in html
    assert "El niño comió paella" in html
    umlauts, _ = decode_text((DOCS_CORPUS / "md/edge-cases/umlauts-non-utf8.md").read_bytes())
    assert "können" in umlauts and "äöüß" in umlauts


def test_cyrillic_legacy_text_is_not_forced_into_a_western_encoding() -> None:
    text = "Привет мир, как дела? Это тестовый текст на русском языке."
    assert decode_text(text.encode("cp1251"))[0] == text
