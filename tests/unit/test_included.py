"""LOREHOUSE_SOURCE_INCLUDE: only the documents a deployment names are listed and read."""

from __future__ import annotations

from pathlib import Path

import pytest

from lorehouse.errors import SourceError
from lorehouse.settings import Settings
from lorehouse.wiring import Lorehouse

FILES = {
    "manual/ch01.de.html": "<html><body><p>Kapitel eins</p></body></html>",
    "manual/ch01.en.html": "<html><body><p>Chapter one</p></body></html>",
    "manual/manual.de.pdf": "%PDF-1.4 the same text again",
    "manual/_static/search.js": "var index = {};",
    "manual/secret.de.html": "<p>Nur für das Team</p>",
    "manual/secret.de.html.meta.json": '{"groups": ["team"]}',
    "_access.json": '{"groups": []}',
}


def _folder(root: Path) -> Path:
    for rel_path, text in FILES.items():
        (root / rel_path).parent.mkdir(parents=True, exist_ok=True)
        (root / rel_path).write_text(text)
    return root


def test_only_matching_documents_and_every_access_file_are_listed_and_read(
    tmp_path: Path,
) -> None:
    root = _folder(tmp_path / "docs")
    source = Lorehouse(
        Settings(source_uri=str(root), source_include="manual/*.de.html")
    ).document_source()
    assert sorted(f.rel_path for f in source.list_files()) == [
        "_access.json",
        "manual/ch01.de.html",
        "manual/secret.de.html",
        "manual/secret.de.html.meta.json",
    ]
    assert source.read_bytes("manual/secret.de.html.meta.json") == b'{"groups": ["team"]}'
    with pytest.raises(SourceError, match="not among the source's included documents"):
        source.read_bytes("manual/manual.de.pdf")


def test_patterns_name_a_named_sources_documents_and_uploads_always_count(
    tmp_path: Path,
) -> None:
    root = _folder(tmp_path / "docs")
    settings = Settings(
        source_uri=f"ref={root} uploads={tmp_path / 'uploads'}",
        source_include="ref/manual/*.pdf",
        upload_folder="uploads",
    )
    upload = tmp_path / "uploads" / "owner" / "0123456789abcdef" / "notes.md"
    upload.parent.mkdir(parents=True)
    upload.write_text("# Notes\n")
    listed = {f.rel_path for f in Lorehouse(settings).document_source().list_files()}
    assert "ref/manual/manual.de.pdf" in listed
    assert "uploads/owner/0123456789abcdef/notes.md" in listed
    assert not {path for path in listed if path.endswith((".html", ".js"))}


def test_no_patterns_is_the_whole_source(tmp_path: Path) -> None:
    root = _folder(tmp_path / "docs")
    listed = list(Lorehouse(Settings(source_uri=str(root))).document_source().list_files())
    assert len(listed) == len(FILES)
