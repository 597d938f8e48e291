"""PDF -> Markdown with PyMuPDF: outline-aligned headings, ruled tables, clean page text.

PyMuPDF is used rather than unstructured because unstructured's offline PDF strategy gives no
table structure and its layout strategy needs a model download; PyMuPDF reads text with font
sizes, finds ruled tables, exposes the outline and opens RC4/AES files with an empty password.

Longer than most modules because a PDF has no markup: headings (from the outline and font
sizes), tables, lists and running text are each recovered from the same page layout, and
they share its text blocks.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from dataclasses import dataclass, field
from importlib.metadata import version
from typing import TYPE_CHECKING

from lorehouse.errors import ParseError
from lorehouse.models import FailureReason
from lorehouse.parsing.markdown_builder import MarkdownBuilder, clean_inline
from lorehouse.parsing.ocr import ocr_page
from lorehouse.parsing.registry import ParseOptions, ParseOutput, register_parser
from lorehouse.parsing.tables import column_labels_above

if TYPE_CHECKING:
    import pymupdf

_BULLET = re.compile(r"^\s*([•●▪◦○■□➢►‣⁃∙·\-–*])\s+(?=\S)")
_ORDERED = re.compile(r"^\s*(\d{1,3}|[a-zA-Z]|[ivxIVX]{1,4})[.)]\s+(?=\S)")
_SECTION_NUMBER = re.compile(r"^(\d+(?:\.\d+){0,5})\.?\s+\S")
_PAGE_NUMBER = re.compile(
    r"^(page\s*)?[-–]?\s*\d{1,4}\s*[-–]?(\s*(of|/)\s*\d{1,4})?$|^[ivxlcdm]{1,6}$", re.IGNORECASE
)
_DIGITS = re.compile(r"\d+")
_CONTINUED = re.compile(r"\(?\bcont(inued|\.|'d)", re.IGNORECASE)
_DOT_LEADER = re.compile(r"(?:\s*\.){4,}\s*")
_MARGIN_FRACTION = 0.09
#: A long document's running header or footer repeats on at least this many pages.
_MIN_FURNITURE_PAGES = 10
#: Pages whose lowest line is a number at one offset from their index, for that line to be
#: read as their page number.
_MIN_NUMBERED_PAGES = 4
_MAX_HEADING_CHARS = 160
_LIST_INDENT_POINTS = 14.0
_MAX_FONT_LEVELS = 4
_MONOSPACE_FONTS = ("courier", "mono", "consol", "code")


@dataclass
class _Line:
    text: str
    size: float
    bold: bool
    x0: float
    y0: float
    y1: float
    block: int
    monospace: bool = False
    heading_level: int = 0


@dataclass
class _Table:
    rows: list[list[str | None]]
    y0: float
    #: Column names printed on the line above the grid (a statement's years), if any.
    column_labels: list[str] | None = None


@dataclass
class _Page:
    number: int
    height: float
    lines: list[_Line] = field(default_factory=list)
    tables: list[_Table] = field(default_factory=list)
    has_images: bool = False


def _open(data: bytes) -> pymupdf.Document:
    # Imported where a PDF is read, not with the module: PyMuPDF takes over a second to
    # import, and every process that loads the code location reads this parser's version
    # without ever opening a PDF. A parse pool imports it before its workers fork
    # (`Parser.libraries`).
    import pymupdf

    try:
        document = pymupdf.open(stream=data, filetype="pdf")
    except (RuntimeError, ValueError) as error:
        raise ParseError(FailureReason.CORRUPT, f"PyMuPDF cannot open the file: {error}") from error
    if document.needs_pass and not document.authenticate(""):
        raise ParseError(
            FailureReason.ENCRYPTED, "the PDF needs a user password (an empty one was refused)"
        )
    if document.page_count == 0:
        raise ParseError(FailureReason.EMPTY, "the PDF has no pages")
    return document


@register_parser(
    file_type="pdf",
    name="pymupdf",
    version=f"7+pymupdf{version('pymupdf')}",
    reads_options=True,
    libraries=("pymupdf",),
)
def parse_pdf(data: bytes, rel_path: str, options: ParseOptions) -> ParseOutput:
    """Markdown for a PDF; scanned pages are OCR'd only when OCR languages are configured.

    Without OCR a scan is reported as `no_text_layer` rather than silently indexed as empty.
    """
    document = _open(data)
    warnings: list[str] = []
    pages: list[_Page] = []
    for index in range(document.page_count):
        try:
            page = _read_page(document[index], index + 1)
            if options.ocr_languages and page.has_images and not (page.lines or page.tables):
                page = _read_scanned_page(
                    document[index], index + 1, options.ocr_languages, options.ocr_dpi
                )
                warnings.append(f"page {index + 1} read by OCR ({options.ocr_languages})")
            pages.append(page)
        except (RuntimeError, ValueError) as error:
            warnings.append(f"page {index + 1} skipped: {error}")
    if not pages:
        raise ParseError(FailureReason.CORRUPT, "no page could be read: " + "; ".join(warnings))
    if not any(page.lines or page.tables for page in pages):
        if any(page.has_images for page in pages):
            raise ParseError(
                FailureReason.NO_TEXT_LAYER,
                f"{len(pages)} page(s) of images and no text layer; OCR is needed",
            )
        raise ParseError(FailureReason.EMPTY, "the PDF has no text")
    image_only = [p.number for p in pages if p.has_images and not (p.lines or p.tables)]
    if image_only:
        warnings.append(f"pages without a text layer: {_page_list(image_only)}")
    _drop_running_headers_and_footers(pages)
    _drop_page_numbers_after_the_text(pages)
    outline = document.get_toc(simple=True)
    from_outline = _assign_outline_levels(pages, outline)
    if not from_outline:
        _assign_font_levels(pages)
    builder = MarkdownBuilder()
    _emit(pages, builder, numbered_levels=not from_outline)
    title = clean_inline(document.metadata.get("title") or "") or None
    return ParseOutput(builder=builder, warnings=warnings, title=title)


def _read_scanned_page(page: pymupdf.Page, number: int, languages: str, dpi: int) -> _Page:
    """A scanned page read like a text page, from its OCR text layer and redrawn rules."""
    with ocr_page(page, languages, dpi) as recognised:
        result = _read_page(recognised[0], number)
    result.has_images = True
    # OCR font sizes follow each word's ink height, not the typesetting, so they would invent
    # headings; a scanned page's lines are all read as body text instead.
    if result.lines:
        body_size = statistics.median(line.size for line in result.lines)
        for line in result.lines:
            line.size = body_size
            line.bold = False
    return result


def _page_list(numbers: list[int]) -> str:
    shown = ", ".join(str(n) for n in numbers[:20])
    return shown + (f" and {len(numbers) - 20} more" if len(numbers) > 20 else "")


def _read_page(page: pymupdf.Page, number: int) -> _Page:
    import pymupdf

    text_flags = (
        pymupdf.TEXT_PRESERVE_LIGATURES
        | pymupdf.TEXT_PRESERVE_WHITESPACE
        | pymupdf.TEXT_DEHYPHENATE
        | pymupdf.TEXT_MEDIABOX_CLIP
    )
    result = _Page(number=number, height=page.rect.height or 1.0)
    result.has_images = bool(page.get_images(full=False))
    table_boxes: list[pymupdf.Rect] = []
    if _has_ruling(page):
        words = page.get_text("words", flags=text_flags, sort=False)
        for table in page.find_tables().tables:
            rows = _table_rows(table, words)
            if len(rows) < 2 or len(rows[0]) < 2:
                continue
            box = pymupdf.Rect(table.bbox)
            header = list(table.header.names)
            # An "external" header equal to the first row is that row seen twice (OCR'd words
            # can reach a little above the table's top rule).
            if table.header.external and header != rows[0]:
                rows.insert(0, header)
                box |= pymupdf.Rect(table.header.bbox)
            table_boxes.append(box)
            result.tables.append(_Table(rows=rows, y0=box.y0))
    content = page.get_text("dict", flags=text_flags, sort=False)
    for block in content["blocks"]:
        if block.get("type") != 0:
            continue
        for line in block["lines"]:
            parsed = _line(line, block["number"])
            if parsed is None:
                continue
            middle = pymupdf.Point((line["bbox"][0] + line["bbox"][2]) / 2, parsed.y0 + 1)
            if any(middle in box for box in table_boxes):
                continue
            if (
                result.lines
                and _is_lone_marker(result.lines[-1])
                and _beside(result.lines[-1], parsed)
            ):
                marker = result.lines.pop()
                parsed.text = f"{marker.text.strip()} {parsed.text.strip()}"
                parsed.x0 = marker.x0
            result.lines.append(parsed)
    return result


def _is_lone_marker(line: _Line) -> bool:
    """A bullet or list number set as its own text line, apart from the item it marks."""
    text = line.text.strip()
    return bool(_BULLET.match(text + " x") or _ORDERED.match(text + " x")) and len(text) <= 4


def _beside(marker: _Line, line: _Line) -> bool:
    return abs(marker.y0 - line.y0) < 3 and line.x0 >= marker.x0


def _has_ruling(page: pymupdf.Page) -> bool:
    """Only pages with vector lines can hold a ruled table; skipping the rest saves most time."""
    return len(page.get_drawings()) >= 2


def _line(line: dict, block_number: int) -> _Line | None:
    import pymupdf

    spans = [span for span in line["spans"] if span["text"].strip()]
    if not spans:
        return None
    text = "".join(span["text"] for span in line["spans"])
    if not clean_inline(text):
        return None
    weights = Counter[float]()
    for span in spans:
        weights[round(span["size"] * 2) / 2] += len(span["text"].strip())
    size = weights.most_common(1)[0][0]
    bold = all(span["flags"] & pymupdf.TEXT_FONT_BOLD or "Bold" in span["font"] for span in spans)
    monospace = all(
        any(marker in span["font"].lower() for marker in _MONOSPACE_FONTS) for span in spans
    )
    x0, y0, _, y1 = line["bbox"]
    return _Line(
        text=text,
        size=size,
        bold=bold,
        x0=x0,
        y0=y0,
        y1=y1,
        block=block_number,
        monospace=monospace,
    )


def _cell_text(box: tuple[float, float, float, float], words: list[tuple]) -> str:
    """The words whose centre lies in a cell, in reading order.

    Built from the page's words rather than PyMuPDF's own cell extraction, which on some files
    glues words together and moves thousands separators ("2,100" came out as "2100 ,").
    """
    inside = _words_in(box, words)
    inside.sort(key=lambda w: (w[5], w[6], w[7]))
    return " ".join(w[4] for w in inside)


def _words_in(box: tuple[float, float, float, float], words: list[tuple]) -> list[tuple]:
    """The words whose centre lies in the box (a word straddling a rule belongs to one cell)."""
    x0, y0, x1, y1 = box
    return [w for w in words if x0 <= (w[0] + w[2]) / 2 <= x1 and y0 <= (w[1] + w[3]) / 2 <= y1]


def _table_rows(table: pymupdf.table.Table, words: list[tuple]) -> list[list[str | None]]:
    """Cell texts with every merged cell repeated into each grid position it covers.

    PyMuPDF reports a covered position as None; whether it is covered from the left (a column
    span) or from above (a row span) is read from where the spanning cell's box ends.
    """
    boxes = [list(row.cells) for row in table.rows]
    rows: list[list[str | None]] = [
        [_cell_text(box, words) if box else None for box in row] for row in boxes
    ]
    width = max((len(row) for row in rows), default=0)
    column_left = [
        min((row[c][0] for row in boxes if c < len(row) and row[c]), default=0.0)
        for c in range(width)
    ]
    for r, row in enumerate(rows):
        row_top = min((box[1] for box in boxes[r] if box), default=0.0)
        for c in range(len(row)):
            if row[c] is not None:
                continue
            left = next((k for k in range(c - 1, -1, -1) if boxes[r][k]), None)
            if left is not None and boxes[r][left][2] > column_left[c] + 1:
                row[c] = row[left]
                continue
            above = next((k for k in range(r - 1, -1, -1) if boxes[k][c]), None)
            if above is not None and boxes[above][c][3] > row_top + 1:
                row[c] = rows[above][c]
            else:
                row[c] = ""
    return _split_stacked_rows(rows, boxes, words)


def _split_stacked_rows(
    rows: list[list[str | None]], boxes: list[list], words: list[tuple]
) -> list[list[str | None]]:
    """Rows the table's rules do not separate, split back into one Markdown row each.

    Tables often rule only every few rows ("Base 128 / Base 256 / Base 512" in one ruled band).
    When every filled cell of a band holds the same number of text lines, and those lines sit
    at the same heights across the cells, each line is its own row. A wrapped cell does not
    qualify: its neighbours hold fewer lines.
    """
    result: list[list[str | None]] = []
    for row, row_boxes in zip(rows, boxes, strict=True):
        if not all(row_boxes):
            result.append(row)
            continue
        cells = [_cell_lines(box, words) for box in row_boxes]
        filled = [lines for lines in cells if lines]
        heights = {len(lines) for lines in filled}
        if len(filled) < 2 or len(heights) != 1 or heights == {1} or not _aligned(filled):
            result.append(row)
            continue
        for index in range(heights.pop()):
            result.append([lines[index][2] if lines else "" for lines in cells])
    return result


def _cell_lines(box: tuple[float, float, float, float], words: list[tuple]) -> list[tuple]:
    """The text lines of a cell as (centre height, line height, text), top to bottom."""
    inside = _words_in(box, words)
    inside.sort(key=lambda w: ((w[1] + w[3]) / 2, w[0]))
    lines: list[list[tuple]] = []
    for word in inside:
        middle = (word[1] + word[3]) / 2
        if lines and abs(middle - _middle(lines[-1])) < (word[3] - word[1]) / 2:
            lines[-1].append(word)
        else:
            lines.append([word])
    return [
        (_middle(line), max(w[3] - w[1] for w in line), " ".join(w[4] for w in sorted(line)))
        for line in lines
    ]


def _middle(words: list[tuple]) -> float:
    return sum((w[1] + w[3]) / 2 for w in words) / len(words)


def _aligned(cells: list[list[tuple]]) -> bool:
    """Whether the i-th lines of all cells share a baseline band (within half a line)."""
    for index in range(len(cells[0])):
        middles = [lines[index][0] for lines in cells]
        height = min(lines[index][1] for lines in cells)
        if max(middles) - min(middles) > height / 2:
            return False
    return True


def _margin_key(text: str) -> str:
    return _DIGITS.sub("#", clean_inline(text).lower())


def _drop_running_headers_and_footers(pages: list[_Page]) -> None:
    """Remove page furniture: lines in the top or bottom margin that repeat across pages.

    Digits are folded before comparing so "Page 3 of 9" and "Page 4 of 9" count as one line; a
    bare page number in a margin is dropped even when nothing else repeats.
    """
    in_margin: dict[int, list[_Line]] = {}
    counts = Counter[str]()
    for page in pages:
        margin = page.height * _MARGIN_FRACTION
        lines = [ln for ln in page.lines if ln.y1 <= margin or ln.y0 >= page.height - margin]
        in_margin[page.number] = lines
        counts.update({_margin_key(ln.text) for ln in lines})
    # Half the pages of a short document; in a long one, a tenth and at least ten: a 10-K's
    # "Table of Contents" link tops 131 of its 503 pages, the exhibits after it have none.
    threshold = max(2, min(len(pages) // 2, max(_MIN_FURNITURE_PAGES, len(pages) // 10)))
    for page in pages:
        furniture = {
            id(ln)
            for ln in in_margin[page.number]
            if counts[_margin_key(ln.text)] >= threshold
            or _PAGE_NUMBER.match(clean_inline(ln.text))
        }
        page.lines = [ln for ln in page.lines if id(ln) not in furniture]


def _drop_page_numbers_after_the_text(pages: list[_Page]) -> None:
    """Remove page numbers printed right below a page's text rather than in its margin.

    A short page of a filing ends with its number mid-page ("60" under a statement), where
    the margin rule does not look. A page's lowest line is its number when it is a bare
    integer at the same offset from the page's index as on at least three other pages.
    """
    lowest: dict[int, tuple[_Line, int]] = {}
    for page in pages:
        if page.lines:
            line = max(page.lines, key=lambda ln: ln.y1)
            text = clean_inline(line.text)
            if text.isdigit() and len(text) <= 4:
                lowest[page.number] = (line, int(text) - page.number)
    offsets = Counter(offset for _, offset in lowest.values())
    for page in pages:
        if page.number in lowest:
            line, offset = lowest[page.number]
            if offsets[offset] >= _MIN_NUMBERED_PAGES:
                page.lines.remove(line)


def _normalized(text: str) -> str:
    return re.sub(r"[^0-9a-z]+", "", text.lower())


def _assign_outline_levels(pages: list[_Page], outline: list[list]) -> bool:
    """Mark the lines that print each outline entry as headings of that entry's level.

    Returns False when the outline is missing or does not match the printed text well enough
    to trust (some outlines point at the wrong page or name sections differently).
    """
    entries = [(int(level), str(title), int(page)) for level, title, page, *_ in outline]
    if len(entries) < 2:
        return False
    by_number = {page.number: page for page in pages}
    matched = 0
    for level, title, page_number in entries:
        wanted = _normalized(title)
        if not wanted:
            continue
        for candidate in (page_number, page_number + 1, page_number - 1):
            page = by_number.get(candidate)
            if page is not None and _mark_title(page, wanted, min(level, 6)):
                matched += 1
                break
    return matched >= max(2, len(entries) // 2)


def _mark_title(page: _Page, wanted: str, level: int) -> bool:
    lines = page.lines
    for start, line in enumerate(lines):
        if line.heading_level:
            continue
        joined = ""
        for end in range(start, min(start + 3, len(lines))):
            joined += _normalized(lines[end].text)
            if joined == wanted or (len(joined) >= 12 and joined.startswith(wanted)):
                for marked in lines[start : end + 1]:
                    marked.heading_level = level
                return True
            if not wanted.startswith(joined):
                break
    return False


def _assign_font_levels(pages: list[_Page]) -> None:
    """Headings by font size when there is no usable outline.

    Sizes clearly larger than the body size rank as levels 1, 2, 3...; a numbered heading
    ("2.1.3 Title") takes its level from the depth of its number, which is more reliable than
    size where a document uses one size for several levels.
    """
    sizes = Counter[float]()
    heading_like_lines = Counter[float]()
    for page in pages:
        for line in page.lines:
            sizes[line.size] += len(line.text)
            if _could_be_heading(clean_inline(line.text)) and not line.monospace:
                heading_like_lines[line.size] += 1
    if not sizes:
        return
    body = sizes.most_common(1)[0][0]
    total = sum(sizes.values())
    larger = {s for s, chars in sizes.items() if s >= body + 1.0 and chars <= total * 0.2}
    # The sizes used most often for short lines are the heading levels; rarer, larger sizes
    # (cover titles, drop caps) all count as level 1 rather than pushing real levels down.
    common = sorted(
        sorted(larger, key=lambda s: heading_like_lines[s], reverse=True)[:_MAX_FONT_LEVELS],
        reverse=True,
    )
    rank = {size: index + 1 for index, size in enumerate(common)}
    rank.update({size: 1 for size in larger if common and size > common[0]})
    heading_sizes = common
    for page in pages:
        block_sizes = Counter(line.block for line in page.lines)
        for line in page.lines:
            text = clean_inline(line.text)
            if not _could_be_heading(text) or line.monospace:
                continue
            level = rank.get(line.size)
            if level is None and line.size in larger and _numbered_level(text):
                level = 1  # the section number decides the real level when it is emitted
            if level is None and not heading_sizes and line.bold and line.size >= body:
                # Documents set in one size mark headings by weight: a bold line standing alone.
                alone = block_sizes[line.block] == 1 and not text.endswith((".", ":", ","))
                level = 1 if alone else None
            if level is not None:
                line.heading_level = level


def _numbered_level(text: str) -> int | None:
    """The depth of a section number ("2.1.3 Title" -> 3), the surest sign of heading level."""
    numbered = _SECTION_NUMBER.match(text)
    return numbered.group(1).count(".") + 1 if numbered else None


def _could_be_heading(text: str) -> bool:
    letters = sum(ch.isalpha() for ch in text)
    return letters >= 2 and len(text) <= _MAX_HEADING_CHARS and not _PAGE_NUMBER.match(text)


def _emit(pages: list[_Page], builder: MarkdownBuilder, numbered_levels: bool) -> None:
    """Writes lines and tables in reading order, joining tables that continue across pages.

    With `numbered_levels`, a heading that starts with a section number takes its level from the
    number's depth; an outline, when there is one, already says the level.
    """

    def add_heading(lines: list[_Line], page: int) -> None:
        text = " ".join(clean_inline(line.text) for line in lines)
        level = (_numbered_level(text) if numbered_levels else None) or lines[0].heading_level
        builder.heading(min(level, 6), text, page=page)

    pending_table: tuple[_Table, list[int]] | None = None

    def flush_table() -> None:
        nonlocal pending_table
        if pending_table is not None:
            table, row_pages = pending_table
            builder.table(
                table.rows,
                page=row_pages[0],
                row_pages=row_pages,
                column_labels=table.column_labels,
            )
            pending_table = None

    for page in pages:
        tables = sorted(page.tables, key=lambda t: t.y0)
        if pending_table is not None and tables:
            _drop_continuation_captions(page, tables[0])
        # Text keeps PyMuPDF's reading order; a table is placed before the first line below it.
        ordered: list[object] = []
        remaining = list(tables)
        for line in page.lines:
            while remaining and remaining[0].y0 <= line.y0:
                ordered.append(remaining.pop(0))
            ordered.append(line)
        ordered.extend(remaining)
        paragraph: list[_Line] = []
        heading_run: list[_Line] = []
        for item in ordered:
            if isinstance(item, _Table):
                if heading_run:
                    add_heading(heading_run, page.number)
                    heading_run = []
                if paragraph and not (pending_table and _continues(pending_table[0], item)):
                    _take_column_labels(paragraph, item)
                _flush_paragraph(paragraph, builder, page.number)
                paragraph = []
                if pending_table and _continues(pending_table[0], item):
                    pending_table[0].rows.extend(item.rows[1:])
                    pending_table[1].extend([page.number] * (len(item.rows) - 1))
                    continue
                flush_table()
                pending_table = (item, [page.number] * len(item.rows))
                continue
            line = item
            assert isinstance(line, _Line)
            if pending_table is not None:
                flush_table()
            if line.heading_level:
                _flush_paragraph(paragraph, builder, page.number)
                paragraph = []
                if heading_run and not _same_heading(heading_run, line):
                    add_heading(heading_run, page.number)
                    heading_run = []
                heading_run.append(line)
                continue
            if heading_run:
                add_heading(heading_run, page.number)
                heading_run = []
            if paragraph and _starts_list_item(line.text):
                _flush_paragraph(paragraph, builder, page.number)
                paragraph = []
            if paragraph and paragraph[-1].block != line.block:
                _flush_paragraph(paragraph, builder, page.number)
                paragraph = []
            paragraph.append(line)
        if heading_run:
            add_heading(heading_run, page.number)
        _flush_paragraph(paragraph, builder, page.number)
    flush_table()


def _take_column_labels(paragraph: list[_Line], table: _Table) -> None:
    """Moves a statement's years from the lines above its grid into the table's header.

    "2022 2021 2020" above "Net Revenue | $86,392 | $79,474 | $70,372" names the amounts'
    columns; left as a paragraph, every row of the statement reads without its year. What the
    first of those lines holds before the years ("Years ended December 31,") stays as text.
    """
    found = column_labels_above([line.text for line in paragraph], table.rows)
    if found is None:
        return
    first, rest, table.column_labels = found
    if rest:
        paragraph[first].text = rest
        first += 1
    del paragraph[first:]


def _drop_continuation_captions(page: _Page, table: _Table) -> None:
    """Drops "Table 1 (continued)" lines above a table that carries on from the previous page.

    They repeat a caption the reader has already seen, and left in place they would split the
    table in two.
    """
    above = [line for line in page.lines if line.y1 <= table.y0 + 1]
    if above and all(_CONTINUED.search(line.text) for line in above):
        page.lines = [line for line in page.lines if line not in above]


def _continues(previous: _Table, table: _Table) -> bool:
    """A table on the next page with the same header row is the same table, continued."""
    if len(previous.rows[0]) != len(table.rows[0]):
        return False
    return [clean_inline(c or "") for c in previous.rows[0]] == [
        clean_inline(c or "") for c in table.rows[0]
    ]


def _starts_list_item(text: str) -> bool:
    return bool(_BULLET.match(text) or _ORDERED.match(text))


def _same_heading(run: list[_Line], line: _Line) -> bool:
    last = run[-1]
    if clean_inline(last.text).replace(".", "").isdigit():
        return True  # a chapter number printed above its title
    return line.heading_level == last.heading_level and last.block == line.block


def _flush_paragraph(lines: list[_Line], builder: MarkdownBuilder, page: int) -> None:
    """Joins a block's lines into one paragraph, or into list items when they carry markers."""
    if not lines:
        return
    items: list[tuple[_Line, list[str]]] = []
    plain: list[str] = []
    for line in lines:
        text = line.text.strip()
        if _BULLET.match(text) or _ORDERED.match(text):
            items.append((line, [text]))
        elif items:
            items[-1][1].append(text)
        else:
            plain.append(text)
    if plain:
        builder.paragraph(_join_lines(plain), page=page)
    if not items:
        return
    left = min(line.x0 for line, _ in items)
    for line, texts in items:
        text = _join_lines(texts)
        depth = round((line.x0 - left) / _LIST_INDENT_POINTS)
        ordered = _ORDERED.match(text)
        if ordered and not _BULLET.match(text):
            marker = ordered.group(1)
            number = int(marker) if marker.isdigit() else 1
            builder.list_item(
                text[ordered.end() :], depth=min(depth, 5), ordered=True, number=number, page=page
            )
        else:
            bullet = _BULLET.match(text)
            body = text[bullet.end() :] if bullet else text
            builder.list_item(body, depth=min(depth, 5), page=page)


def _join_lines(texts: list[str]) -> str:
    """Lines of one paragraph, with words hyphenated across line ends joined again."""
    joined = ""
    texts = [_DOT_LEADER.sub(" … ", text) for text in texts]
    for text in texts:
        if joined.endswith("-") and len(joined) > 1 and joined[-2].isalpha() and text[:1].islower():
            joined = joined[:-1] + text
        else:
            joined = f"{joined} {text}" if joined else text
    return joined
