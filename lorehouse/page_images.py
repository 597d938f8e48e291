"""A PDF page as a picture with a chunk's text highlighted: what a reader checks a citation
against, rendered at request time with PyMuPDF (the PDF parser's own library).

A page is drawn at whatever size its file declares, up to 14,400 points a side (PDF's own
limit) and beyond it with a user unit, and MuPDF holds the GIL while it draws. So a page is
rendered in a process of its own, at a scale that keeps its picture under `MAX_PAGE_PIXELS`,
with a deadline and a memory ceiling: one document's page can cost the server neither its
responsiveness nor its memory, only a failed preview.

Run as a script (what `render_page` does), this module reads a request on stdin and writes
the picture on stdout. It imports nothing of Lorehouse and only PyMuPDF's core, so a render
pays no start-up for code that drawing a page does not use.
"""

from __future__ import annotations

import json
import logging
import math
import re
import resource
import subprocess
import sys
from typing import Any

log = logging.getLogger(__name__)

#: Rendering scale: 1.5 is 108 dpi, legible in a side panel without megabyte images.
PAGE_ZOOM = 1.5
#: The most pixels a page's picture may have. A letter or A4 page at `PAGE_ZOOM` has about
#: 1.1 million, so ordinary pages keep their scale; a page declared poster-sized or larger is
#: scaled down to this, since its picture would otherwise cost its area in time and memory
#: (3 bytes a pixel, twice over while it is encoded) for a side panel that shows ~1,000 pixels.
MAX_PAGE_PIXELS = 4_000_000
#: A render still running after this long is stopped: a page whose drawing is this costly
#: (millions of vector paths, an image bomb) gets no preview rather than a core for minutes.
RENDER_TIMEOUT_SECONDS = 10.0
#: Address space the rendering process may map: the interpreter, MuPDF and a capped picture
#: take a small part; the rest is for the document's fonts and images, which a page may
#: decode at their full size. Past it, MuPDF's allocations fail and the render with them.
RENDER_MEMORY_BYTES = 1024 * 1024 * 1024
#: Phrases searched for on the page: long enough to be specific, short enough to survive
#: line breaks and hyphenation, which split longer ones.
_PHRASE_WORDS = 6
_MARKDOWN = re.compile(r"[*_`#>|]+|\[|\]\([^)]*\)")
#: How the rendering process ends when the file has no such page or is not a PDF (the
#: request names something that is not there) and when the page cannot be drawn.
_NOT_A_PAGE_EXIT = 3
_UNRENDERABLE_EXIT = 4
#: What of the rendering process's error output a message repeats or the log keeps.
_MESSAGE_CHARS = 300
_LOGGED_CHARS = 2000


class RenderFailed(RuntimeError):
    """The page exists but cannot be drawn within the bounds (too costly, or MuPDF refuses)."""


class _NotAPage(Exception):
    """In the rendering process: the file is not a PDF, or has no such page."""


def highlight_phrases(chunk_text: str) -> list[str]:
    """The chunk's text as short runs of words, with Markdown marks removed."""
    words = _MARKDOWN.sub(" ", chunk_text).split()
    return [
        " ".join(words[start : start + _PHRASE_WORDS])
        for start in range(0, len(words), _PHRASE_WORDS)
        if len(words[start : start + _PHRASE_WORDS]) >= 3
    ]


def capped_zoom(width: float, height: float, max_pixels: int = MAX_PAGE_PIXELS) -> float:
    """`PAGE_ZOOM`, or less for a page whose picture would have more than `max_pixels` at it."""
    zoom = PAGE_ZOOM
    while (pixels := _pixels(width, height, zoom)) > max_pixels:
        zoom *= min(0.99, math.sqrt(max_pixels / pixels))
    return zoom


def _pixels(width: float, height: float, zoom: float) -> int:
    """The pixels of a page's picture at `zoom`, with the pixel on each side that MuPDF may
    add when it rounds the page's box outwards to whole pixels."""
    return (math.ceil(width * zoom) + 1) * (math.ceil(height * zoom) + 1)


