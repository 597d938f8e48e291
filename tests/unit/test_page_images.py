"""Page previews drawn by PyMuPDF in a process of their own: under the pixel cap whatever size
a page declares, stopped at their deadline, and pages that are not there told apart from
pages that cannot be drawn."""

from __future__ import annotations

import struct

import pymupdf
import pytest

from lorehouse import page_images
from lorehouse.page_images import MAX_PAGE_PIXELS, PAGE_ZOOM, RenderFailed, render_page

TEXT = "The inspection covers every loading dock door and ramp of the warehouse."


def _pdf(width: float, height: float) -> bytes:
    with pymupdf.open() as document:
        page = document.new_page(width=width, height=height)
        page.insert_text((10, 30), TEXT, fontsize=11)
        return document.tobytes()


def _png_size(png: bytes) -> tuple[int, int]:
    assert png.startswith(b"\x89PNG\r\n\x1a\n"), png[:16]
    width, height = struct.unpack(">II", png[16:24])
    return width, height


def test_an_ordinary_page_keeps_its_scale_and_its_highlights() -> None:
    png, found = render_page(_pdf(612, 792), 1, TEXT)
    assert _png_size(png) == (612 * PAGE_ZOOM, 792 * PAGE_ZOOM)
    assert found == 2  # both six-word phrases of the text


@pytest.mark.parametrize(
    ("width", "height"), [(11_000, 11_000), (100_000, 100_000), (100_000, 200)]
)
def test_a_page_declared_huge_is_drawn_under_the_pixel_cap(width: float, height: float) -> None:
    """Drawn at its declared size, the 11,000-point page took 1.7 GB and the 100,000-point
    one was refused by MuPDF (FzErrorLimit); scaled, each is an ordinary picture."""
    png, found = render_page(_pdf(width, height), 1, TEXT)
    drawn_width, drawn_height = _png_size(png)
    assert drawn_width * drawn_height <= MAX_PAGE_PIXELS
    # Scaled down as a whole, not cut: the proportions are the page's.
    assert drawn_width / drawn_height == pytest.approx(width / height, rel=0.02)
    assert found == 2


def test_a_page_needing_more_memory_than_the_renderer_may_map_is_reported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """MuPDF's failed allocation ends the render, not the process that asked for it."""
    monkeypatch.setattr(page_images, "RENDER_MEMORY_BYTES", 64 * 1024 * 1024)
    with pytest.raises(RenderFailed, match="cannot be rendered"):
        render_page(_pdf(11_000, 11_000), 1, TEXT)


def test_a_render_past_its_deadline_is_stopped_and_reported() -> None:
    with pytest.raises(RenderFailed, match=r"longer than 0\.01 s"):
        render_page(_pdf(612, 792), 1, TEXT, timeout_seconds=0.01)


@pytest.mark.parametrize(
    ("pdf", "page", "message"),
    [(b"%PDF-1.7 not really", 1, "not a readable PDF"), (None, 2, "no page 2")],
)
def test_a_file_that_is_not_a_pdf_or_lacks_the_page_is_a_value_error(
    pdf: bytes | None, page: int, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        render_page(pdf or _pdf(612, 792), page, TEXT)
