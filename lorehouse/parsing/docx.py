"""DOCX -> Markdown with python-docx: heading styles, numbered and bulleted lists, merged cells.

python-docx is used directly because it exposes what unstructured flattens: the outline level
behind a heading style, list nesting from the numbering part, and rendered page breaks.
"""

from __future__ import annotations

import io
import re
import zipfile
from importlib.metadata import version

import docx
from docx.document import Document as DocxDocument
from docx.enum.style import WD_STYLE_TYPE
from docx.opc.exceptions import PackageNotFoundError
from docx.oxml.ns import qn
from docx.styles.style import ParagraphStyle
from docx.table import Table
from docx.text.paragraph import Paragraph
from lxml import etree

from lorehouse.errors import ParseError
from lorehouse.models import FailureReason
from lorehouse.parsing.markdown_builder import MarkdownBuilder, clean_inline
from lorehouse.parsing.office import check_office_package
from lorehouse.parsing.registry import ParseOptions, ParseOutput, register_parser

_HEADING_STYLE = re.compile(r"^heading\s*(\d)$", re.IGNORECASE)
_STRICT_NAMESPACE = b"purl.oclc.org/ooxml/officeDocument"
_LIST_STYLE = re.compile(r"^list\s*(bullet|number|paragraph)?\s*(\d)?$", re.IGNORECASE)


@register_parser(file_type="docx", name="python-docx", version=f"5+docx{version('python-docx')}")
def parse_docx(data: bytes, rel_path: str, options: ParseOptions) -> ParseOutput:
    """Markdown for a Word document, body order kept, headers and footers left out."""
    check_office_package(data, "docx")
    if _STRICT_NAMESPACE in data[:200_000] or _is_strict(data):
        raise ParseError(
            FailureReason.UNSUPPORTED_TYPE,
            "Strict Open XML conformance; re-save the file as a standard (Transitional) .docx",
        )
    try:
        document = docx.Document(io.BytesIO(data))
    except (KeyError, ValueError, PackageNotFoundError, zipfile.BadZipFile) as error:
        raise ParseError(FailureReason.CORRUPT, f"python-docx cannot open it: {error}") from error
    except etree.XMLSyntaxError as error:
        raise ParseError(FailureReason.CORRUPT, f"malformed document XML: {error}") from error
    writer = _DocxWriter(document)
    writer.walk(document.element.body)
    title = clean_inline(document.core_properties.title or "") or None
    return ParseOutput(builder=writer.builder, warnings=writer.warnings, title=title)


class _DocxWriter:
    """Walks the body XML in order, because python-docx lists paragraphs and tables apart."""

    def __init__(self, document: DocxDocument) -> None:
        self.document = document
        self.builder = MarkdownBuilder()
        self.warnings: list[str] = []
        self.page = 1
        body = document.element.body
        self.rendered_breaks = bool(body.findall(".//" + qn("w:lastRenderedPageBreak")))
        self.bullet_levels = _bullet_levels(document)
        self.counters: dict[tuple[str, int], int] = {}
        # python-docx resolves `paragraph.style` by scanning every style of the document for
        # each paragraph; on long documents that lookup dominated parsing, so it is done once.
        self.styles_by_id = {
            style.style_id: style
            for style in document.styles
            if style.type == WD_STYLE_TYPE.PARAGRAPH
        }
        self.default_style = document.styles.default(WD_STYLE_TYPE.PARAGRAPH)
        # With a "Title" paragraph on top, "Heading 1" is the second level, as readers see it.
        title_ids = {i for i, s in self.styles_by_id.items() if (s.name or "") == "Title"}
        first_paragraphs = body.findall(qn("w:p"))[:20]
        self.heading_offset = int(any(p.style in title_ids for p in first_paragraphs))

    def walk(self, container: etree._Element) -> None:
        for child in container.iterchildren():
            if not isinstance(child.tag, str):
                continue  # comments and processing instructions
            tag = etree.QName(child).localname
            if tag == "p":
                self._advance_page(child)
                self._paragraph(Paragraph(child, self.document))
            elif tag == "tbl":
                self._advance_page(child)
                self._table(child)
            elif tag == "sdt":
                content = child.find(qn("w:sdtContent"))
                if content is not None:
                    self.walk(content)

    def _advance_page(self, element: etree._Element) -> None:
        """Word records where it last broke pages; without those, count hard page breaks."""
        if self.rendered_breaks:
            self.page += len(element.findall(".//" + qn("w:lastRenderedPageBreak")))
        else:
            breaks = element.findall(".//" + qn("w:br"))
            self.page += sum(1 for br in breaks if br.get(qn("w:type")) == "page")

    def _paragraph(self, paragraph: Paragraph) -> None:
        text = paragraph.text
        if not clean_inline(text):
            return
        style = self.styles_by_id.get(paragraph._p.style or "", self.default_style)
        style_name = (style.name or "") if style is not None else ""
        level = _heading_level(style, style_name)
        if level:
            shift = self.heading_offset if style_name != "Title" else 0
            self.builder.heading(level + shift, text, page=self.page)
            return
        numbering = _numbering(paragraph, style)
        list_style = _LIST_STYLE.match(style_name or "")
        if numbering is not None or list_style:
            if numbering is not None:
                num_id, level = numbering
                ordered = (num_id, level) not in self.bullet_levels
                # "List Bullet 2" style nesting lives in the style name, not in the level.
                style_depth = int(list_style.group(2) or 1) - 1 if list_style else 0
                depth = max(level, style_depth)
            else:
                assert list_style is not None
                num_id = style_name
                depth = int(list_style.group(2) or 1) - 1
                ordered = (list_style.group(1) or "").lower() == "number"
            self._reset_deeper_counters(num_id, depth)
            key = (num_id, depth)
            self.counters[key] = self.counters.get(key, 0) + 1
            self.builder.list_item(
                text, depth=depth, ordered=ordered, number=self.counters[key], page=self.page
            )
            return
        self.builder.paragraph(text, page=self.page)

    def _reset_deeper_counters(self, num_id: str, depth: int) -> None:
        for key in [k for k in self.counters if k[0] == num_id and k[1] > depth]:
            del self.counters[key]

    def _table(self, element: etree._Element) -> None:
        table = Table(element, self.document)
        try:
            rows = [[_cell_text(cell._tc) for cell in row.cells] for row in table.rows]
        except (ValueError, IndexError) as error:
            # python-docx refuses some grid layouts (cells offset by gridBefore); read the
            # cells as they stand instead of losing the table.
            self.warnings.append(f"table read without merged-cell layout: {error}")
            rows = [
                [_cell_text(tc) for tc in tr.findall(qn("w:tc"))]
                for tr in element.findall(qn("w:tr"))
            ]
        self.builder.table(rows, page=self.page)


