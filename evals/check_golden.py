"""Validate a golden set against the corpus it was written from, before any eval runs on it.

Retrieval metrics count a case as a hit only when every evidence excerpt is found in the
retrieved chunks, so an excerpt that was paraphrased, trimmed wrongly or cited from the wrong
file turns into a silent miss that looks like a retrieval failure. This check catches those
mistakes at authoring time: every excerpt must be an exact substring of the text of the file
it names, and the case structure must be what the eval loader and the per-type reports expect.

Which text depends on the file's real format, as Lorehouse's own sniffing detects it
(`lorehouse.sniffing.detect_file_type`, not the extension):

* text files (Markdown, plain text, HTML) are read raw, as UTF-8, Markdown punctuation and
  HTML markup included; an HTML excerpt that is not in the raw file is also accepted when it
  is in the Markdown Lorehouse parses the page into (text split by tags reads as one span);
* every other file (PDF, DOCX, PPTX, XLSX) is parsed with Lorehouse's parser, in this process
  and with default options, and the excerpt must be in the parsed Markdown, which is what gets
  chunked and indexed. An evidence `page` (1-based page, slide or sheet) is then checked too:
  the excerpt must start on that page of the parse's page map.

Run ``python evals/check_golden.py GOLDEN.jsonl --corpus-root CORPUS_DIR``; it prints the
number of cases per type and exits 1, listing every problem, if anything is wrong. Each cited
binary file is parsed once per run (seconds per file).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeGuard, get_args

from evals.golden_set import CaseType
from evals.parsed_files import TEXT_FILE_TYPES, parse_file
from lorehouse.models import DocumentFailure, FileType, ParsedDocument
from lorehouse.sniffing import detect_file_type

#: The case types the eval reports break results down by (one definition, in golden_set).
CASE_TYPES: tuple[str, ...] = get_args(CaseType)

#: Exactly these keys per case: a misspelt key would otherwise be dropped silently by the loader.
CASE_KEYS = frozenset({"id", "question", "evidence", "answer", "type"})
#: Keys a case may add: the question's language (ISO 639-1), for reports by language.
OPTIONAL_CASE_KEYS = frozenset({"language"})
EVIDENCE_KEYS = frozenset({"file", "excerpt"})
#: Keys an evidence item may add: the 1-based page, slide or sheet the excerpt is on.
OPTIONAL_EVIDENCE_KEYS = frozenset({"page"})

#: Shorter excerpts match too many places in a corpus to show that the right passage was found.
MIN_EXCERPT_CHARS = 40


def check_golden(path: Path, corpus_root: Path) -> list[str]:
    """Every problem found in the golden set at `path`, as `file:line: message` strings.

    Collects all problems instead of stopping at the first, so one run gives the author the
    full list to fix. An empty list means the file is valid.
    """
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        return [f"{path}: cannot read: {error}"]
    problems: list[str] = []
    files: dict[str, _CorpusFile | None] = {}
    first_line_of_id: dict[str, int] = {}
    n_cases = 0
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        n_cases += 1
        where = f"{path}:{number}"
        try:
            case = json.loads(line)
        except json.JSONDecodeError as error:
            problems.append(f"{where}: invalid JSON: {error}")
            continue
        if not isinstance(case, dict):
            problems.append(f"{where}: a case must be a JSON object")
            continue
        case_id = case.get("id")
        if isinstance(case_id, str) and case_id:
            where = f"{where} ({case_id})"
            if case_id in first_line_of_id:
                problems.append(
                    f"{where}: duplicate id, first used on line {first_line_of_id[case_id]}"
                )
            else:
                first_line_of_id[case_id] = number
        problems += [f"{where}: {p}" for p in _case_problems(case, corpus_root, files)]
    if n_cases == 0:
        problems.append(f"{path}: no cases")
    return problems


def _case_problems(
    case: dict[str, Any], corpus_root: Path, corpus_files: dict[str, _CorpusFile | None]
) -> list[str]:
    """Problems of one parsed case; `corpus_files` caches corpus files across cases."""
    problems: list[str] = []
    keys = set(case)
    if missing := sorted(CASE_KEYS - keys):
        problems.append(f"missing keys {missing}")
    if extra := sorted(keys - CASE_KEYS - OPTIONAL_CASE_KEYS):
        problems.append(f"unexpected keys {extra}")
    for key in ("id", "question", "answer"):
        if key in case and not _non_blank(case[key]):
            problems.append(f"`{key}` must be a non-empty string")
    case_type = case.get("type")
    if "type" in case and case_type not in CASE_TYPES:
        problems.append(f"`type` {case_type!r} is not one of {list(CASE_TYPES)}")
    evidence = case.get("evidence")
    if "evidence" not in case:
        return problems
    if not isinstance(evidence, list):
        return [*problems, "`evidence` must be a list"]
    if case_type == "unanswerable" and evidence:
        problems.append("an unanswerable case must have no evidence")
    if case_type != "unanswerable" and not evidence:
        problems.append("a case that is not unanswerable needs at least one evidence item")
    files: set[str] = set()
    for index, item in enumerate(evidence):
        item_problems = _evidence_problems(item, corpus_root, corpus_files)
        problems += [f"evidence[{index}]: {p}" for p in item_problems]
        if isinstance(item, dict) and isinstance(item.get("file"), str):
            files.add(item["file"])
    if case_type == "multi_doc" and len(files) < 2:
        problems.append("a multi_doc case needs evidence from at least two different files")
    return problems


def _evidence_problems(
    item: object, corpus_root: Path, corpus_files: dict[str, _CorpusFile | None]
) -> list[str]:
    """Problems of one evidence item: its shape, its file, and the excerpt being verbatim."""
    if not isinstance(item, dict):
        return ["must be an object with `file` and `excerpt`"]
    problems: list[str] = []
    keys = set(item)
    if missing := sorted(EVIDENCE_KEYS - keys):
        problems.append(f"missing keys {missing}")
    if extra := sorted(keys - EVIDENCE_KEYS - OPTIONAL_EVIDENCE_KEYS):
        problems.append(f"unexpected keys {extra}")
    file, excerpt, page = item.get("file"), item.get("excerpt"), item.get("page")
    if "file" in item and not _non_blank(file):
        problems.append("`file` must be a non-empty string")
    if "excerpt" in item and not _non_blank(excerpt):
        problems.append("`excerpt` must be a non-empty string")
    elif isinstance(excerpt, str) and len(excerpt) < MIN_EXCERPT_CHARS:
        problems.append(f"excerpt is {len(excerpt)} characters, fewer than {MIN_EXCERPT_CHARS}")
    if "page" in item and not _is_page(page):
        problems.append(f"`page` must be a positive integer, not {page!r}")
        page = None
    if not _non_blank(file):
        return problems
    if file not in corpus_files:
        corpus_files[file] = _corpus_file(corpus_root, file)
    corpus_file = corpus_files[file]
    if corpus_file is None:
        problems.append(f"file {file!r} is not a readable file under {corpus_root}")
    elif corpus_file.is_text and corpus_file.text is None and not corpus_file.is_html:
        problems.append(f"file {file!r} is not a readable UTF-8 file under {corpus_root}")
    elif _non_blank(excerpt):
        problems += corpus_file.excerpt_problems(excerpt, page)
    return problems


class _CorpusFile:
    """One file under the corpus root, read the way its real format calls for.

    Text files keep their raw UTF-8 text (None if it is not UTF-8); any other file, and an
    HTML file whose raw text lacks an excerpt, is parsed with Lorehouse's parser on first need.
    """

    def __init__(self, path: Path, rel_path: str, data: bytes) -> None:
        self.path, self.rel_path = path, rel_path
        self.file_type: FileType = detect_file_type(data, rel_path)
        self.is_text = self.file_type in TEXT_FILE_TYPES
        self.is_html = self.file_type == FileType.HTML
        self.text: str | None = None
        if self.is_text:
            try:
                # Decoded from bytes rather than read in text mode, so line endings stay as the
                # file has them and "verbatim" means the same characters a parser sees.
                self.text = data.decode("utf-8")
            except UnicodeDecodeError:
                self.text = None
        self._parsed: ParsedDocument | DocumentFailure | None = None

    def parsed(self) -> ParsedDocument | DocumentFailure:
        """Lorehouse's parse of the file, made once."""
        if self._parsed is None:
            self._parsed = parse_file(self.path, self.rel_path)
        return self._parsed

    def excerpt_problems(self, excerpt: str, page: int | None) -> list[str]:
        """Why `excerpt` (on `page`, if given) is not verbatim in this file; empty if it is."""
        if self.is_text and self.text is not None and excerpt in self.text:
            return []
        if self.is_text and not self.is_html:
            return [f"excerpt is not verbatim in {self.rel_path}: {_preview(excerpt)}"]
        parsed = self.parsed()
        if isinstance(parsed, DocumentFailure):
            return [
                f"file {self.rel_path!r} could not be parsed ({parsed.reason}: {parsed.detail})"
            ]
        if excerpt not in parsed.markdown:
            where = "neither raw nor parsed" if self.is_text else "parsed Markdown"
            return [f"excerpt is not verbatim in {self.rel_path} ({where}): {_preview(excerpt)}"]
        if page is None:
            return []
        pages = _pages_of(excerpt, parsed)
        if page in pages:
            return []
        found = ", ".join(str(p) for p in sorted(pages)) or "none"
        return [f"excerpt is not on page {page} of {self.rel_path} (found on page {found})"]


