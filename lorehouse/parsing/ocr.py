"""OCR for scanned PDF pages: a text layer from Tesseract plus the table rules redrawn as vectors.

A scan is only pixels, so two things a text PDF gives for free have to be rebuilt before the
ordinary PDF reader can take the page: the words with their positions (Tesseract's searchable
PDF output) and the ruling lines that make a table (found here in the image and
drawn back onto the page as vector lines, so `find_tables()` sees the same grid a reader sees).

Two image clean-ups make Tesseract read tables that it otherwise skips: the ruling lines are
painted out before recognition (its layout analysis takes a ruled grid for a picture), and the
page is binarised with a fixed threshold (a coloured header band otherwise comes out as a dark
block and its text is lost).
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from lorehouse.errors import ParseError
from lorehouse.models import FailureReason

if TYPE_CHECKING:
    import pymupdf

# Darker than this (0-255 grey) counts as ink; light colour fills such as table header bands
# stay paper.
_INK_THRESHOLD = 140
# A ruling line is a run of ink at least this long (inches): longer than any glyph stroke.
_MIN_RULE_INCHES = 0.5
# A scanned rule breaks where the scan is faint; gaps up to this long (inches) are bridged.
_MAX_GAP_INCHES = 0.02
# Rule ends this close (inches) to a crossing rule are snapped onto it, so that the grid closes.
_SNAP_INCHES = 0.04


@dataclass(frozen=True)
class Rule:
    """A ruling line in page points: at height (or x) `at`, running from `start` to `end`."""

    horizontal: bool
    at: float
    start: float
    end: float


def tesseract_command() -> str:
    """The Tesseract executable, or a clear failure telling how to install it."""
    found = shutil.which("tesseract")
    if found is None:
        raise ParseError(
            FailureReason.NO_TEXT_LAYER,
            "OCR is enabled but the tesseract command was not found (install tesseract-ocr)",
        )
    return found


def ocr_page(page: pymupdf.Page, languages: str, dpi: int) -> pymupdf.Document:
    """A one-page PDF holding the page's recognised text and its ruling lines as vectors.

    The returned page has the original page's size, so positions and font sizes compare with
    those of text pages in the same document.
    """
    import pymupdf  # imported where a page is read, as in the PDF parser

    pixmap = page.get_pixmap(dpi=dpi, colorspace=pymupdf.csGRAY, alpha=False)
    grey = np.frombuffer(pixmap.samples, dtype=np.uint8).reshape(pixmap.height, pixmap.stride)
    grey = grey[:, : pixmap.width]
    ink = grey < _INK_THRESHOLD
    min_run = max(8, round(dpi * _MIN_RULE_INCHES))
    gap = max(1, round(dpi * _MAX_GAP_INCHES))
    horizontal_mask = _long_runs(_bridge_gaps(ink, gap), min_run) & ink
    vertical_mask = (_long_runs(_bridge_gaps(ink.T, gap), min_run) & ink.T).T
    rules_mask = _thicken(horizontal_mask | vertical_mask, 2)

    cleaned = np.where(ink & ~rules_mask, 0, 255).astype(np.uint8)
    clean = pymupdf.Pixmap(pymupdf.csGRAY, pixmap.width, pixmap.height, cleaned.tobytes(), 0)
    clean.set_dpi(dpi, dpi)
    page_layer = _tesseract(clean.tobytes("png"), languages, dpi, page_segmentation=3, output="pdf")
    scanned = pymupdf.open("pdf", page_layer)

    result = pymupdf.open()
    target = result.new_page(width=page.rect.width, height=page.rect.height)
    target.show_pdf_page(target.rect, scanned, 0)
    scale = 72.0 / dpi
    rules = _snap(
        _rules(horizontal_mask, horizontal=True, scale=scale)
        + _rules(vertical_mask.T, horizontal=False, scale=scale),
        tolerance=_SNAP_INCHES * 72,
    )
    for rule in rules:
        if rule.horizontal:
            target.draw_line((rule.start, rule.at), (rule.end, rule.at), width=0.5)
        else:
            target.draw_line((rule.at, rule.start), (rule.at, rule.end), width=0.5)
    if rules:
        _read_empty_cells(target, cleaned, languages, dpi)
    return result


def _read_empty_cells(page: pymupdf.Page, cleaned: np.ndarray, languages: str, dpi: int) -> None:
    """Table cells with ink but no recognised text, read one by one as a single text line.

    Page-level layout analysis throws away isolated short marks, which in a table are often
    the values that matter (a lone "5" in a count column).
    """
    import pymupdf

    pixels_per_point = dpi / 72.0
    inset = 3  # pixels kept clear of the cell's rules
    for table in page.find_tables().tables:
        for row in table.rows:
            for cell in row.cells:
                if cell is None or page.get_textbox(pymupdf.Rect(cell)).strip():
                    continue
                x0, y0, x1, y1 = (round(v * pixels_per_point) for v in cell)
                crop = cleaned[y0 + inset : y1 - inset, x0 + inset : x1 - inset]
                rows_with_ink = np.flatnonzero((crop < 128).any(axis=1))
                columns_with_ink = np.flatnonzero((crop < 128).any(axis=0))
                if rows_with_ink.size == 0:
                    continue
                image = pymupdf.Pixmap(
                    pymupdf.csGRAY, crop.shape[1], crop.shape[0], crop.tobytes(), 0
                )
                image.set_dpi(dpi, dpi)
                text = _tesseract(
                    image.tobytes("png"), languages, dpi, page_segmentation=7, output="txt"
                ).decode("utf-8", "replace")
                text = " ".join(text.split())
                if not text:
                    continue
                top = (y0 + inset + rows_with_ink[0]) / pixels_per_point
                bottom = (y0 + inset + rows_with_ink[-1] + 1) / pixels_per_point
                left = (x0 + inset + columns_with_ink[0]) / pixels_per_point
                page.insert_text(
                    (left, bottom), text, fontsize=max(4.0, bottom - top), render_mode=3
                )


def _tesseract(png: bytes, languages: str, dpi: int, page_segmentation: int, output: str) -> bytes:
    """Runs the Tesseract command on one image: a text-only searchable PDF, or plain text.

    The command-line tool is used rather than MuPDF's built-in OCR: on ruled tables the
    built-in one reported phantom words that the tool does not.
    """
    command = [tesseract_command(), "stdin", "stdout", "-l", languages, "--dpi", str(dpi)]
    command += ["--psm", str(page_segmentation), "-c", "textonly_pdf=1", output]
    try:
        finished = subprocess.run(command, input=png, capture_output=True, check=True)
    except subprocess.CalledProcessError as error:
        message = error.stderr.decode("utf-8", "replace").strip().splitlines()
        raise ParseError(
            FailureReason.NO_TEXT_LAYER, "OCR failed: " + (message[-1] if message else "no output")
        ) from error
    return finished.stdout


def _long_runs(ink: np.ndarray, length: int) -> np.ndarray:
    """Pixels that belong to a horizontal run of at least `length` ink pixels.

    A morphological opening with a 1 x length bar, computed with running sums: a window is
    full when all its pixels are ink, and a pixel is kept when any full window covers it.
    """
    rows, width = ink.shape
    if width < length:
        return np.zeros_like(ink)
    running = np.zeros((rows, width + 1), dtype=np.int32)
    np.cumsum(ink, axis=1, out=running[:, 1:])
    full = (running[:, length:] - running[:, :-length]) == length  # window starting at column
    windows = np.zeros((rows, full.shape[1] + 1), dtype=np.int32)
    np.cumsum(full, axis=1, out=windows[:, 1:])
    columns = np.arange(width)
    last = np.minimum(columns + 1, full.shape[1])
    first = np.clip(columns - length + 1, 0, full.shape[1])
    return (windows[:, last] - windows[:, first]) > 0


def _bridge_gaps(ink: np.ndarray, gap: int) -> np.ndarray:
    """Ink plus the short horizontal gaps (up to `gap` pixels) between two inked pixels."""
    rows, width = ink.shape
    running = np.zeros((rows, width + 1), dtype=np.int32)
    np.cumsum(ink, axis=1, out=running[:, 1:])
    columns = np.arange(width)
    before = running[:, columns] - running[:, np.maximum(columns - gap, 0)]
    after = running[:, np.minimum(columns + gap + 1, width)] - running[:, columns + 1]
    return ink | ((before > 0) & (after > 0))


def _thicken(mask: np.ndarray, pixels: int) -> np.ndarray:
    """The mask grown by a few pixels, to catch the anti-aliased edges of a rule."""
    grown = mask.copy()
    for shift in range(1, pixels + 1):
        grown[shift:] |= mask[:-shift]
        grown[:-shift] |= mask[shift:]
        grown[:, shift:] |= mask[:, :-shift]
        grown[:, :-shift] |= mask[:, shift:]
    return grown


def _rules(mask: np.ndarray, horizontal: bool, scale: float) -> list[Rule]:
    """One Rule per band of adjacent rows of the mask (a rule several pixels thick)."""
    rows = np.flatnonzero(mask.any(axis=1))
    if rows.size == 0:
        return []
    rules: list[Rule] = []
    for band in np.split(rows, np.flatnonzero(np.diff(rows) > 1) + 1):
        columns = np.flatnonzero(mask[band].any(axis=0))
        for piece in np.split(columns, np.flatnonzero(np.diff(columns) > 3) + 1):
            rules.append(
                Rule(
                    horizontal=horizontal,
                    at=float(band[0] + band[-1] + 1) / 2 * scale,
                    start=float(piece[0]) * scale,
                    end=float(piece[-1] + 1) * scale,
                )
            )
    return rules


def _snap(rules: list[Rule], tolerance: float) -> list[Rule]:
    """Rule ends moved onto a crossing rule they stop just short of (or just beyond)."""
    snapped: list[Rule] = []
    for rule in rules:
        crossing = [other.at for other in rules if other.horizontal != rule.horizontal]
        start, end = rule.start, rule.end
        for position in crossing:
            if abs(position - start) <= tolerance:
                start = position
            if abs(position - end) <= tolerance:
                end = position
        snapped.append(Rule(rule.horizontal, rule.at, start, end))
    return snapped
