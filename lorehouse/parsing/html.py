"""HTML -> Markdown with BeautifulSoup over lxml: h1-h6, nested lists, rowspan/colspan tables.

A custom walk rather than unstructured's HTML partitioner keeps list nesting and lets merged
table cells be repeated; navigation, scripts, styles and hidden elements are dropped first.
"""

from __future__ import annotations

import re
import warnings
from importlib.metadata import version

from bs4 import BeautifulSoup, NavigableString, Tag, XMLParsedAsHTMLWarning

from lorehouse.errors import ParseError
from lorehouse.models import FailureReason
from lorehouse.parsing.markdown_builder import MarkdownBuilder, clean_inline
from lorehouse.parsing.registry import ParseOptions, ParseOutput, register_parser
from lorehouse.sniffing import decode_text

_DROP = ["script", "style", "noscript", "template", "nav", "footer", "svg", "iframe", "button",
         "form", "select", "head"]  # fmt: skip
_HEADINGS = {f"h{n}": n for n in range(1, 7)}
_BLOCKS = {
    *("p", "div", "section", "article", "main", "aside", "header", "ul", "ol", "table", "pre"),
    *("blockquote", "dl", "figure", "figcaption", "center", "body", "html", "fieldset"),
    *("details", "summary", "address", "hr", "li", "tr", "td", "th"),
    *_HEADINGS,
}
_HIDDEN_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.IGNORECASE)
_META_CHARSET = re.compile(rb"<meta[^>]+charset=[\"']?([A-Za-z0-9_\-]+)", re.IGNORECASE)
_MAX_DEPTH = 200


@register_parser(file_type="html", name="bs4-lxml", version=f"3+bs4{version('beautifulsoup4')}")
def parse_html(data: bytes, rel_path: str, options: ParseOptions) -> ParseOutput:
    """Markdown for a web page or an HTML export, page chrome left out."""
    text = _decode(data)
    with warnings.catch_warnings():
        # XHTML and inline-XBRL filings are meant to be read as HTML; the warning is noise.
        warnings.simplefilter("ignore", XMLParsedAsHTMLWarning)
        soup = BeautifulSoup(text, "lxml")
    title = clean_inline(soup.title.get_text()) if soup.title else None
    for tag in soup.find_all(_DROP):
        tag.decompose()
    for tag in soup.find_all(style=_HIDDEN_STYLE):
        tag.decompose()
    for tag in soup.find_all(attrs={"hidden": True}):
        tag.decompose()
    root = soup.body or soup
    writer = _HtmlWriter()
    writer.walk(root, depth=0)
    return ParseOutput(builder=writer.builder, warnings=writer.warnings, title=title or None)