def _corpus_file(corpus_root: Path, file: str) -> _CorpusFile | None:
    """The file named `file` under the corpus root, or None if it is absent, unreadable or
    outside the root (an absolute path or `..` must not make a case pass on another file)."""
    root = corpus_root.resolve()
    path = (root / file).resolve()
    if not (path.is_relative_to(root) and path.is_file()):
        return None
    try:
        data = path.read_bytes()
    except OSError:
        return None
    return _CorpusFile(path, file, data)


def _pages_of(excerpt: str, parsed: ParsedDocument) -> set[int]:
    """The pages (slides, sheets) on which an occurrence of `excerpt` starts."""
    pages: set[int] = set()
    start = parsed.markdown.find(excerpt)
    while start != -1:
        pages.update(span.page for span in parsed.page_map if span.start <= start < span.end)
        start = parsed.markdown.find(excerpt, start + 1)
    return pages


def _is_page(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _non_blank(value: object) -> TypeGuard[str]:
    return isinstance(value, str) and bool(value.strip())


def _preview(excerpt: str, width: int = 70) -> str:
    flat = " ".join(excerpt.split())
    return repr(flat if len(flat) <= width else flat[: width - 1] + "…")


def type_counts(path: Path) -> Counter[str]:
    """Cases per `type` among the lines that parse, for the summary printed before problems."""
    counts: Counter[str] = Counter()
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return counts
    for line in lines:
        if not line.strip():
            continue
        try:
            case = json.loads(line)
        except json.JSONDecodeError:
            counts["<invalid JSON>"] += 1
            continue
        counts[str(case.get("type")) if isinstance(case, dict) else "<not an object>"] += 1
    return counts


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point; returns the process exit status (0 valid, 1 problems found)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("golden", type=Path, help="golden set, one JSON case per line")
    parser.add_argument(
        "--corpus-root",
        type=Path,
        required=True,
        help="folder that the evidence `file` paths are relative to",
    )
    args = parser.parse_args(argv)
    if not args.corpus_root.is_dir():
        print(f"corpus root {args.corpus_root} is not a directory", file=sys.stderr)
        return 1
    problems = check_golden(args.golden, args.corpus_root)
    counts = type_counts(args.golden)
    print(f"{args.golden}: {sum(counts.values())} cases")
    for case_type in [*CASE_TYPES, *sorted(set(counts) - set(CASE_TYPES))]:
        print(f"  {case_type:<15} {counts.get(case_type, 0):>3}")
    if problems:
        print(f"{len(problems)} problem(s):", file=sys.stderr)
        for problem in problems:
            print(f"  {problem}", file=sys.stderr)
        return 1
    print("OK: every excerpt is verbatim in its file")
    return 0


if __name__ == "__main__":
    sys.exit(main())
