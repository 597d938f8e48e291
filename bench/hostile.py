"""Hostile files: every one ends parsed or failed with a reason, in bounded time and memory.

Why this exists: a knowledge base is fed whatever lands in a shared folder. A truncated
download, a decompression bomb renamed to .docx, a binary saved as .md or a symlink loop must
cost its own file and nothing else: no crashed run, no worker eating the machine's memory, no
file silently missing from the document list. This script builds such a folder, runs the real
`lorehouse materialize` over it (every asset, in a subprocess, as the nightly job would), and
reports what happened to each file, how long the run took and the peak memory of the run's
process tree.

The hostile set (generated here, nothing downloaded):

* truncated PDFs (a real PDF cut at 1 %, 50 % and 95 %),
* decompression bombs named .docx, .xlsx and .pptx (1 GiB of zeros deflated to ~1 MB, one with
  an honest ZIP header, one whose header lies about the size), a PDF whose page stream
  inflates to 1 GiB, and an XML entity-expansion ("billion laughs") document.xml,
* a file over the size limit, misleading extensions (a PDF named .docx, a DOCX named .pdf,
  HTML named .xlsx, a PNG named .md), 100,000 nested HTML elements, 100,000 nested Markdown
  quotes, a 1.5 MB Markdown line without a space, random bytes named .md, empty files,
* a folder symlink looping to its parent, a file symlink to itself and a dangling one.

Two ordinary documents from the sample corpus ride along; they must come out parsed.

Run from the repository root:

    .venv/bin/python bench/hostile.py [--max-file-mb 2] [--timeout 20] [--memory-mb 1024]
                                      [--json OUT]

Exit status 1 when a file is unaccounted for, the run crashed or a good document failed.
"""

from __future__ import annotations

import argparse
import io
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
from machine import machine_info, write_raw_numbers  # bench/machine.py, beside this script

from lorehouse.stores.duckdb_store import DuckDBStore

REPO_ROOT = Path(__file__).resolve().parent.parent
SAMPLE = REPO_ROOT / "sample_corpus"
LOREHOUSE = Path(sys.executable).parent / "lorehouse"
GIB = 1024 * 1024 * 1024
GOOD_FILES = {
    "good/parental-leave-faq.md": SAMPLE / "hr" / "parental-leave-faq.md",
    "good/travel-and-expenses.docx": SAMPLE / "handbook" / "travel-and-expenses.docx",
}


def _deflated_zeros(size: int) -> tuple[bytes, int]:
    """`size` zero bytes deflated (raw, as inside a ZIP), and their CRC-32."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = bytes(16 * 1024 * 1024)
    parts, crc = [], 0
    for _ in range(size // len(block)):
        parts.append(compressor.compress(block))
        crc = zlib.crc32(block, crc)
    parts.append(compressor.flush())
    return b"".join(parts), crc


def _zip_bomb(
    members: dict[str, bytes], bomb_member: str, lie_about_size: bool, size: int
) -> bytes:
    """An Office-shaped ZIP whose `bomb_member` inflates to `size` zero bytes.

    Written by hand because zipfile cannot store a header whose sizes lie; the lying
    variant claims 1 KiB so that a check of the header's ratio alone would let it through.
    """
    payload, crc = _deflated_zeros(size)
    claimed = 1024 if lie_about_size else size
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    body = buffer.getvalue()
    # Splice the bomb in as one more entry: local header + data, then rebuild the directory.
    with zipfile.ZipFile(io.BytesIO(body)) as archive:
        infos = archive.infolist()
    directory_start = body.find(b"PK\x01\x02")
    entries = body[:directory_start]
    name = bomb_member.encode()
    # Fields both headers share: flags, method (deflate), time, date, CRC, sizes, name length.
    shared = struct.pack("<HHHHIIIH", 0, 8, 0, 0, crc, len(payload), claimed, len(name))
    local = b"PK\x03\x04" + struct.pack("<H", 20) + shared + struct.pack("<H", 0) + name
    bomb_offset = len(entries)
    entries += local + payload
    central = body[directory_start : body.find(b"PK\x05\x06")]
    # ...then extra, comment, disk, attributes (12 bytes of zeros) and the entry's offset.
    central += b"PK\x01\x02" + struct.pack("<HH", 20, 20) + shared + bytes(12)
    central += struct.pack("<I", bomb_offset) + name
    count = len(infos) + 1
    end = (
        b"PK\x05\x06"
        + bytes(4)
        + count.to_bytes(2, "little")
        + count.to_bytes(2, "little")
        + len(central).to_bytes(4, "little")
        + len(entries).to_bytes(4, "little")
        + bytes(2)
    )
    return entries + central + end


_CONTENT_TYPES = b"""<?xml version="1.0" encoding="UTF-8"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">
<Default Extension="xml" ContentType="application/xml"/>
</Types>"""

_BILLION_LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">
<w:body><w:p><w:r><w:t>&lol9;</w:t></w:r></w:p></w:body></w:document>"""


