"""Validate a golden set against the corpus it was written from, before any eval runs on it.

Retrieval metrics count a case as a hit only when every evidence excerpt is found in the
retrieved chunks, so an excerpt that was paraphrased, trimmed wrongly or cited from the wrong
file turns into a silent miss that looks like a retrieval failure. This check catches those
mistakes at authoring time: every excerpt must be an exact substring of the raw text of the
file it names (Markdown punctuation included), and the case structure must be what the eval
loader and the per-type reports expect.

Run ``python evals/check_golden.py GOLDEN.jsonl --corpus-root CORPUS_DIR``; it prints the
number of cases per type and exits 1, listing every problem, if anything is wrong.
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

#: The case types the eval reports break results down by (one definition, in golden_set).
CASE_TYPES: tuple[str, ...] = get_args(CaseType)

#: Exactly these keys per case: a misspelt key would otherwise be dropped silently by the loader.
CASE_KEYS = frozenset({"id", "question", "evidence", "answer", "type"})
EVIDENCE_KEYS = frozenset({"file", "excerpt"})

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
    texts: dict[str, str | None] = {}
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
        problems += [f"{where}: {p}" for p in _case_problems(case, corpus_root, texts)]
    if n_cases == 0:
        problems.append(f"{path}: no cases")
    return problems


def _case_problems(
    case: dict[str, Any], corpus_root: Path, texts: dict[str, str | None]
) -> list[str]:
    """Problems of one parsed case; `texts` caches corpus files across cases."""
    problems: list[str] = []
    keys = set(case)
    if missing := sorted(CASE_KEYS - keys):
        problems.append(f"missing keys {missing}")
    if extra := sorted(keys - CASE_KEYS):
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
        item_problems = _evidence_problems(item, corpus_root, texts)
        problems += [f"evidence[{index}]: {p}" for p in item_problems]
        if isinstance(item, dict) and isinstance(item.get("file"), str):
            files.add(item["file"])
    if case_type == "multi_doc" and len(files) < 2:
        problems.append("a multi_doc case needs evidence from at least two different files")
    return problems


def _evidence_problems(item: object, corpus_root: Path, texts: dict[str, str | None]) -> list[str]:
    """Problems of one evidence item: its shape, its file, and the excerpt being verbatim."""
    if not isinstance(item, dict):
        return ["must be an object with `file` and `excerpt`"]
    problems: list[str] = []
    keys = set(item)
    if missing := sorted(EVIDENCE_KEYS - keys):
        problems.append(f"missing keys {missing}")
    if extra := sorted(keys - EVIDENCE_KEYS):
        problems.append(f"unexpected keys {extra}")
    file, excerpt = item.get("file"), item.get("excerpt")
    if "file" in item and not _non_blank(file):
        problems.append("`file` must be a non-empty string")
    if "excerpt" in item and not _non_blank(excerpt):
        problems.append("`excerpt` must be a non-empty string")
    elif isinstance(excerpt, str) and len(excerpt) < MIN_EXCERPT_CHARS:
        problems.append(f"excerpt is {len(excerpt)} characters, fewer than {MIN_EXCERPT_CHARS}")
    if not _non_blank(file):
        return problems
    text = _corpus_text(corpus_root, file, texts)
    if text is None:
        problems.append(f"file {file!r} is not a readable UTF-8 file under {corpus_root}")
    elif _non_blank(excerpt) and excerpt not in text:
        problems.append(f"excerpt is not verbatim in {file}: {_preview(excerpt)}")
    return problems


def _corpus_text(corpus_root: Path, file: str, texts: dict[str, str | None]) -> str | None:
    """The raw UTF-8 text of `file` under the corpus root, or None if it is absent, not UTF-8 or
    outside the root (an absolute path or `..` must not make a case pass on another file).

    Decoded from bytes rather than read in text mode, so line endings stay as the file has them
    and "verbatim" means the same characters a parser of the file sees."""
    if file not in texts:
        root = corpus_root.resolve()
        path = (root / file).resolve()
        text = None
        if path.is_relative_to(root) and path.is_file():
            try:
                text = path.read_bytes().decode("utf-8")
            except (OSError, UnicodeDecodeError):
                text = None
        texts[file] = text
    return texts[file]


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