def html_fragment_to_markdown(fragment: str) -> str:
    """Markdown for a piece of HTML inside another format: a table, a list.

    Markdown files exported from Google Docs or wikis keep their tables as HTML; as raw tags
    they reach the embedder, BM25 and extractive answers as `<td>` noise, and a reader sees
    markup. The same walk as a web page's turns them into the builder's tables and lists; a
    list inside a table cell keeps its items apart with bullets, as a cell holds one line.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", XMLParsedAsHTMLWarning)
        soup = BeautifulSoup(fragment, "lxml")
    for item in soup.find_all("li"):
        if item.find_parent(["td", "th"]) is not None:
            item.insert(0, NavigableString(" \u2022 "))
    writer = _HtmlWriter()
    writer.walk(soup.body or soup, depth=0)
    markdown, _ = writer.builder.build()
    return markdown.strip()


def _decode(data: bytes) -> str:
    """A declared charset wins; otherwise UTF-8, then the detected legacy encoding."""
    declared = _META_CHARSET.search(data[:4096])
    if declared:
        try:
            return data.decode(declared.group(1).decode("ascii"))
        except (LookupError, UnicodeDecodeError):
            pass
    return decode_text(data)[0]


class _HtmlWriter:
    def __init__(self) -> None:
        self.builder = MarkdownBuilder()
        self.warnings: list[str] = []
        self._inline: list[str] = []

    def walk(self, element: Tag, depth: int) -> None:
        if depth > _MAX_DEPTH:
            raise ParseError(
                FailureReason.CORRUPT, f"HTML nested deeper than {_MAX_DEPTH} elements"
            )
        for child in element.children:
            if isinstance(child, NavigableString):
                if child.__class__ is NavigableString:  # not comments, CDATA or doctypes
                    self._inline.append(str(child))
                continue
            if not isinstance(child, Tag):
                continue
            name = child.name.lower()
            if name not in _BLOCKS and not _has_block_child(child):
                self._inline.append(_inline_text(child))
                continue
            self._flush()
            if name in _HEADINGS:
                self.builder.heading(_HEADINGS[name], _inline_text(child))
            elif name in {"ul", "ol"}:
                self._list(child, 0, depth)
            elif name == "table":
                self._table(child, depth)
            elif name == "pre":
                self.builder.code(child.get_text())
            elif name == "blockquote":
                self.builder.paragraph("> " + clean_inline(child.get_text(" ")))
            elif name == "dl":
                self._definitions(child)
            elif name == "hr":
                continue
            else:
                self.walk(child, depth + 1)
                self._flush()
        self._flush()

    def _flush(self) -> None:
        if self._inline:
            self.builder.paragraph(" ".join(self._inline))
            self._inline = []

    def _list(self, element: Tag, level: int, depth: int) -> None:
        ordered = element.name.lower() == "ol"
        number = int(element.get("start", 1)) if str(element.get("start", "1")).isdigit() else 1
        for item in element.find_all("li", recursive=False):
            nested = [c for c in item.children if isinstance(c, Tag) and c.name in {"ul", "ol"}]
            own = [c for c in item.children if c not in nested]
            text = clean_inline(" ".join(_node_text(c) for c in own))
            self.builder.list_item(text, depth=min(level, 8), ordered=ordered, number=number)
            number += 1
            for sub in nested:
                self._list(sub, level + 1, depth + 1)

    def _table(self, table: Tag, depth: int) -> None:
        rows = [r for r in table.find_all("tr") if r.find_parent("table") is table]
        grid, header_rows = _expand(rows)
        width = max((len(r) for r in grid), default=0)
        if width <= 1 or (len(grid) <= 1 and not header_rows):
            # A one-column or one-row "table" is page layout, not data: read what is inside.
            for row in rows:
                for cell in row.find_all(["td", "th"], recursive=False):
                    self.walk(cell, depth + 1)
                    self._flush()
            return
        caption = table.find("caption")
        if caption is not None and caption.find_parent("table") is table:
            self.builder.paragraph(caption.get_text(" "))
        self.builder.table(grid, header_rows=max(1, header_rows))

    def _definitions(self, element: Tag) -> None:
        term = ""
        for child in element.find_all(["dt", "dd"], recursive=False):
            if child.name == "dt":
                term = _inline_text(child)
            else:
                self.builder.paragraph(f"{term}: {_inline_text(child)}" if term else child.text)


def _expand(rows: list[Tag]) -> tuple[list[list[str | None]], int]:
    """The table's grid with rowspan/colspan cells repeated, and how many rows are headings."""
    grid: dict[tuple[int, int], str] = {}
    header_rows = 0
    counting_header = True
    for r, row in enumerate(rows):
        cells = row.find_all(["td", "th"], recursive=False)
        in_head = row.find_parent("thead") is not None
        all_th = bool(cells) and all(c.name == "th" for c in cells)
        if counting_header and (in_head or all_th):
            header_rows += 1
        else:
            counting_header = False
        c = 0
        for cell in cells:
            while (r, c) in grid:
                c += 1
            text = _inline_text(cell)
            rowspan = _span(cell.get("rowspan"))
            colspan = _span(cell.get("colspan"))
            for dr in range(rowspan):
                for dc in range(colspan):
                    grid.setdefault((r + dr, c + dc), text)
            c += colspan
    if not grid:
        return [], 0
    height = max(r for r, _ in grid) + 1
    width = max(c for _, c in grid) + 1
    return [[grid.get((r, c), "") for c in range(width)] for r in range(height)], header_rows


def _span(value: object) -> int:
    try:
        return max(1, min(int(str(value)), 100))
    except (TypeError, ValueError):
        return 1


def _has_block_child(element: Tag) -> bool:
    return any(isinstance(c, Tag) and c.name.lower() in _BLOCKS for c in element.descendants)


def _inline_text(element: Tag) -> str:
    for br in element.find_all("br"):
        br.replace_with(" ")
    return clean_inline(element.get_text(""))


def _node_text(node: object) -> str:
    if isinstance(node, Tag):
        return _inline_text(node)
    return str(node) if node.__class__ is NavigableString else ""