def render_page(
    pdf: bytes,
    page_number: int,
    chunk_text: str,
    timeout_seconds: float = RENDER_TIMEOUT_SECONDS,
) -> tuple[bytes, int]:
    """(PNG of 1-based `page_number`, phrases highlighted on it), drawn in a process of its own.

    ValueError when the file has no such page or is not a PDF; RenderFailed when the page
    cannot be drawn within `timeout_seconds` and `RENDER_MEMORY_BYTES`, or MuPDF refuses it.
    Blocks the calling thread for the render, without holding the GIL.
    """
    request = {
        "page": page_number,
        "text": chunk_text,
        "max_pixels": MAX_PAGE_PIXELS,
        "memory_bytes": RENDER_MEMORY_BYTES,
        # A CPU limit too, which the process enforces on itself: should this one die before
        # its deadline is checked, the render still ends.
        "cpu_seconds": math.ceil(timeout_seconds) + 1,
    }
    # -I: no user site, no PYTHON* variables, not this folder on the path (whose module
    # names would shadow the standard library's).
    command = [sys.executable, "-I", __file__]
    try:
        done = subprocess.run(
            command,
            input=json.dumps(request).encode() + b"\n" + pdf,
            capture_output=True,
            timeout=timeout_seconds,
            check=False,
        )
    except subprocess.TimeoutExpired:
        # subprocess.run has killed the process and reaped it.
        raise RenderFailed(f"the page takes longer than {timeout_seconds:g} s to render") from None
    message = done.stderr.decode("utf-8", "replace").strip()
    if done.returncode == 0:
        header, _, png = done.stdout.partition(b"\n")
        return png, int(json.loads(header)["found"])
    if done.returncode == _NOT_A_PAGE_EXIT:
        raise ValueError(message[:_MESSAGE_CHARS])
    if done.returncode == _UNRENDERABLE_EXIT:
        raise RenderFailed(f"the page cannot be rendered: {message[:_MESSAGE_CHARS]}")
    # Killed by its CPU or memory limit, or an error this module does not expect.
    log.warning("page renderer ended with %s: %s", done.returncode, message[-_LOGGED_CHARS:])
    raise RenderFailed("the page cannot be rendered within the renderer's time and memory")


def _draw(pdf: bytes, page_number: int, chunk_text: str, max_pixels: int) -> tuple[bytes, int]:
    """What the rendering process does: the page with its phrases highlighted, as a PNG."""
    import pymupdf

    try:
        document = pymupdf.open(stream=pdf, filetype="pdf")
    except (pymupdf.FileDataError, RuntimeError) as error:
        raise _NotAPage(f"not a readable PDF: {error}") from error
    with document:
        if not 1 <= page_number <= document.page_count:
            raise _NotAPage(f"the file has no page {page_number}")
        page = document[page_number - 1]
        # One text extraction for every phrase: `search_for` makes its own otherwise.
        text = page.get_textpage()
        found = 0
        for phrase in highlight_phrases(chunk_text):
            quads = page.search_for(phrase, quads=True, textpage=text)
            if quads:
                page.add_highlight_annot(quads)
                found += 1
        zoom = capped_zoom(page.rect.width, page.rect.height, max_pixels)
        picture = page.get_pixmap(matrix=pymupdf.Matrix(zoom, zoom), annots=True)
        return picture.tobytes("png"), found


def _main() -> int:
    """The rendering process: a JSON request line and the PDF on stdin, a JSON line and the
    PNG on stdout; the exit status says which failure it was, stderr what it was."""
    # PyMuPDF imports its layout analysis and pymupdf4llm whenever they are installed: a
    # start-up paid for every page, longer than drawing most pages, for code drawing does
    # not use.
    for optional in ("pymupdf.layout", "pymupdf4llm"):
        sys.modules[optional] = None
    import pymupdf

    header, _, pdf = sys.stdin.buffer.read().partition(b"\n")
    request: dict[str, Any] = json.loads(header)
    memory = int(request["memory_bytes"])
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    cpu = int(request["cpu_seconds"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    try:
        png, found = _draw(pdf, int(request["page"]), request["text"], request["max_pixels"])
    except _NotAPage as error:
        print(error, file=sys.stderr)
        return _NOT_A_PAGE_EXIT
    except MemoryError:
        print("the page needs more memory than the renderer may use", file=sys.stderr)
        return _UNRENDERABLE_EXIT
    except (pymupdf.mupdf.FzErrorBase, RuntimeError, ValueError) as error:
        # MuPDF's refusals (FzErrorLimit for a picture too large, FzErrorMemory past the
        # memory ceiling, a damaged page's syntax errors) and PyMuPDF's own.
        print(f"{type(error).__name__}: {error}", file=sys.stderr)
        return _UNRENDERABLE_EXIT
    sys.stdout.buffer.write(json.dumps({"found": found}).encode() + b"\n" + png)
    return 0


if __name__ == "__main__":
    sys.exit(_main())