def _billion_laughs_docx() -> bytes:
    """A real DOCX whose document.xml defines entities that expand to 3 GB of text."""
    source = (SAMPLE / "handbook" / "travel-and-expenses.docx").read_bytes()
    buffer = io.BytesIO()
    with (
        zipfile.ZipFile(io.BytesIO(source)) as original,
        zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as patched,
    ):
        for info in original.infolist():
            data = original.read(info.filename)
            if info.filename == "word/document.xml":
                data = _BILLION_LAUGHS
            patched.writestr(info.filename, data)
    return buffer.getvalue()


def _pdf_stream_bomb(size: int) -> bytes:
    """A one-page PDF whose content stream inflates to `size` bytes of spaces."""
    compressor = zlib.compressobj(9)
    block = b" " * (16 * 1024 * 1024)
    stream = b"".join(compressor.compress(block) for _ in range(size // len(block)))
    stream += compressor.flush()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << >> >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


def build_hostile_folder(root: Path, max_file_bytes: int, bomb_bytes: int = GIB) -> dict[str, str]:
    """Writes the hostile set below `root`; returns each document's path and what it is.

    `bomb_bytes` is what each decompression bomb inflates to (a multiple of 16 MiB).
    """
    rng = random.Random(20261122)
    pdf = (SAMPLE / "handbook" / "employee-handbook.pdf").read_bytes()
    docx = (SAMPLE / "handbook" / "travel-and-expenses.docx").read_bytes()
    html = (SAMPLE / "it" / "acceptable-use-policy.html").read_bytes()
    files: dict[str, tuple[str, bytes]] = {
        "truncated/handbook-1pct.pdf": ("PDF cut at 1 %", pdf[: len(pdf) // 100]),
        "truncated/handbook-50pct.pdf": ("PDF cut at 50 %", pdf[: len(pdf) // 2]),
        "truncated/handbook-95pct.pdf": ("PDF cut at 95 %", pdf[: len(pdf) * 95 // 100]),
        "bombs/report.docx": (
            f"ZIP bomb as DOCX inflating to {bomb_bytes >> 20} MiB (honest header)",
            _zip_bomb(
                {"[Content_Types].xml": _CONTENT_TYPES}, "word/document.xml", False, bomb_bytes
            ),
        ),
        "bombs/budget.xlsx": (
            f"ZIP bomb as XLSX inflating to {bomb_bytes >> 20} MiB (header claims 1 KiB)",
            _zip_bomb(
                {"[Content_Types].xml": _CONTENT_TYPES, "xl/workbook.xml": b"<workbook/>"},
                "xl/worksheets/sheet1.xml",
                True,
                bomb_bytes,
            ),
        ),
        "bombs/deck.pptx": (
            f"ZIP bomb as PPTX inflating to {bomb_bytes >> 20} MiB (header claims 1 KiB)",
            _zip_bomb(
                {"[Content_Types].xml": _CONTENT_TYPES, "ppt/presentation.xml": b"<p/>"},
                "ppt/slides/slide1.xml",
                True,
                bomb_bytes,
            ),
        ),
        "bombs/stream.pdf": (
            f"PDF page stream inflating to {bomb_bytes >> 20} MiB",
            _pdf_stream_bomb(bomb_bytes),
        ),
        "bombs/laughs.docx": ("XML entity expansion in document.xml", _billion_laughs_docx()),
        "size/over-limit.md": (
            "Markdown over the size limit",
            b"# Too big\n\n" + b"word " * (max_file_bytes // 5 + 1000),
        ),
        "renamed/actually-pdf.docx": ("a PDF named .docx", pdf),
        "renamed/actually-docx.pdf": ("a DOCX named .pdf", docx),
        "renamed/actually-html.xlsx": ("HTML named .xlsx", html),
        "renamed/picture.md": (
            "a PNG named .md",
            b"\x89PNG\r\n\x1a\n" + bytes(rng.getrandbits(8) for _ in range(4096)),
        ),
        "nested/deep.html": (
            "100,000 nested HTML elements",
            b"<html><body><p>Nesting survivor at the top.</p>"
            + b"<div>" * 100_000
            + b"deep text"
            + b"</div>" * 100_000
            + b"</body></html>",
        ),
        "nested/deep-quotes.md": (
            "100,000 nested Markdown quotes",
            b"# Quotes\n\nA paragraph before the quotes.\n\n" + b">" * 100_000 + b" deep\n",
        ),
        "nested/one-line.md": ("a 1.5 MB line without a space", b"x" * 1_500_000),
        "binary/random.md": ("random bytes named .md", rng.randbytes(64 * 1024)),
        "empty/empty.md": ("an empty .md", b""),
        "empty/empty.pdf": ("an empty .pdf", b""),
    }
    for rel_path, (_, data) in files.items():
        path = root / rel_path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    described = {rel_path: what for rel_path, (what, _) in files.items()}
    links = root / "links"
    links.mkdir()
    (links / "loop").symlink_to("..", target_is_directory=True)
    (links / "self.md").symlink_to("self.md")
    (links / "dangling.md").symlink_to("missing.md")
    described["links/loop"] = "a folder symlink to its parent"
    described["links/self.md"] = "a file symlink to itself"
    described["links/dangling.md"] = "a symlink to a missing file"
    for rel_path, original in GOOD_FILES.items():
        (root / rel_path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(original, root / rel_path)
        described[rel_path] = "an ordinary document"
    return described


@dataclass
class MemoryWatch:
    """Samples the RSS of a process and its descendants until stopped."""

    pid: int
    peak_tree_bytes: int = 0
    peak_process_bytes: int = 0
    #: The largest unique set size (USS) of any descendant: a parse worker's own memory.
    peak_child_bytes: int = 0
    samples: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while not self._stop.is_set():
            try:
                root = psutil.Process(self.pid)
                processes = [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                return
            sizes, unique = [], []
            for process in processes:
                try:
                    sizes.append(process.memory_info().rss)
                    # A forked worker shares its parent's pages until it writes to them; its
                    # unique set is what parsing a file actually cost.
                    unique.append(process.memory_full_info().uss if process is not root else 0)
                except psutil.NoSuchProcess:
                    sizes.append(0)
                    unique.append(0)
            self.peak_tree_bytes = max(self.peak_tree_bytes, sum(sizes))
            self.peak_process_bytes = max(self.peak_process_bytes, max(sizes, default=0))
            self.peak_child_bytes = max(self.peak_child_bytes, max(unique, default=0))
            self.samples += 1
            self._stop.wait(0.05)

    def stop(self) -> None:
        self._stop.set()


def materialize(
    source: Path, data_dir: Path, max_file_bytes: int, timeout: float, memory_mb: int
) -> tuple[int, float, MemoryWatch, str]:
    """Runs every asset over `source` in a subprocess; exit code, seconds, memory, stderr."""
    env = {
        **os.environ,
        "LOREHOUSE_SOURCE_URI": str(source),
        "LOREHOUSE_DATA_DIR": str(data_dir),
        "DAGSTER_HOME": str(data_dir / "dagster_home"),
        "LOREHOUSE_MAX_FILE_BYTES": str(max_file_bytes),
        "LOREHOUSE_PARSE_TIMEOUT_SECONDS": str(timeout),
        "LOREHOUSE_PARSE_MEMORY_MB": str(memory_mb),
        "LOREHOUSE_WORKERS": "2",
    }
    (data_dir / "dagster_home").mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with tempfile.TemporaryFile() as stderr:
        process = subprocess.Popen(
            [str(LOREHOUSE), "materialize"], env=env, stdout=subprocess.DEVNULL, stderr=stderr
        )
        watch = MemoryWatch(process.pid)
        watcher = threading.Thread(target=watch.run, daemon=True)
        watcher.start()
        code = process.wait()
        watch.stop()
        watcher.join()
        stderr.seek(0)
        log = stderr.read().decode(errors="replace")
    return code, time.perf_counter() - started, watch, log


def run(max_file_mb: float, timeout: float, memory_mb: int) -> dict[str, Any]:
    max_file_bytes = int(max_file_mb * 1024 * 1024)
    with tempfile.TemporaryDirectory(prefix="lorehouse-hostile-") as temp:
        source, data_dir = Path(temp) / "source", Path(temp) / "data"
        source.mkdir()
        generated = time.perf_counter()
        described = build_hostile_folder(source, max_file_bytes)
        generated = time.perf_counter() - generated
        code, seconds, watch, log = materialize(
            source, data_dir, max_file_bytes, timeout, memory_mb
        )
        if code != 0:
            print(log[-4000:], file=sys.stderr)
        store = DuckDBStore(data_dir / "lorehouse.duckdb")
        statuses = {s.rel_path: s for s in store.document_statuses()} if code == 0 else {}
        parse_ms = {}
        if code == 0:
            parsed = store.table("documents_parsed").set_index("doc_id")["parse_ms"]
            parse_ms = {
                s.rel_path: parsed[s.doc_id] for s in statuses.values() if s.doc_id in parsed
            }
    files = []
    for rel_path, what in sorted(described.items()):
        status = statuses.get(rel_path)
        files.append(
            {
                "file": rel_path,
                "what": what,
                "status": status.status if status else "missing",
                "reason": status.reason if status else None,
                "detail": (status.detail or "")[:160] if status else None,
                "parse_ms": round(parse_ms[rel_path]) if rel_path in parse_ms else None,
            }
        )
    failed = Counter(f["reason"] for f in files if f["status"] == "failed")
    unaccounted = [f["file"] for f in files if f["status"] not in {"parsed", "failed"}]
    good_failed = [f["file"] for f in files if f["file"] in GOOD_FILES and f["status"] != "parsed"]
    worker_deaths = sum(1 for f in files if "process died" in (f["detail"] or ""))
    return {
        "settings": {
            "max_file_bytes": max_file_bytes,
            "parse_timeout_seconds": timeout,
            "parse_memory_mb": memory_mb,
        },
        "generate_seconds": round(generated, 1),
        "run_seconds": round(seconds, 1),
        "run_exit_code": code,
        "tried": len(files),
        "parsed": sum(1 for f in files if f["status"] == "parsed"),
        "failed": sum(failed.values()),
        "failed_by_reason": dict(sorted(failed.items())),
        "unaccounted": unaccounted,
        "good_files_failed": good_failed,
        "crashes": int(code != 0) + len(unaccounted),
        "parse_worker_deaths": worker_deaths,
        "peak_rss_tree_mb": round(watch.peak_tree_bytes / 2**20),
        "peak_rss_process_mb": round(watch.peak_process_bytes / 2**20),
        "peak_uss_child_mb": round(watch.peak_child_bytes / 2**20),
        "memory_samples": watch.samples,
        "files": files,
    }


def print_report(result: dict[str, Any]) -> None:
    print("| file | what it is | outcome | reason: detail |")
    print("| --- | --- | --- | --- |")
    for f in result["files"]:
        why = f"{f['reason']}: {f['detail']}" if f["reason"] else ""
        print(f"| {f['file']} | {f['what']} | {f['status']} | {why.replace('|', '/')} |")
    reasons = ", ".join(f"{k} {v}" for k, v in result["failed_by_reason"].items())
    print()
    print(
        f"tried {result['tried']}, parsed {result['parsed']}, failed {result['failed']} "
        f"({reasons}), crashes {result['crashes']}, worker deaths "
        f"{result['parse_worker_deaths']}; run {result['run_seconds']} s; peak RSS "
        f"{result['peak_rss_tree_mb']} MB for the run's processes together, "
        f"{result['peak_rss_process_mb']} MB for the largest one, "
        f"{result['peak_uss_child_mb']} MB unique to the largest child process"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-file-mb", type=float, default=2.0)
    parser.add_argument("--timeout", type=float, default=20.0)
    parser.add_argument("--memory-mb", type=int, default=1024)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    result = run(args.max_file_mb, args.timeout, args.memory_mb)
    print_report(result)
    if args.json:
        payload = {"machine": machine_info(["pymupdf", "python-docx", "openpyxl"]), **result}
        write_raw_numbers(args.json, payload)
    ok = result["crashes"] == 0 and not result["good_files_failed"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
