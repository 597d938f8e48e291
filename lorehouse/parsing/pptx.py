"""PPTX -> Markdown with python-pptx: one section per slide, its title as the heading.

Shapes are read top to bottom, left to right, as a viewer reads a slide; tables keep their
merged cells, charts become tables of their data, and speaker notes are kept.
"""

from __future__ import annotations

import io
import zipfile
from importlib.metadata import version

from lxml import etree
from pptx import Presentation
from pptx.enum.shapes import MSO_SHAPE_TYPE, PP_PLACEHOLDER
from pptx.exc import PackageNotFoundError
from pptx.shapes.base import BaseShape

from lorehouse.errors import ParseError
from lorehouse.models import FailureReason
from lorehouse.parsing.markdown_builder import MarkdownBuilder, clean_inline
from lorehouse.parsing.office import check_office_package
from lorehouse.parsing.registry import ParseOptions, ParseOutput, register_parser

_BODY_PLACEHOLDERS = {PP_PLACEHOLDER.BODY, PP_PLACEHOLDER.OBJECT, PP_PLACEHOLDER.VERTICAL_BODY}
_TITLE_PLACEHOLDERS = {
    PP_PLACEHOLDER.TITLE,
    PP_PLACEHOLDER.CENTER_TITLE,
    PP_PLACEHOLDER.VERTICAL_TITLE,
}


@register_parser(file_type="pptx", name="python-pptx", version=f"3+pptx{version('python-pptx')}")
def parse_pptx(data: bytes, rel_path: str, options: ParseOptions) -> ParseOutput:
    """Markdown for a slide deck: `# Slide title`, then the slide's text, tables and notes."""
    check_office_package(data, "pptx")
    try:
        presentation = Presentation(io.BytesIO(data))
    except (KeyError, ValueError, PackageNotFoundError, zipfile.BadZipFile) as error:
        raise ParseError(FailureReason.CORRUPT, f"python-pptx cannot open it: {error}") from error
    except etree.XMLSyntaxError as error:
        raise ParseError(FailureReason.CORRUPT, f"malformed slide XML: {error}") from error
    builder = MarkdownBuilder()
    warnings: list[str] = []
    for number, slide in enumerate(presentation.slides, start=1):
        title_shape = slide.shapes.title
        title = clean_inline(title_shape.text_frame.text) if title_shape is not None else ""
        label = title or f"Slide {number}"
        builder.heading(1, label, page=number, label=label)
        shapes = [
            s for s in slide.shapes if title_shape is None or s.shape_id != title_shape.shape_id
        ]
        for shape in _reading_order(shapes):
            try:
                _shape(shape, builder, number, label)
            except (ValueError, KeyError, AttributeError) as error:
                warnings.append(f"slide {number}: shape {shape.name!r} skipped: {error}")
        if slide.has_notes_slide:
            notes = slide.notes_slide.notes_text_frame
            if notes is not None and clean_inline(notes.text):
                builder.paragraph(f"Speaker notes: {notes.text}", page=number, label=label)
    title = clean_inline(presentation.core_properties.title or "") or None
    return ParseOutput(builder=builder, warnings=warnings, title=title)


def _reading_order(shapes: list[BaseShape]) -> list[BaseShape]:
    return sorted(shapes, key=lambda s: ((s.top or 0) // 100_000, s.left or 0))


def _shape(shape: BaseShape, builder: MarkdownBuilder, page: int, label: str) -> None:
    if shape.shape_type == MSO_SHAPE_TYPE.GROUP:
        for child in _reading_order(list(shape.shapes)):
            _shape(child, builder, page, label)
        return
    if getattr(shape, "has_table", False) and shape.has_table:
        builder.table(_table_rows(shape.table), page=page, label=label)
        return
    if getattr(shape, "has_chart", False) and shape.has_chart:
        _chart(shape.chart, builder, page, label)
        return
    if not getattr(shape, "has_text_frame", False) or not shape.has_text_frame:
        return
    placeholder = shape.placeholder_format.type if shape.is_placeholder else None
    if placeholder in _TITLE_PLACEHOLDERS:
        builder.heading(2, shape.text_frame.text, page=page, label=label)
        return
    in_body = placeholder in _BODY_PLACEHOLDERS
    counters: dict[int, int] = {}
    for paragraph in shape.text_frame.paragraphs:
        text = "".join(run.text for run in paragraph.runs) or paragraph.text
        if not clean_inline(text):
            continue
        has_bullet = paragraph._p.find(".//{*}buChar") is not None
        numbered = paragraph._p.find(".//{*}buAutoNum") is not None
        if in_body or has_bullet or numbered or paragraph.level > 0:
            level = paragraph.level
            counters = {k: v for k, v in counters.items() if k <= level}
            counters[level] = counters.get(level, 0) + 1 if numbered else 0
            builder.list_item(
                text,
                depth=level,
                ordered=numbered,
                number=counters[level],
                page=page,
                label=label,
            )
        else:
            counters = {}
            builder.paragraph(text, page=page, label=label)


def _table_rows(table: object) -> list[list[str | None]]:
    """Cell texts with each merged cell's text repeated over the cells it spans."""
    grid = [[cell for cell in row.cells] for row in table.rows]  # type: ignore[attr-defined]
    rows: list[list[str | None]] = [[clean_inline(cell.text) for cell in row] for row in grid]
    for r, row in enumerate(grid):
        for c, cell in enumerate(row):
            if not cell.is_merge_origin:
                continue
            for dr in range(cell.span_height):
                for dc in range(cell.span_width):
                    if r + dr < len(rows) and c + dc < len(rows[r + dr]):
                        rows[r + dr][c + dc] = rows[r][c]
    return rows


def _chart(chart: object, builder: MarkdownBuilder, page: int, label: str) -> None:
    """A chart as the table of numbers behind it, which is what a question about it needs.

    Read from the chart XML rather than python-pptx's plot objects, which refuse 3-D and
    several other chart kinds.
    """
    space = chart._chartSpace  # type: ignore[attr-defined]
    title = " ".join(t.text or "" for t in space.iterfind(".//c:title//a:t", _CHART_NS))
    series = space.findall(".//c:ser", _CHART_NS)
    if not series:
        return
    if clean_inline(title):
        builder.paragraph(f"Chart: {title}", page=page, label=label)
    names = [
        " ".join(v.text or "" for v in ser.iterfind("c:tx//c:v", _CHART_NS)) or f"Series {i + 1}"
        for i, ser in enumerate(series)
    ]
    categories = _points(series[0], "c:cat")
    values = [_points(ser, "c:val") for ser in series]
    count = max([len(categories), *(len(v) for v in values)])
    rows: list[list[str | None]] = [["Category", *names]]
    for index in range(count):
        category = categories.get(index, str(index + 1))
        rows.append([category, *[_number(v.get(index)) for v in values]])
    builder.table(rows, page=page, label=label)


_CHART_NS = {
    "c": "http://schemas.openxmlformats.org/drawingml/2006/chart",
    "a": "http://schemas.openxmlformats.org/drawingml/2006/main",
}


def _points(series: etree._Element, kind: str) -> dict[int, str]:
    points: dict[int, str] = {}
    for point in series.iterfind(f"{kind}//c:pt", _CHART_NS):
        value = point.find("c:v", _CHART_NS)
        if value is not None and value.text is not None:
            points[int(point.get("idx", "0"))] = value.text
    return points


def _number(value: str | None) -> str:
    if value is None:
        return ""
    try:
        return f"{float(value):.10g}"
    except ValueError:
        return value