def _is_strict(data: bytes) -> bool:
    """Strict documents name their parts with purl.oclc.org namespaces, python-docx does not."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            return _STRICT_NAMESPACE in archive.read("_rels/.rels")
    except (KeyError, zipfile.BadZipFile, OSError):
        return False


def _cell_text(tc: etree._Element) -> str:
    """A cell's paragraphs, nested tables included, on one line."""
    paragraphs = tc.findall(".//" + qn("w:p"))
    texts = ["".join(t.text or "" for t in p.iter(qn("w:t"))) for p in paragraphs]
    return " ".join(text for text in texts if text.strip())


def _heading_level(style: ParagraphStyle | None, style_name: str) -> int | None:
    """Level from a "Heading N"/"Title" style, else from the outline level Word stores."""
    if style_name.lower() == "title":
        return 1
    match = _HEADING_STYLE.match(style_name)
    if match:
        return int(match.group(1))
    while style is not None:
        outline = style.element.find(f"{qn('w:pPr')}/{qn('w:outlineLvl')}")
        if outline is not None:
            level = int(outline.get(qn("w:val"), "9"))
            return level + 1 if level < 9 else None
        style = style.base_style
    return None


def _numbering(paragraph: Paragraph, style: ParagraphStyle | None) -> tuple[str, int] | None:
    """(numbering id, depth) for a list paragraph, from its own or its style's numPr."""
    candidates = [paragraph._p.pPr]
    while style is not None:
        candidates.append(style.element.pPr)
        style = style.base_style
    for ppr in candidates:
        if ppr is None:
            continue
        num_pr = ppr.find(qn("w:numPr"))
        if num_pr is None:
            continue
        num_id = num_pr.find(qn("w:numId"))
        ilvl = num_pr.find(qn("w:ilvl"))
        if num_id is None or num_id.get(qn("w:val")) == "0":
            return None
        return num_id.get(qn("w:val")), int(ilvl.get(qn("w:val"), "0")) if ilvl is not None else 0
    return None


def _bullet_levels(document: DocxDocument) -> set[tuple[str, int]]:
    """(numbering id, level) pairs drawn as bullets; every other list level is numbered."""
    try:
        numbering = document.part.numbering_part.element
    except (KeyError, NotImplementedError):
        return set()
    abstract_bullets: dict[str, set[int]] = {}
    for abstract in numbering.findall(qn("w:abstractNum")):
        levels = set()
        for lvl in abstract.findall(qn("w:lvl")):
            fmt = lvl.find(qn("w:numFmt"))
            if fmt is not None and fmt.get(qn("w:val")) in {"bullet", "none"}:
                levels.add(int(lvl.get(qn("w:ilvl"), "0")))
        abstract_bullets[abstract.get(qn("w:abstractNumId"))] = levels
    result: set[tuple[str, int]] = set()
    for num in numbering.findall(qn("w:num")):
        abstract_id = num.find(qn("w:abstractNumId"))
        if abstract_id is None:
            continue
        for level in abstract_bullets.get(abstract_id.get(qn("w:val")), set()):
            result.add((num.get(qn("w:numId")), level))
    return result
