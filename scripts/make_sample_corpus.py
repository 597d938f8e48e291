"""Generate the bundled Lorehouse demo corpus.

The corpus is a small set of internal documents of "Fernhill Analytics", a fictional data
consultancy of about 300 people with offices in Lisbon, Toronto and Singapore. It is the
default input of the ingestion pipeline, so every document exercises the structure that the
converters must carry into Markdown: multi-level headings, nested bulleted and numbered
lists, tables (including merged cells and a table that continues across a page break) and
page numbers. The documents hold concrete, checkable facts (leave entitlements, hotel
limits, approval thresholds, response times) that question-answering demos and tests can
ask about. Facts that appear in more than one document come from the shared constants at
the top of this module, so the documents cannot contradict each other.

Layout of the generated tree (default ``sample_corpus/`` at the repository root)::

    handbook/employee-handbook.pdf          PyMuPDF, outline with three levels, header and
                                            footer on every page, two-page ruled table
    handbook/travel-and-expenses.docx       Word heading styles, lists, merged-cell tables
    handbook/benefits-overview.pptx         titled slides, nested bullets, table, notes
    finance/budget-2026.xlsx                three sheets, merged title, empty row/column
    engineering/oncall-runbook.md           Markdown with nested lists, code, pipe table
    it/acceptable-use-policy.html           HTML with rowspan/colspan and page chrome
    security/_access.json                   folder ACL: {"groups": ["security"]}
    security/incident-response-plan.docx    restricted by the folder ACL
    security/vendor-risk-register.xlsx      restricted by the folder ACL
    hr/compensation-bands.xlsx              restricted by its sidecar file
    hr/compensation-bands.xlsx.meta.json    per-file ACL: {"groups": ["hr", "people-leads"]}
    hr/parental-leave-faq.md                public (no sidecar)

Access control conventions:

* ``_access.json`` inside a directory restricts every document in that directory (and
  below it) to the listed groups.
* ``<document>.meta.json`` next to a document restricts that single document and takes
  precedence over any folder ACL.
* Documents without either file are public.

The output is deterministic: content is fixed, document properties carry fixed dates, the
Office (zip) containers are rewritten with fixed member timestamps and the PDF keeps a
stable file identifier. Run ``python scripts/make_sample_corpus.py [--out DIR]``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pymupdf
from docx import Document as new_docx
from docx.document import Document as DocxDocument
from docx.oxml import OxmlElement
from docx.oxml.ns import qn
from docx.table import Table as DocxTable
from openpyxl import Workbook
from openpyxl.styles import Alignment, Border, Font, PatternFill, Side
from openpyxl.utils import get_column_letter
from openpyxl.worksheet.worksheet import Worksheet
from pptx import Presentation
from pptx.presentation import Presentation as PptxPresentation
from pptx.util import Inches, Pt

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO_ROOT / "sample_corpus"

# ---------------------------------------------------------------------------
# Shared facts. Every document that mentions one of these reads it from here.
# ---------------------------------------------------------------------------

COMPANY = "Fernhill Analytics"
DOMAIN = "fernhill-analytics.example"
FIXED_TIMESTAMP = dt.datetime(2026, 1, 5, 9, 0, 0)
ZIP_DATE_TIME = (2026, 1, 5, 9, 0, 0)
PDF_DATE = "D:20260105090000+00'00'"

OFFICES = ("Lisbon", "Toronto", "Singapore")
CURRENCY = {"Lisbon": "EUR", "Toronto": "CAD", "Singapore": "SGD"}
HEADCOUNT = {"Lisbon": 140, "Toronto": 95, "Singapore": 65}
OFFICE_OPENED = {"Lisbon": 2014, "Toronto": 2018, "Singapore": 2021}
OFFICE_ADDRESS = {
    "Lisbon": "Avenida da Liberdade 110, 4th floor, 1250-146 Lisboa",
    "Toronto": "220 King Street West, Suite 900, Toronto ON M5H 1K4",
    "Singapore": "8 Marina View, #21-03, Singapore 018960",
}

CEO = "Helena Marques"
CFO = "Rajiv Menon"
CPO = "Grace Tan"
CISO = "Tomás Ferreira"
HEAD_OF_IT = "Sofia Rocha"
HEAD_OF_ENGINEERING = "Marcus Lee"
DPO = "Inês Carvalho"
GENERAL_COUNSEL = "Michael Osei"
OFFICE_DIRECTOR = {
    "Lisbon": "João Almeida",
    "Toronto": "Priya Natarajan",
    "Singapore": "Wei Ling Chua",
}

HANDBOOK_VERSION = "4.2"
EFFECTIVE_DATE = "1 January 2026"

CORE_HOURS = "10:00 to 16:00"
WORK_WEEK_HOURS = 40
MIN_OFFICE_DAYS = 2
WORK_FROM_ABROAD_DAYS = 20
WORK_FROM_ABROAD_NOTICE_DAYS = 10

ANNUAL_LEAVE_DAYS = {"Lisbon": 25, "Toronto": 20, "Singapore": 21}
TORONTO_LEAVE_AFTER_FIVE_YEARS = 25
CARRY_OVER_DAYS = 5
CARRY_OVER_DEADLINE = "31 March"

PARENTAL_PRIMARY_WEEKS = 20
PARENTAL_SECONDARY_WEEKS = 6
PARENTAL_ELIGIBILITY_MONTHS = 6
PARENTAL_WINDOW_MONTHS = 12
PARENTAL_NOTICE_WEEKS = 8
PARENTAL_SECONDARY_BLOCKS = 3
PHASED_RETURN_WEEKS = 4
PHASED_RETURN_HOURS_PCT = 80
KEEPING_IN_TOUCH_DAYS = 10

SICK_DAYS = 10
SICK_CERTIFICATE_AFTER_DAYS = 3
LONG_TERM_SICK_TOP_UP_WEEKS = 8
BEREAVEMENT_DAYS = 5
VOLUNTEERING_DAYS = 2
STUDY_LEAVE_DAYS = 5

GIFT_LIMIT_EUR = 100
GIFT_DECLARE_WORKING_DAYS = 5

HOME_OFFICE_ALLOWANCE = {"Lisbon": 600, "Toronto": 850, "Singapore": 900}
INTERNET_STIPEND = {"Lisbon": 30, "Toronto": 45, "Singapore": 45}
WELLBEING_BUDGET = {"Lisbon": 400, "Toronto": 600, "Singapore": 600}
LEARNING_BUDGET = {"Lisbon": 1500, "Toronto": 2200, "Singapore": 2300}
LEARNING_BUDGET_EUR = LEARNING_BUDGET["Lisbon"]
LISBON_MEAL_CARD_EUR = "10.20"

CLAIM_DEADLINE_DAYS = 30
CLAIM_REJECT_AFTER_DAYS = 90
REIMBURSE_WORKING_DAYS = 10
CLIENT_ENTERTAINMENT = {"Lisbon": 80, "Toronto": 120, "Singapore": 120}
MILEAGE_RATE = {"Lisbon": "EUR 0.36", "Toronto": "CAD 0.70", "Singapore": "SGD 0.60"}


@dataclass(frozen=True)
class CityLimit:
    """Hotel and meal limits for one city, in the currency of the responsible office."""

    region: str
    city: str
    currency: str
    hotel: int
    meals: int


CITY_LIMITS: tuple[CityLimit, ...] = (
    CityLimit("Europe", "Lisbon", "EUR", 160, 50),
    CityLimit("Europe", "Porto", "EUR", 130, 45),
    CityLimit("Europe", "London", "EUR", 290, 80),
    CityLimit("Americas", "Toronto", "CAD", 275, 90),
    CityLimit("Americas", "Montreal", "CAD", 240, 80),
    CityLimit("Americas", "New York", "CAD", 420, 120),
    CityLimit("Asia-Pacific", "Singapore", "SGD", 320, 95),
    CityLimit("Asia-Pacific", "Kuala Lumpur", "SGD", 210, 70),
    CityLimit("Asia-Pacific", "Sydney", "SGD", 340, 110),
)
UNLISTED_CITY_UPLIFT_PCT = 10

APPROVAL_MATRIX: tuple[tuple[str, str, str], ...] = (
    ("Up to EUR 500", "Line manager", "Department head"),
    ("EUR 500.01 to EUR 2,000", "Department head", "Office director"),
    ("EUR 2,000.01 to EUR 5,000", "Office director", f"Chief Financial Officer ({CFO})"),
    ("Over EUR 5,000", f"Chief Financial Officer ({CFO})", f"Chief Executive Officer ({CEO})"),
)

SEVERITIES: tuple[tuple[str, str, str, str, str], ...] = (
    ("SEV1", "Client-facing outage or confirmed data breach", "5 minutes", "30 minutes", "Yes"),
    ("SEV2", "Major degradation, no workaround", "15 minutes", "1 hour", "Yes"),
    ("SEV3", "Minor degradation, workaround exists", "1 business hour", "Daily", "No"),
    ("SEV4", "Cosmetic issue or internal tooling only", "Next business day", "None", "No"),
)


@dataclass(frozen=True)
class Holiday:
    """One row of the 2026 public holiday calendar."""

    day: dt.date
    name: str
    lisbon: bool
    toronto: bool
    singapore: bool

    def observed(self, office: str) -> bool:
        return {"Lisbon": self.lisbon, "Toronto": self.toronto, "Singapore": self.singapore}[office]


def _h(month: int, day: int, name: str, offices: str) -> Holiday:
    """Build a holiday; ``offices`` holds L, T and/or S for the offices that close."""
    return Holiday(dt.date(2026, month, day), name, "L" in offices, "T" in offices, "S" in offices)


HOLIDAYS_2026: tuple[Holiday, ...] = (
    _h(1, 1, "New Year's Day", "LTS"),
    _h(2, 16, "Family Day", "T"),
    _h(2, 17, "Carnival (Shrove Tuesday)", "L"),
    _h(2, 17, "Chinese New Year", "S"),
    _h(2, 18, "Chinese New Year (second day)", "S"),
    _h(3, 21, "Hari Raya Puasa", "S"),
    _h(4, 3, "Good Friday", "LTS"),
    _h(4, 5, "Easter Sunday", "L"),
    _h(4, 25, "Freedom Day", "L"),
    _h(5, 1, "Labour Day", "LS"),
    _h(5, 18, "Victoria Day", "T"),
    _h(5, 27, "Hari Raya Haji", "S"),
    _h(5, 31, "Vesak Day", "S"),
    _h(6, 1, "Vesak Day (observed)", "S"),
    _h(6, 4, "Corpus Christi", "L"),
    _h(6, 10, "Portugal Day", "L"),
    _h(6, 13, "St Anthony's Day (Lisbon)", "L"),
    _h(6, 19, "Founders' Day (company day)", "LTS"),
    _h(7, 1, "Canada Day", "T"),
    _h(8, 3, "Civic Holiday", "T"),
    _h(8, 9, "National Day", "S"),
    _h(8, 10, "National Day (observed)", "S"),
    _h(8, 15, "Assumption Day", "L"),
    _h(9, 7, "Labour Day (Canada)", "T"),
    _h(9, 30, "National Day for Truth and Reconciliation", "T"),
    _h(10, 5, "Republic Day", "L"),
    _h(10, 12, "Thanksgiving", "T"),
    _h(11, 1, "All Saints' Day", "L"),
    _h(11, 8, "Deepavali", "S"),
    _h(11, 9, "Deepavali (observed)", "S"),
    _h(12, 1, "Restoration of Independence", "L"),
    _h(12, 8, "Immaculate Conception", "L"),
    _h(12, 24, "Christmas Eve (company day)", "LTS"),
    _h(12, 25, "Christmas Day", "LTS"),
    _h(12, 26, "Boxing Day", "T"),
    _h(12, 28, "Boxing Day (observed)", "T"),
    _h(12, 31, "New Year's Eve (company day)", "LTS"),
)

WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def fmt_day(day: dt.date) -> str:
    """Format a date as ``Wed 10 Jun 2026`` independently of the process locale."""
    return f"{WEEKDAYS[day.weekday()]} {day.day} {MONTHS[day.month - 1]} {day.year}"


def weekday_closures(office: str) -> int:
    """Number of 2026 holidays on Monday to Friday that close the given office."""
    return sum(1 for h in HOLIDAYS_2026 if h.observed(office) and h.day.weekday() < 5)


def money(office: str, amount: int) -> str:
    return f"{CURRENCY[office]} {amount:,}"


def per_office(values: dict[str, int]) -> str:
    """``EUR 600 in Lisbon, CAD 850 in Toronto and SGD 900 in Singapore``."""
    parts = [f"{money(o, values[o])} in {o}" for o in OFFICES]
    return f"{parts[0]}, {parts[1]} and {parts[2]}"


def prose(text: str) -> str:
    """Collapse the line breaks and indentation of a triple-quoted paragraph."""
    return " ".join(text.split())


# ---------------------------------------------------------------------------
# Output helpers
# ---------------------------------------------------------------------------


def write_text(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8", newline="\n")
    return path


def write_json(path: Path, payload: dict[str, Any]) -> Path:
    return write_text(path, json.dumps(payload) + "\n")


_CORE_DATE_RE = re.compile(rb"(<dcterms:(?:created|modified)[^>]*>)[^<]*(</dcterms:)")


def normalise_zip(path: Path) -> None:
    """Rewrite an Office container with fixed member timestamps and core-property dates."""
    with zipfile.ZipFile(path) as src:
        members = [(info.filename, src.read(info.filename)) for info in src.infolist()]
    stamp = FIXED_TIMESTAMP.strftime("%Y-%m-%dT%H:%M:%SZ").encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as dst:
        for name, data in members:
            payload = data
            if name == "docProps/core.xml":
                payload = _CORE_DATE_RE.sub(rb"\g<1>" + stamp + rb"\g<2>", data)
            info = zipfile.ZipInfo(name, date_time=ZIP_DATE_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            dst.writestr(info, payload)


# ---------------------------------------------------------------------------
# PDF: employee handbook
# ---------------------------------------------------------------------------

PAGE_WIDTH, PAGE_HEIGHT = pymupdf.paper_size("a4")
MARGIN_X = 60.0
CONTENT_TOP = 84.0
CONTENT_BOTTOM = PAGE_HEIGHT - 72.0
CONTENT_WIDTH = PAGE_WIDTH - 2 * MARGIN_X
BODY_SIZE = 10.0
LINE_HEIGHT = 14.0
HEADING_SIZES = {1: 18.0, 2: 14.0, 3: 12.0}
HEADING_SPACE_BEFORE = {1: 0.0, 2: 12.0, 3: 8.0}
HEADING_COLOR = (0.05, 0.28, 0.33)
GREY = (0.35, 0.35, 0.35)
BLACK = (0.0, 0.0, 0.0)
HEADER_FILL = (0.86, 0.91, 0.92)
RUNNING_HEADER = f"{COMPANY} — Employee Handbook"
FONT_REGULAR, FONT_BOLD, FONT_ITALIC = "FR", "FB", "FI"


@dataclass
class PdfLayout:
    """A minimal flowing-text layout engine on top of PyMuPDF pages."""

    doc: pymupdf.Document
    fonts: dict[str, pymupdf.Font] = field(init=False, default_factory=dict)
    page: pymupdf.Page | None = None
    y: float = CONTENT_TOP
    toc: list[list[Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.fonts = {
            FONT_REGULAR: pymupdf.Font("helv"),
            FONT_BOLD: pymupdf.Font("hebo"),
            FONT_ITALIC: pymupdf.Font("heit"),
        }

    # -- page handling -----------------------------------------------------

    def new_page(self) -> pymupdf.Page:
        page = self.doc.new_page(width=PAGE_WIDTH, height=PAGE_HEIGHT)
        for name, font in self.fonts.items():
            page.insert_font(fontname=name, fontbuffer=font.buffer)
        self.page = page
        self.y = CONTENT_TOP
        return page

    @property
    def current(self) -> pymupdf.Page:
        if self.page is None:
            return self.new_page()
        return self.page

    def ensure(self, height: float) -> pymupdf.Page:
        if self.page is None or self.y + height > CONTENT_BOTTOM:
            return self.new_page()
        return self.page

    def at_page_top(self) -> bool:
        return self.page is not None and self.y <= CONTENT_TOP + 0.1

    # -- text primitives -----------------------------------------------------

    def width(self, text: str, font: str = FONT_REGULAR, size: float = BODY_SIZE) -> float:
        return self.fonts[font].text_length(text, fontsize=size)

    def wrap(self, text: str, max_width: float, font: str, size: float) -> list[str]:
        lines: list[str] = []
        current = ""
        for word in text.split():
            candidate = f"{current} {word}" if current else word
            if current and self.width(candidate, font, size) > max_width:
                lines.append(current)
                current = word
            else:
                current = candidate
        if current:
            lines.append(current)
        return lines

    def put(
        self,
        x: float,
        text: str,
        font: str = FONT_REGULAR,
        size: float = BODY_SIZE,
        color: tuple[float, float, float] = BLACK,
    ) -> None:
        self.current.insert_text(
            pymupdf.Point(x, self.y + size), text, fontname=font, fontsize=size, color=color
        )

    # -- blocks ------------------------------------------------------------------

    def heading(self, level: int, text: str) -> None:
        size = HEADING_SIZES[level]
        if level == 1 and self.page is not None and not self.at_page_top():
            self.new_page()
        self.ensure(HEADING_SPACE_BEFORE[level] + size * 1.4 + 3 * LINE_HEIGHT)
        if not self.at_page_top():
            self.y += HEADING_SPACE_BEFORE[level]
        self.put(MARGIN_X, text, FONT_BOLD, size, HEADING_COLOR)
        page_number = self.current.number + 1
        target = pymupdf.Point(MARGIN_X, max(self.y - 4, 0))
        self.toc.append([level, text, page_number, {"kind": pymupdf.LINK_GOTO, "to": target}])
        self.y += size * 1.4 + (4 if level == 1 else 2)

    def paragraph(self, text: str, font: str = FONT_REGULAR, size: float = BODY_SIZE) -> None:
        for line in self.wrap(prose(text), CONTENT_WIDTH, font, size):
            self.ensure(LINE_HEIGHT)
            self.put(MARGIN_X, line, font, size)
            self.y += LINE_HEIGHT
        self.y += 5

    def fixed_lines(self, lines: Sequence[str]) -> None:
        """Print lines exactly as given (used where a word is hyphenated at a line end)."""
        for line in lines:
            if self.width(line) > CONTENT_WIDTH:
                raise ValueError(f"fixed line too wide for the text column: {line!r}")
            self.ensure(LINE_HEIGHT)
            self.put(MARGIN_X, line)
            self.y += LINE_HEIGHT
        self.y += 5

    def list_item(self, label: str, text: str, level: int) -> None:
        label_x = MARGIN_X + 10 + level * 20
        text_x = label_x + 14
        lines = self.wrap(prose(text), PAGE_WIDTH - MARGIN_X - text_x, FONT_REGULAR, BODY_SIZE)
        for index, line in enumerate(lines):
            self.ensure(LINE_HEIGHT)
            if index == 0:
                self.put(label_x, label)
            self.put(text_x, line)
            self.y += LINE_HEIGHT
        self.y += 1.5

    def bullets(self, items: Sequence[str | tuple[str, Sequence[str]]]) -> None:
        for item in items:
            text, children = (item, ()) if isinstance(item, str) else item
            self.list_item("•", text, 0)
            for child in children:
                self.list_item("–", child, 1)
        self.y += 4

    def numbered(self, items: Sequence[str]) -> None:
        for number, text in enumerate(items, start=1):
            self.list_item(f"{number}.", text, 0)
        self.y += 4

    def caption(self, text: str) -> None:
        self.ensure(LINE_HEIGHT)
        self.put(MARGIN_X, text, FONT_ITALIC, 9.0, GREY)
        self.y += LINE_HEIGHT

    def table(
        self,
        caption: str,
        header: Sequence[str],
        rows: Sequence[Sequence[str]],
        widths: Sequence[float],
        row_height: float = 16.0,
        size: float = 9.0,
    ) -> None:
        """Draw a ruled table; the caption and header row repeat after a page break."""
        if sum(widths) > CONTENT_WIDTH + 0.1:
            raise ValueError("table wider than the text column")
        for row in (header, *rows):
            for text, width in zip(row, widths, strict=True):
                if self.width(text, FONT_BOLD, size) > width - 8:
                    raise ValueError(f"cell text too wide for its column: {text!r}")

        def draw_row(cells: Sequence[str], header_row: bool) -> None:
            page = self.current
            x = MARGIN_X
            for text, width in zip(cells, widths, strict=True):
                rect = pymupdf.Rect(x, self.y, x + width, self.y + row_height)
                page.draw_rect(
                    rect, color=BLACK, fill=HEADER_FILL if header_row else None, width=0.6
                )
                page.insert_text(
                    pymupdf.Point(x + 4, self.y + (row_height + size * 0.7) / 2),
                    text,
                    fontname=FONT_BOLD if header_row else FONT_REGULAR,
                    fontsize=size,
                    color=BLACK,
                )
                x += width
            self.y += row_height

        self.ensure(LINE_HEIGHT + row_height * 4)
        self.caption(caption)
        draw_row(header, header_row=True)
        for row in rows:
            if self.y + row_height > CONTENT_BOTTOM:
                self.new_page()
                self.caption(f"{caption} (continued)")
                draw_row(header, header_row=True)
            draw_row(row, header_row=False)
        self.y += 10

    # -- finishing -----------------------------------------------------------

    def add_running_header_and_footer(self) -> None:
        total = self.doc.page_count
        for page in self.doc:
            page.insert_text(
                pymupdf.Point(MARGIN_X, 44),
                RUNNING_HEADER,
                fontname=FONT_REGULAR,
                fontsize=9,
                color=GREY,
            )
            version = f"Version {HANDBOOK_VERSION}"
            page.insert_text(
                pymupdf.Point(PAGE_WIDTH - MARGIN_X - self.width(version, size=9), 44),
                version,
                fontname=FONT_REGULAR,
                fontsize=9,
                color=GREY,
            )
            page.draw_line(
                pymupdf.Point(MARGIN_X, 52),
                pymupdf.Point(PAGE_WIDTH - MARGIN_X, 52),
                color=GREY,
                width=0.5,
            )
            footer = f"Page {page.number + 1} of {total}"
            page.insert_text(
                pymupdf.Point((PAGE_WIDTH - self.width(footer, size=9)) / 2, PAGE_HEIGHT - 36),
                footer,
                fontname=FONT_REGULAR,
                fontsize=9,
                color=GREY,
            )


def handbook_welcome(lay: PdfLayout) -> None:
    lay.heading(1, "1 Welcome and Values")
    lay.paragraph(
        f"""This handbook explains how we work at {COMPANY}: what we value, when and where we
        work, the leave you are entitled to, the standards of conduct we hold each other to and
        the public holidays each office observes. Version {HANDBOOK_VERSION} takes effect on
        {EFFECTIVE_DATE} and replaces every earlier version. The People Team owns this
        document; send questions or suggested changes to people@{DOMAIN}."""
    )
    lay.paragraph(
        """Where local employment law gives you a better entitlement than this handbook, the
        law applies. Where this handbook is more generous than the law, the handbook applies.
        Office-specific rules are called out explicitly; everything else applies to every
        employee in every office."""
    )
    lay.heading(2, "1.1 About Fernhill Analytics")
    lay.paragraph(
        f"""{COMPANY} was founded in Lisbon in 2014 by {CEO} and {CFO}. We are a data
        consultancy: we help retailers, logistics operators, energy companies and public bodies
        design, build and run their data platforms, and we turn the data on those platforms into
        forecasts, dashboards and decisions. Today we are about 300 people in three offices."""
    )
    lay.bullets(
        [
            (
                f"Lisbon (headquarters, opened {OFFICE_OPENED['Lisbon']}) — "
                f"{OFFICE_ADDRESS['Lisbon']}",
                [
                    f"Office director: {OFFICE_DIRECTOR['Lisbon']}",
                    f"About {HEADCOUNT['Lisbon']} employees; home of Finance and the People Team",
                ],
            ),
            (
                f"Toronto (opened {OFFICE_OPENED['Toronto']}) — {OFFICE_ADDRESS['Toronto']}",
                [
                    f"Office director: {OFFICE_DIRECTOR['Toronto']}",
                    f"About {HEADCOUNT['Toronto']} employees; serves clients in the Americas",
                ],
            ),
            (
                f"Singapore (opened {OFFICE_OPENED['Singapore']}) — {OFFICE_ADDRESS['Singapore']}",
                [
                    f"Office director: {OFFICE_DIRECTOR['Singapore']}",
                    f"About {HEADCOUNT['Singapore']} employees; serves clients in Asia-Pacific",
                ],
            ),
        ]
    )
    lay.paragraph(
        """Client work is organised in four practices: Data Engineering, Data Science, Analytics
        Consulting and the Machine Learning Platform team. Client Services, Sales and Marketing,
        People, Finance, IT and Security and the Executive Office support the practices. Most
        projects are staffed from more than one office, so you will regularly work with
        colleagues in other time zones."""
    )
    lay.heading(2, "1.2 Our Values")
    lay.paragraph(
        """Our four values describe the behaviour we hire for, promote for and expect from
        everyone, including the leadership team. They are deliberately short so that they can
        be used in everyday decisions rather than framed on a wall."""
    )
    lay.heading(3, "1.2.1 Clients First")
    lay.paragraph(
        """We exist because clients trust us with their data and their hardest questions. We
        protect that trust by being honest about what the data can and cannot tell them, by
        keeping their information confidential and by delivering what we promised, when we
        promised it. When a client's interest and our short-term commercial interest diverge,
        we choose the client."""
    )
    lay.heading(3, "1.2.2 Evidence over Opinion")
    lay.paragraph(
        """We argue with data, not with seniority. Any colleague may challenge a conclusion if
        they can show the evidence, and we change our minds when the evidence changes. We write
        down our assumptions so that others can check them, and we share negative results as
        readily as positive ones."""
    )
    lay.heading(3, "1.2.3 Own the Outcome")
    lay.fixed_lines(
        [
            "We care about whether the work made a difference, not only whether the ticket was",
            "closed. Owning the outcome means following a problem across team boundaries, asking",
            "for help early and saying so when a deadline is at risk. It also means that when we",
            "hand work over, we hand over the context with it: nobody should inherit responsi-",
            "bilities without knowing why decisions were made and what is still open. Owners",
            "are named on every project plan, and every open risk has an owner and a date.",
        ]
    )
    lay.heading(3, "1.2.4 Kindness by Default")
    lay.paragraph(
        """We assume good intent, give feedback that is specific and useful, and remember that
        colleagues in other offices may be working early in the morning or late at night to
        overlap with us. Being kind does not mean avoiding difficult conversations; it means
        having them respectfully and in private."""
    )


def handbook_working_hours(lay: PdfLayout) -> None:
    lay.heading(1, "2 Working Hours and Remote Work")
    lay.paragraph(
        """We want people to do their best work without burning out. This chapter sets the
        shared hours that make collaboration across three offices possible and the rules for
        working from home or from abroad."""
    )
    lay.heading(2, "2.1 Core Hours")
    lay.paragraph(
        f"""The standard working week is {WORK_WEEK_HOURS} hours, Monday to Friday. Core hours
        are {CORE_HOURS} local office time; during core hours you are expected to be reachable
        by chat and available for meetings. Outside core hours you may start as early as 07:30
        or finish as late as 19:00, as long as you agree your pattern with your manager and it
        suits your project."""
    )
    lay.paragraph(
        """Wednesday afternoons are kept free of internal meetings in every office so that people
        have a long block of focused time each week. Client meetings may still take place when
        the client requests them."""
    )
    lay.paragraph(
        """Time is recorded in the timesheet system by 17:00 every Friday. Hours worked beyond the
        standard week because of client deadlines are recorded as overtime and taken back as
        time off in lieu within three months. More than eight hours of overtime in a single week
        requires your manager's approval in advance, except during a declared incident."""
    )
    lay.heading(2, "2.2 Remote and Hybrid Work")
    lay.paragraph(
        f"""All three offices follow a hybrid model. You work from the office at least
        {MIN_OFFICE_DAYS} days a week, normally on the anchor days Tuesday and Thursday, and may
        work remotely on the other days. Teams may agree additional office days around project
        milestones, client workshops and onboarding."""
    )
    lay.heading(3, "2.2.1 Eligibility")
    lay.paragraph(
        """New joiners work from the office for their first four weeks so that they can meet
        their team and complete onboarding. After that the hybrid model applies in full. A fully
        remote arrangement is possible for roles that do not need regular client presence; it
        requires the approval of the office director and is reviewed every twelve months."""
    )
    lay.heading(3, "2.2.2 Home Office Allowance")
    lay.paragraph(
        f"""To set up a safe and comfortable workspace at home, every employee may claim a
        one-off home office allowance of {per_office(HOME_OFFICE_ALLOWANCE)}, plus a monthly
        internet stipend of {per_office(INTERNET_STIPEND)}. Both are claimed through the
        expenses process described in the Travel and Expenses Policy. Equipment bought with the
        allowance belongs to you; laptops and monitors are provided by IT separately."""
    )
    lay.heading(3, "2.2.3 Working from Abroad")
    lay.paragraph(
        f"""You may work from a country other than your office country for up to
        {WORK_FROM_ABROAD_DAYS} working days per calendar year. The limit protects you and the
        company from unexpected tax and immigration obligations, so days cannot be carried over
        and longer stays need a separate assessment by the People Team. To request work from
        abroad:"""
    )
    lay.numbered(
        [
            "Check that the destination is on the approved country list in the People portal.",
            "Agree the dates with your manager and, if you are staffed on a project, with the "
            "project lead.",
            "Submit the work-from-abroad form at least "
            f"{WORK_FROM_ABROAD_NOTICE_DAYS} working days before you travel.",
            "Wait for written confirmation from the People Team, normally within five working "
            "days.",
            "Record the days in the timesheet system with the location code WFA.",
        ]
    )
    lay.paragraph(
        """Client data classified as Restricted may not be accessed from abroad at all, and
        Confidential data only through the company VPN. The Acceptable Use Policy describes the
        data classification levels in detail."""
    )
    lay.heading(2, "2.3 Working Across Time Zones")
    lay.paragraph(
        """Core hours are set in local office time, so they only partly overlap between offices.
        Toronto is five hours behind Lisbon for most of the year, while the difference between
        Lisbon and Singapore is seven hours in the European summer and eight hours in the
        winter. Plan cross-office meetings inside the shared windows below and rotate
        inconvenient slots so that the same office does not always join early or late."""
    )
    lay.bullets(
        [
            (
                "Lisbon and Toronto: 15:00 to 16:00 Lisbon time.",
                ["This is 10:00 to 11:00 in Toronto, inside both offices' core hours."],
            ),
            (
                "Lisbon and Singapore: 09:00 Lisbon time.",
                ["This is 16:00 or 17:00 in Singapore, depending on daylight saving time."],
            ),
            "All three offices: no shared slot; record the meeting and share written notes.",
        ]
    )


def handbook_leave(lay: PdfLayout) -> None:
    lay.heading(1, "3 Leave")
    lay.paragraph(
        """The leave year is the calendar year in every office. All leave is requested and
        approved in the People portal so that your manager, your project leads and payroll see
        the same information. Part-time colleagues receive every entitlement in this chapter
        pro rata to their contracted hours."""
    )
    lay.heading(2, "3.1 Annual Leave")
    lay.heading(3, "3.1.1 Entitlement by Office")
    lay.paragraph(
        """Annual leave is set per office to reflect local law and market practice. The figures
        below are working days per calendar year for a full-time employee and come on top of
        the public holidays listed in chapter 5."""
    )
    lay.bullets(
        [
            f"Lisbon: {ANNUAL_LEAVE_DAYS['Lisbon']} working days.",
            (
                f"Toronto: {ANNUAL_LEAVE_DAYS['Toronto']} working days.",
                [
                    f"Rising to {TORONTO_LEAVE_AFTER_FIVE_YEARS} working days from the first "
                    "January after five years of continuous service.",
                ],
            ),
            f"Singapore: {ANNUAL_LEAVE_DAYS['Singapore']} working days.",
        ]
    )
    lay.paragraph(
        """Joiners and leavers receive a pro rata entitlement for the part of the year they are
        employed, rounded up to the nearest half day."""
    )
    lay.heading(3, "3.1.2 Requesting Leave")
    lay.paragraph(
        """Request leave of more than three consecutive working days at least two weeks in
        advance, and leave of more than two weeks at least six weeks in advance. Managers answer
        requests within three working days. A request can only be refused for a documented
        business reason, and the manager must then offer an alternative period."""
    )
    lay.heading(3, "3.1.3 Carry-over")
    lay.paragraph(
        f"""Up to {CARRY_OVER_DAYS} unused days of annual leave carry over into the next year
        and must be taken by {CARRY_OVER_DEADLINE}. Days above that limit, and carried-over
        days not taken by {CARRY_OVER_DEADLINE}, lapse unless local law requires them to be paid
        out. If you could not take leave because of an approved business need, your office
        director may extend the deadline in writing."""
    )
    lay.heading(2, "3.2 Parental Leave")
    lay.paragraph(
        f"""Parents of every gender receive paid parental leave after the birth or adoption of a
        child, including through surrogacy. The primary caregiver receives
        {PARENTAL_PRIMARY_WEEKS} weeks of parental leave at full pay; the secondary caregiver
        receives {PARENTAL_SECONDARY_WEEKS} weeks at full pay. The same entitlement applies in
        Lisbon, Toronto and Singapore. You are eligible once you have completed
        {PARENTAL_ELIGIBILITY_MONTHS} months of continuous service on the expected date of
        birth or placement."""
    )
    lay.paragraph(
        f"""Where a government scheme pays parental benefits, {COMPANY} tops up the statutory
        payment to your full salary for the weeks above. Parental leave must be taken within
        {PARENTAL_WINDOW_MONTHS} months of the birth or placement. Secondary caregivers may split
        their leave into up to {PARENTAL_SECONDARY_BLOCKS} blocks of at least one week each.
        Please tell the People Team at least {PARENTAL_NOTICE_WEEKS} weeks before the leave
        starts so that your projects can be planned around it."""
    )
    lay.paragraph(
        f"""On your return you may use a phased return of {PHASED_RETURN_WEEKS} weeks, working
        {PHASED_RETURN_HOURS_PCT}% of your normal hours at full pay. During the leave you may
        work up to {KEEPING_IN_TOUCH_DAYS} paid keeping-in-touch days if you wish, and annual
        leave continues to accrue as normal."""
    )
    lay.heading(2, "3.3 Sick Leave")
    lay.paragraph(
        f"""If you are ill, tell your manager before 10:00 on the first day of absence and record
        the absence in the People portal when you are able to. Every employee receives
        {SICK_DAYS} days of paid sick leave per calendar year, on top of any statutory sick pay.
        A medical certificate is required when an absence lasts more than
        {SICK_CERTIFICATE_AFTER_DAYS} consecutive working days."""
    )
    lay.paragraph(
        f"""For long-term illness, {COMPANY} tops up statutory sick pay to your full salary for
        up to {LONG_TERM_SICK_TOP_UP_WEEKS} weeks and works with you and your doctor on a return
        plan. Sick leave is confidential: your manager will not share the reason for your
        absence with your team without your consent."""
    )
    lay.heading(2, "3.4 Other Leave")
    lay.paragraph("The following paid leave is available in every office:")
    lay.bullets(
        [
            (
                f"Bereavement leave: {BEREAVEMENT_DAYS} working days for the death of a partner, "
                "child, parent or sibling.",
                ["Two working days for other relatives and close friends."],
            ),
            f"Volunteering leave: {VOLUNTEERING_DAYS} working days per year for registered "
            "charities.",
            f"Study leave: up to {STUDY_LEAVE_DAYS} working days per year to prepare for "
            "approved certification exams.",
            "Moving house: one working day per year.",
            "Jury service and other civic duties: full pay for the time required by law.",
        ]
    )


def handbook_conduct(lay: PdfLayout) -> None:
    lay.heading(1, "4 Code of Conduct")
    lay.paragraph(
        """Our clients, our colleagues and the public expect us to behave with integrity. This
        code summarises the standards that apply to every employee, contractor and intern. It
        does not replace the detailed policies it refers to, and breaching it may lead to
        disciplinary action up to and including dismissal."""
    )
    lay.heading(2, "4.1 Respect and Inclusion")
    lay.paragraph(
        """We do not tolerate harassment, bullying or discrimination of any kind, whether in the
        office, at a client site, at social events or online. This includes unwelcome comments
        about a person's appearance, background, religion, disability, age, gender identity or
        sexual orientation, and jokes that single out a group. Managers who become aware of
        such behaviour must act on it, even if nobody has filed a formal complaint."""
    )
    lay.paragraph(
        """Inclusion is also practical: schedule meetings inside the core hours of everyone
        invited, share agendas in advance, and make sure colleagues joining remotely can see and
        contribute to the discussion."""
    )
    lay.heading(2, "4.2 Confidentiality and Client Data")
    lay.paragraph(
        """Client data is used only for the purpose the client agreed to and only on approved
        company systems. Never copy client data to personal devices, personal cloud storage or
        external web services, and never discuss client work in public places. The Acceptable
        Use Policy sets out which data may be used on which device."""
    )
    lay.heading(2, "4.3 Conflicts of Interest")
    lay.paragraph(
        """A conflict of interest arises when a personal relationship, investment or activity
        could influence, or appear to influence, your judgement at work. Declare any potential
        conflict to your manager and the People Team as soon as you become aware of it; most
        conflicts can be managed once they are known."""
    )
    lay.heading(3, "4.3.1 Gifts and Hospitality")
    lay.paragraph(
        f"""You may accept occasional gifts and hospitality from clients and suppliers with a
        value of up to EUR {GIFT_LIMIT_EUR} (or the equivalent in local currency). Anything above
        EUR {GIFT_LIMIT_EUR} must be declared in the gift register within
        {GIFT_DECLARE_WORKING_DAYS} working days, and the People Team may ask you to return it.
        Never accept cash or vouchers, and never accept anything while the giver is taking part
        in a tender in which {COMPANY} is involved."""
    )
    lay.heading(3, "4.3.2 Outside Employment")
    lay.paragraph(
        """Paid work outside Fernhill, including freelance data work, board seats and teaching,
        requires the written approval of your office director before you start. Approval is
        normally granted unless the work competes with our services, uses company time or
        equipment, or involves a current client."""
    )
    lay.heading(2, "4.4 Reporting Concerns")
    lay.paragraph(
        f"""If you see something that breaks this code, the law or our policies, raise it with
        your manager, the People Team or the ethics mailbox at ethics@{DOMAIN}. You can also
        report anonymously through the Speak Up portal on the intranet. Every report is
        acknowledged within seven days and investigated confidentially, and most investigations
        are concluded within three months."""
    )
    lay.paragraph(
        """Nobody will suffer any disadvantage for raising a concern in good faith, even if the
        concern turns out to be unfounded. Retaliation against someone who has raised a concern
        is itself a serious breach of this code."""
    )


def handbook_holidays(lay: PdfLayout) -> None:
    lay.heading(1, "5 Public Holidays 2026")
    lay.paragraph(
        """Each office observes the public holidays of its own country and city. In addition,
        all three offices close on three company days: Founders' Day on 19 June, Christmas Eve
        and New Year's Eve. If you work mainly with another office, agree cover with your team
        before its holidays so that clients are never left without a contact."""
    )
    lay.heading(2, "5.1 Holiday Calendar by Office")
    lay.paragraph(
        f"""The table lists every date on which at least one office is closed in 2026. "Yes"
        means the office is closed on that date. Counting only Monday to Friday, the Lisbon
        office is closed on {weekday_closures("Lisbon")} working days, the Toronto office on
        {weekday_closures("Toronto")} and the Singapore office on
        {weekday_closures("Singapore")}. Dates of Chinese New Year, Hari Raya Puasa, Hari Raya
        Haji, Vesak Day and Deepavali follow the official Singapore calendar."""
    )

    def mark(value: bool) -> str:
        return "Yes" if value else "No"

    lay.table(
        "Table 1: Public holidays 2026 by office",
        ["Date", "Holiday", "Lisbon", "Toronto", "Singapore"],
        [
            [fmt_day(h.day), h.name, mark(h.lisbon), mark(h.toronto), mark(h.singapore)]
            for h in HOLIDAYS_2026
        ],
        widths=[95.0, 200.0, 60.0, 60.0, 60.0],
    )
    lay.heading(2, "5.2 Holidays Falling on a Weekend")
    lay.paragraph(
        """In Toronto and Singapore, a public holiday that falls on a Sunday is observed on the
        following Monday, and the observed dates are listed in the table. In Singapore, a
        holiday that falls on a Saturday gives you one day off in lieu, to be taken within three
        months. In Lisbon, holidays that fall on a weekend are not moved, in line with
        Portuguese law."""
    )
    lay.heading(2, "5.3 Working on a Public Holiday")
    lay.paragraph(
        """Working on a public holiday should be rare and must be agreed with your manager in
        advance, except during a declared incident. You receive either double pay for the hours
        worked or a full day off in lieu, which must be taken within three months. The choice
        is yours and is recorded in the timesheet system."""
    )


def build_handbook_pdf(path: Path) -> Path:
    doc = pymupdf.open()
    lay = PdfLayout(doc)
    handbook_welcome(lay)
    handbook_working_hours(lay)
    handbook_leave(lay)
    handbook_conduct(lay)
    handbook_holidays(lay)
    lay.add_running_header_and_footer()
    doc.set_toc(lay.toc)
    doc.set_metadata(
        {
            "title": "Employee Handbook",
            "author": f"{COMPANY} People Team",
            "subject": f"Employee handbook, version {HANDBOOK_VERSION}",
            "keywords": "handbook, leave, remote work, code of conduct, public holidays",
            "creator": "Lorehouse sample corpus generator",
            "producer": "PyMuPDF",
            "creationDate": PDF_DATE,
            "modDate": PDF_DATE,
        }
    )
    doc.subset_fonts()
    path.parent.mkdir(parents=True, exist_ok=True)
    doc.save(path, garbage=4, deflate=True, no_new_id=True)
    doc.close()
    return path


# ---------------------------------------------------------------------------
# DOCX helpers
# ---------------------------------------------------------------------------


def set_docx_properties(doc: DocxDocument, title: str, subject: str, author: str) -> None:
    props = doc.core_properties
    props.title = title
    props.subject = subject
    props.author = author
    props.last_modified_by = author
    props.created = FIXED_TIMESTAMP
    props.modified = FIXED_TIMESTAMP
    props.revision = 1
    props.keywords = "Fernhill Analytics, sample corpus"


def set_cell(table: DocxTable, row: int, col: int, text: str, bold: bool = False) -> None:
    cell = table.cell(row, col)
    cell.text = text
    if bold:
        for run in cell.paragraphs[0].runs:
            run.bold = True


def mark_header_row(table: DocxTable) -> None:
    """Make the first row a repeating header row and print it in bold."""
    row = table.rows[0]
    tr_pr = row._tr.get_or_add_trPr()
    flag = OxmlElement("w:tblHeader")
    flag.set(qn("w:val"), "true")
    tr_pr.append(flag)
    for cell in row.cells:
        for paragraph in cell.paragraphs:
            for run in paragraph.runs:
                run.bold = True


def add_simple_table(
    doc: DocxDocument, header: Sequence[str], rows: Sequence[Sequence[str]]
) -> DocxTable:
    table = doc.add_table(rows=1 + len(rows), cols=len(header))
    table.style = "Table Grid"
    for col, text in enumerate(header):
        set_cell(table, 0, col, text)
    for r, values in enumerate(rows, start=1):
        for col, text in enumerate(values):
            set_cell(table, r, col, text)
    mark_header_row(table)
    return table


def add_paragraphs(doc: DocxDocument, *texts: str, style: str | None = None) -> None:
    for text in texts:
        doc.add_paragraph(prose(text), style=style)


# ---------------------------------------------------------------------------
# DOCX: travel and expenses policy
# ---------------------------------------------------------------------------


def add_city_limits_table(doc: DocxDocument) -> DocxTable:
    """Hotel and meal limits; regions merge vertically, the catch-all row horizontally."""
    table = doc.add_table(rows=2 + len(CITY_LIMITS), cols=4)
    table.style = "Table Grid"
    for col, text in enumerate(["City", "Region", "Hotel per night", "Meals per day"]):
        set_cell(table, 0, col, text)
    region_start: dict[str, int] = {}
    region_end: dict[str, int] = {}
    for r, limit in enumerate(CITY_LIMITS, start=1):
        set_cell(table, r, 0, limit.city)
        set_cell(table, r, 2, f"{limit.currency} {limit.hotel:,}")
        set_cell(table, r, 3, f"{limit.currency} {limit.meals:,}")
        region_start.setdefault(limit.region, r)
        region_end[limit.region] = r
    for region, start in region_start.items():
        merged = table.cell(start, 1).merge(table.cell(region_end[region], 1))
        merged.text = region
    last = len(CITY_LIMITS) + 1
    table.cell(last, 0).merge(table.cell(last, 1)).text = "All other cities"
    table.cell(last, 2).merge(
        table.cell(last, 3)
    ).text = f"Limits of the nearest listed city plus {UNLISTED_CITY_UPLIFT_PCT}%"
    mark_header_row(table)
    return table


def build_travel_docx(path: Path) -> Path:
    doc = new_docx()
    set_docx_properties(
        doc,
        "Travel and Expenses Policy",
        "Business travel, limits and approvals",
        f"{COMPANY} Finance",
    )
    doc.add_heading("Travel and Expenses Policy", level=0)
    meta = doc.add_paragraph(
        f"{COMPANY} · Policy FIN-03 · Version 3.1 · Effective {EFFECTIVE_DATE} · "
        f"Owner: {CFO}, Chief Financial Officer"
    )
    meta.runs[0].italic = True

    doc.add_heading("1 Purpose and Scope", level=1)
    add_paragraphs(
        doc,
        """This policy explains how to plan business travel, which costs the company pays for
        and how to claim them back. It applies to every employee, contractor and intern who
        travels or spends money on behalf of Fernhill Analytics, in all three offices.""",
        """The guiding principle is simple: spend company money as carefully as you would spend
        your own, choose the option that gives the best overall value rather than the lowest
        ticket price, and never let the rules in this policy put your safety at risk. Costs
        that are recharged to a client must also respect the client's own travel terms, which
        take precedence where they are stricter.""",
    )

    doc.add_heading("2 Before You Travel", level=1)
    doc.add_heading("2.1 Trip Approval", level=2)
    add_paragraphs(
        doc,
        """Every trip that involves a flight or an overnight stay needs approval before anything
        is booked. Approval follows the approval matrix in section 5, based on the estimated
        total cost of the trip including travel, hotel and per diems. To get a trip approved:""",
    )
    for step in (
        "Create a travel request in the People portal with the purpose, dates, destination and "
        "the client or internal project code.",
        "Add a cost estimate using the limits in section 3 for the destination city.",
        "Submit the request; it is routed automatically to the approver for the estimated amount.",
        "Once approved, book everything through TravelDesk using the request number.",
        "Keep the approval with your expense claim; claims without an approved request are "
        "returned.",
    ):
        doc.add_paragraph(step, style="List Number")
    add_paragraphs(
        doc,
        """Trips for a client project also need the agreement of the project lead, who checks
        that the cost is covered by the project budget or can be recharged to the client.""",
    )

    doc.add_heading("2.2 Booking Travel", level=2)
    add_paragraphs(
        doc,
        """TravelDesk, our travel agency, holds our negotiated rates and knows where every
        traveller is, which matters if something goes wrong. Book the following through
        TravelDesk:""",
    )
    for text, style in (
        ("Flights", "List Bullet"),
        ("Including changes, cancellations and seat upgrades paid by the company", "List Bullet 2"),
        ("Hotels", "List Bullet"),
        ("Except stays longer than 14 nights, which use serviced apartments", "List Bullet 2"),
        ("Rail journeys", "List Bullet"),
        ("Including airport trains bought in advance", "List Bullet 2"),
        ("Car hire", "List Bullet"),
    ):
        doc.add_paragraph(text, style=style)
    doc.add_heading("2.2.1 Flights", level=3)
    add_paragraphs(
        doc,
        """Book economy class for flights of up to six hours and premium economy for flights
        longer than six hours. Business class is allowed only for flights longer than ten hours
        and only with the approval of the Chief Financial Officer. Book at least 14 days in
        advance where possible; fares booked later than that must be justified in the travel
        request.""",
        """Frequent flyer points earned on business trips belong to the traveller, but they must
        never influence the choice of airline or route.""",
    )
    doc.add_heading("2.2.2 Rail and Ground Transport", level=3)
    add_paragraphs(
        doc,
        """Rail is the preferred option for journeys of up to four hours, such as Lisbon to
        Porto or Toronto to Montreal. Use public transport, airport trains or shared shuttles
        where practical; taxis and ride-hailing are reimbursed when public transport is not
        available, when you carry equipment or when you travel between 22:00 and 06:00.""",
    )
    doc.add_paragraph("Private car use is reimbursed per kilometre:", style=None)
    for office in OFFICES:
        doc.add_paragraph(f"{office}: {MILEAGE_RATE[office]} per km", style="List Bullet")
    doc.add_heading("2.2.3 Hotels", level=3)
    add_paragraphs(
        doc,
        """Choose a hotel within the nightly limit for the destination city in section 3, close
        to the client site or office you are visiting. The limit is per room per night and
        includes taxes and breakfast. Personal extras such as the minibar, laundry for trips of
        fewer than five nights and in-room entertainment are not reimbursed.""",
    )

    doc.add_page_break()
    doc.add_heading("3 Limits by City", level=1)
    doc.add_heading("3.1 Hotel and Meal Limits", level=2)
    add_paragraphs(
        doc,
        """The table below sets the maximum hotel cost per night and the meal per diem for the
        cities our teams visit most often. Limits are in the currency of the office that manages
        travel to that region: EUR for Europe, CAD for the Americas and SGD for Asia-Pacific.""",
    )
    add_city_limits_table(doc)
    add_paragraphs(
        doc,
        f"""For a city that is not listed, use the limits of the nearest listed city plus
        {UNLISTED_CITY_UPLIFT_PCT}%. If no hotel within the limit is available near your
        destination, for example during a major trade fair, ask your approver to confirm the
        exception in writing before booking.""",
    )
    doc.add_heading("3.2 Per Diems", level=2)
    add_paragraphs(
        doc,
        """The meals-per-day figure is a per diem: a flat daily allowance for meals and small
        incidental costs that is paid without receipts. You receive the full per diem for each
        full day away from home and half of it on the day you leave and the day you return.
        Meals that are already paid for, for example by the client or as part of a conference
        ticket, are deducted at 20% of the per diem each for breakfast and 40% each for lunch
        and dinner.""",
    )
    doc.add_heading("3.3 Client Entertainment", level=2)
    add_paragraphs(
        doc,
        f"""Client entertainment is limited to EUR {CLIENT_ENTERTAINMENT["Lisbon"]} per person
        in Europe, CAD {CLIENT_ENTERTAINMENT["Toronto"]} per person in the Americas and
        SGD {CLIENT_ENTERTAINMENT["Singapore"]} per person in Asia-Pacific, including drinks,
        taxes and tips. List every attendee and their organisation on the claim. Alcohol is
        reimbursed only as part of client entertainment.""",
    )

    doc.add_heading("4 Claiming Expenses", level=1)
    doc.add_heading("4.1 Submitting a Claim", level=2)
    add_paragraphs(
        doc,
        f"""Submit claims in the People portal within {CLAIM_DEADLINE_DAYS} days of the expense,
        with a photo or PDF of every itemised receipt. Claims submitted more than
        {CLAIM_REJECT_AFTER_DAYS} days after the expense are rejected unless the Chief Financial
        Officer agrees an exception. Approved claims are reimbursed within
        {REIMBURSE_WORKING_DAYS} working days, in the currency of your office.""",
        """Expenses paid in another currency are converted at the rate on your card statement or,
        for cash, at the monthly Finance rate published on the intranet.""",
    )
    doc.add_heading("4.2 Corporate Cards", level=2)
    add_paragraphs(
        doc,
        """Employees who travel more than four times a year receive a corporate card. Use it only
        for business expenses, and reconcile the monthly statement in the People portal by the
        fifth working day of the following month. Personal use of the card, even if repaid, is a
        breach of this policy.""",
    )
    doc.add_heading("4.3 Non-reimbursable Items", level=2)
    add_paragraphs(doc, "The following costs are never reimbursed:")
    for text in (
        "Traffic and parking fines, and penalties for late cancellation caused by the traveller",
        "Upgrades of flights, rail or hotel rooms that were not approved in advance",
        "Minibar, personal entertainment, spa and gym fees",
        "Lost or stolen personal property, including cash",
        "Alcohol outside client entertainment",
    ):
        doc.add_paragraph(text, style="List Bullet")

    doc.add_heading("5 Approvals", level=1)
    doc.add_heading("5.1 Approval Matrix", level=2)
    add_paragraphs(
        doc,
        """Claims and trip requests are approved according to their total amount, converted to
        euros at the monthly Finance rate. If the approver is unavailable for more than three
        working days, the backup approver decides instead.""",
    )
    add_simple_table(
        doc, ["Amount (EUR equivalent)", "Approver", "Backup approver"], APPROVAL_MATRIX
    )
    add_paragraphs(
        doc,
        """Nobody may approve their own expenses or those of their line manager; such claims
        go to the next level in the matrix. Splitting a claim or a booking to stay below a
        threshold is a breach of this policy.""",
    )
    doc.add_heading("5.2 Exceptions", level=2)
    add_paragraphs(
        doc,
        f"""Exceptions to this policy, for example for travellers with a disability or for
        security reasons, are approved in advance by the Chief Financial Officer, {CFO}, and
        recorded on the travel request.""",
    )

    doc.add_heading("6 Contacts", level=1)
    for text in (
        f"Travel bookings and changes: TravelDesk, travel@{DOMAIN}",
        f"Expense claims and corporate cards: Finance, expenses@{DOMAIN}",
        f"Emergencies while travelling: security on-call, security-oncall@{DOMAIN}",
    ):
        doc.add_paragraph(text, style="List Bullet")

    path.parent.mkdir(parents=True, exist_ok=True)
    doc.save(str(path))
    normalise_zip(path)
    return path


# ---------------------------------------------------------------------------
# DOCX: security incident response plan (restricted)
# ---------------------------------------------------------------------------


def build_incident_response_docx(path: Path) -> Path:
    doc = new_docx()
    set_docx_properties(
        doc, "Security Incident Response Plan", "Incident escalation and contacts", CISO
    )
    doc.add_heading("Security Incident Response Plan", level=0)
    meta = doc.add_paragraph(
        f"{COMPANY} · Policy SEC-02 · Version 2.0 · Effective {EFFECTIVE_DATE} · "
        f"Owner: {CISO}, Chief Information Security Officer · Restricted to the security group"
    )
    meta.runs[0].italic = True

    doc.add_heading("1 Purpose", level=1)
    add_paragraphs(
        doc,
        """This plan describes how Fernhill Analytics detects, escalates, contains and learns from
        security incidents: any event that threatens the confidentiality, integrity or
        availability of our data or our clients' data. It applies to all offices and to all
        systems we operate, including client environments we administer.""",
        """Speed matters more than certainty. Report a suspected incident immediately, even if
        you are not sure it is one; a false alarm costs minutes, while a late report can cost a
        client relationship and regulatory penalties.""",
    )

    doc.add_heading("2 Severity Classification", level=1)
    add_paragraphs(
        doc,
        """Security incidents use the same four severity levels as operational incidents in the
        on-call runbook, with the following security-specific examples:""",
    )
    for text in (
        "SEV1: confirmed exfiltration of client or employee personal data, ransomware on any "
        "production system",
        "SEV2: compromised employee account with access to Confidential data, lost unencrypted "
        "device",
        "SEV3: targeted phishing campaign without confirmed compromise",
        "SEV4: policy violation without data exposure",
    ):
        doc.add_paragraph(text, style="List Bullet")

    doc.add_heading("3 Escalation Procedure", level=1)
    doc.add_heading("3.1 Escalation Steps", level=2)
    for step in (
        "Report: anyone who suspects an incident pages the security on-call engineer within 15 "
        f"minutes of discovery, through PageRelay or security-oncall@{DOMAIN}.",
        "Triage: the on-call engineer acknowledges within 15 minutes, assigns a severity and "
        "opens a private incident channel named sec-inc-YYYYMMDD.",
        f"Escalate: for SEV1 and SEV2 the on-call engineer informs the CISO, {CISO}, within 30 "
        "minutes; the CISO appoints an incident commander.",
        f"Inform leadership: for SEV1 the CISO informs the CEO, {CEO}, within one hour.",
        "Contain: isolate affected systems, revoke exposed credentials and preserve evidence "
        "before anything is rebuilt.",
        f"Assess notification duties: the Data Protection Officer, {DPO}, decides within 24 "
        "hours whether regulators, clients or individuals must be notified.",
        "Recover: restore service from known-good backups and monitor closely for recurrence.",
        "Review: hold a blameless post-incident review within 5 working days and publish the "
        "report to the executive team within 10 working days.",
    ):
        doc.add_paragraph(step, style="List Number")
    doc.add_heading("3.2 Notification Deadlines", level=2)
    add_paragraphs(
        doc,
        """Personal data breaches in the European Union are notified to the Portuguese
        supervisory authority (CNPD) within 72 hours of becoming aware of them. In Singapore,
        notifiable breaches are reported to the PDPC within 3 calendar days of the assessment.
        In Canada, breaches that create a real risk of significant harm are reported to the
        Privacy Commissioner as soon as feasible. Client contracts typically require
        notification within 24 hours of confirmation; the account lead checks the contract.""",
    )

    doc.add_heading("4 Contacts", level=1)
    add_paragraphs(
        doc,
        """Call the security on-call number first. The people below are contacted by the
        incident commander, not by the person reporting the incident.""",
    )
    add_simple_table(
        doc,
        ["Role", "Name", "Office", "Phone", "Email"],
        [
            (
                "Chief Information Security Officer",
                CISO,
                "Lisbon",
                "+351 210 000 401",
                f"tomas.ferreira@{DOMAIN}",
            ),
            ("Security on-call (24/7)", "Weekly rotation", "All", "+351 210 000 499",
             f"security-oncall@{DOMAIN}"),
            ("Data Protection Officer", DPO, "Lisbon", "+351 210 000 402", f"dpo@{DOMAIN}"),
            ("Head of IT", HEAD_OF_IT, "Lisbon", "+351 210 000 310", f"sofia.rocha@{DOMAIN}"),
            ("General Counsel", GENERAL_COUNSEL, "Toronto", "+1 416 555 0142", f"legal@{DOMAIN}"),
            ("Office director, Singapore", OFFICE_DIRECTOR["Singapore"], "Singapore",
             "+65 6000 0177", f"weiling.chua@{DOMAIN}"),
        ],
    )  # fmt: skip

    doc.add_heading("5 Testing this Plan", level=1)
    add_paragraphs(
        doc,
        """The security team runs a tabletop exercise of this plan every six months, alternating
        between a data breach and a ransomware scenario, and updates the plan with the lessons
        learned. Contact details are verified every quarter.""",
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    doc.save(str(path))
    normalise_zip(path)
    return path


# ---------------------------------------------------------------------------
# PPTX: benefits overview
# ---------------------------------------------------------------------------

Bullet = str | tuple[str, Sequence[str]]


def add_bullet_slide(
    prs: PptxPresentation, title: str, items: Sequence[Bullet], notes: str | None = None
) -> None:
    slide = prs.slides.add_slide(prs.slide_layouts[1])
    slide.shapes.title.text = title
    frame = slide.placeholders[1].text_frame
    first = True
    for item in items:
        text, children = (item, ()) if isinstance(item, str) else item
        for level, line in [(0, text), *((1, child) for child in children)]:
            paragraph = frame.paragraphs[0] if first else frame.add_paragraph()
            first = False
            paragraph.text = line
            paragraph.level = level
            for run in paragraph.runs:
                run.font.size = Pt(20 if level == 0 else 16)
    if notes:
        slide.notes_slide.notes_text_frame.text = notes


def build_benefits_pptx(path: Path) -> Path:
    prs = Presentation()
    props = prs.core_properties
    props.title = "Benefits Overview 2026"
    props.author = f"{COMPANY} People Team"
    props.last_modified_by = f"{COMPANY} People Team"
    props.created = FIXED_TIMESTAMP
    props.modified = FIXED_TIMESTAMP
    props.revision = 1

    title_slide = prs.slides.add_slide(prs.slide_layouts[0])
    title_slide.shapes.title.text = "Benefits Overview 2026"
    title_slide.placeholders[1].text = f"{COMPANY} · People Team · January 2026"
    title_slide.notes_slide.notes_text_frame.text = prose(
        f"""Welcome everyone. This deck summarises the benefits that apply from {EFFECTIVE_DATE}
        in Lisbon, Toronto and Singapore. The employee handbook remains the authoritative
        source; if anything here differs, the handbook wins. Questions go to
        benefits@{DOMAIN}."""
    )

    add_bullet_slide(
        prs,
        "Health and Wellbeing",
        [
            (
                "Private health insurance from your first day",
                [
                    "Lisbon: family plan, fully paid by Fernhill",
                    "Toronto: extended health and dental on top of OHIP",
                    "Singapore: inpatient and outpatient cover for you, your spouse and children",
                ],
            ),
            (
                f"Yearly wellbeing budget: {per_office(WELLBEING_BUDGET)}",
                ["Gym, sports clubs, therapy and meditation apps"],
            ),
            (
                "Employee Assistance Programme, available 24/7",
                ["Confidential counselling: six free sessions per topic"],
            ),
        ],
    )
    add_bullet_slide(
        prs,
        "Time Off",
        [
            (
                "Annual leave per calendar year",
                [
                    f"Lisbon: {ANNUAL_LEAVE_DAYS['Lisbon']} working days",
                    f"Toronto: {ANNUAL_LEAVE_DAYS['Toronto']} working days "
                    f"({TORONTO_LEAVE_AFTER_FIVE_YEARS} after five years)",
                    f"Singapore: {ANNUAL_LEAVE_DAYS['Singapore']} working days",
                ],
            ),
            (
                "Parental leave at full pay, in every office",
                [
                    f"Primary caregiver: {PARENTAL_PRIMARY_WEEKS} weeks",
                    f"Secondary caregiver: {PARENTAL_SECONDARY_WEEKS} weeks",
                ],
            ),
            (
                f"{SICK_DAYS} paid sick days per year",
                [f"Medical certificate after {SICK_CERTIFICATE_AFTER_DAYS} consecutive days"],
            ),
            f"{VOLUNTEERING_DAYS} volunteering days per year",
        ],
        notes=prose(
            f"""Remind people that up to {CARRY_OVER_DAYS} unused days carry over and must be
            taken by {CARRY_OVER_DEADLINE}. Parental leave eligibility starts after
            {PARENTAL_ELIGIBILITY_MONTHS} months of service; point to the parental leave FAQ
            for details."""
        ),
    )

    table_slide = prs.slides.add_slide(prs.slide_layouts[5])
    table_slide.shapes.title.text = "Benefits by Office"
    rows = [
        ("Benefit", "Lisbon", "Toronto", "Singapore"),
        (
            "Annual leave",
            f"{ANNUAL_LEAVE_DAYS['Lisbon']} days",
            f"{ANNUAL_LEAVE_DAYS['Toronto']} days ({TORONTO_LEAVE_AFTER_FIVE_YEARS} after 5 years)",
            f"{ANNUAL_LEAVE_DAYS['Singapore']} days",
        ),
        ("Retirement", "3% employer contribution (PPR)", "RRSP match up to 4%", "CPF (statutory)"),
        ("Wellbeing budget", *(money(o, WELLBEING_BUDGET[o]) for o in OFFICES)),
        ("Learning budget", *(money(o, LEARNING_BUDGET[o]) for o in OFFICES)),
        ("Home office (one-off)", *(money(o, HOME_OFFICE_ALLOWANCE[o]) for o in OFFICES)),
        ("Internet (monthly)", *(money(o, INTERNET_STIPEND[o]) for o in OFFICES)),
        ("Meal allowance", f"EUR {LISBON_MEAL_CARD_EUR} per working day", "None", "None"),
    ]
    shape = table_slide.shapes.add_table(
        len(rows), 4, Inches(0.4), Inches(1.6), Inches(9.2), Inches(0.45 * len(rows))
    )
    table = shape.table
    for r, values in enumerate(rows):
        for c, text in enumerate(values):
            cell = table.cell(r, c)
            cell.text = text
            for paragraph in cell.text_frame.paragraphs:
                for run in paragraph.runs:
                    run.font.size = Pt(13)
                    run.font.bold = r == 0
    table_slide.notes_slide.notes_text_frame.text = prose(
        """Amounts are per employee per year unless marked otherwise. The Lisbon meal allowance
        is paid on a meal card, which is tax-efficient under Portuguese rules. Singapore
        retirement contributions follow the statutory CPF rates."""
    )

    add_bullet_slide(
        prs,
        "Learning and Growth",
        [
            (
                f"Personal learning budget: {per_office(LEARNING_BUDGET)} per year",
                ["Courses, books, certifications and conference tickets"],
            ),
            (
                f"Up to {STUDY_LEAVE_DAYS} days of study leave for certification exams",
                ["Exam fees are paid on the first attempt"],
            ),
            "Mentoring programme across all three offices",
        ],
    )
    add_bullet_slide(
        prs,
        "How to Enrol",
        [
            (
                "Enrol in the People portal within 30 days of your start date",
                ["Health cover starts on day one even if you enrol later in the 30 days"],
            ),
            (
                "Report life events within 31 days",
                ["Marriage, birth or adoption, change of address"],
            ),
            f"Questions: benefits@{DOMAIN} or your office People partner",
        ],
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    prs.save(str(path))
    normalise_zip(path)
    return path


# ---------------------------------------------------------------------------
# XLSX helpers and workbooks
# ---------------------------------------------------------------------------

HEADER_FONT = Font(bold=True, color="FFFFFF")
HEADER_FILL_XLSX = PatternFill("solid", fgColor="1F4E59")
THIN = Side(style="thin", color="999999")
CELL_BORDER = Border(left=THIN, right=THIN, top=THIN, bottom=THIN)


def set_workbook_properties(wb: Workbook, title: str, author: str) -> None:
    wb.properties.title = title
    wb.properties.creator = author
    wb.properties.lastModifiedBy = author
    wb.properties.created = FIXED_TIMESTAMP
    wb.properties.modified = FIXED_TIMESTAMP


def write_header(ws: Worksheet, row: int, values: Sequence[str | None]) -> None:
    for col, value in enumerate(values, start=1):
        if value is None:
            continue
        cell = ws.cell(row=row, column=col, value=value)
        cell.font = HEADER_FONT
        cell.fill = HEADER_FILL_XLSX
        cell.border = CELL_BORDER
        cell.alignment = Alignment(horizontal="center", vertical="center", wrap_text=True)


def write_rows(
    ws: Worksheet,
    first_row: int,
    rows: Sequence[Sequence[Any]],
    number_format: str = "#,##0",
) -> None:
    for r, values in enumerate(rows, start=first_row):
        for col, value in enumerate(values, start=1):
            if value is None:
                continue
            cell = ws.cell(row=r, column=col, value=value)
            cell.border = CELL_BORDER
            if isinstance(value, int | float):
                cell.number_format = number_format


def set_widths(ws: Worksheet, widths: Sequence[float]) -> None:
    for col, width in enumerate(widths, start=1):
        ws.column_dimensions[get_column_letter(col)].width = width


def save_workbook(wb: Workbook, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    wb.save(str(path))
    normalise_zip(path)
    return path


DEPARTMENTS: tuple[tuple[str, str, int, int, int, int], ...] = (
    # department, head, headcount, personnel, travel, software and cloud (EUR thousands)
    ("Data Engineering", HEAD_OF_ENGINEERING, 78, 5460, 420, 610),
    ("Data Science", "Aisha Rahman", 52, 3900, 260, 380),
    ("Analytics Consulting", "Pedro Santos", 60, 4200, 540, 150),
    ("Machine Learning Platform", "Kenji Watanabe", 24, 1920, 90, 720),
    ("Client Services", "Olivia Grant", 18, 1080, 210, 40),
    ("Sales and Marketing", "Lucas Moreau", 20, 1500, 380, 95),
    ("People", CPO, 12, 780, 45, 85),
    ("Finance", CFO, 10, 720, 30, 60),
    ("IT and Security", CISO, 16, 1120, 40, 540),
    ("Executive Office", CEO, 10, 1350, 160, 20),
)
BLANK_ROW_AFTER = "Client Services"


def build_budget_xlsx(path: Path) -> Path:
    wb = Workbook()
    set_workbook_properties(wb, "Budget 2026", f"{COMPANY} Finance")

    ws = wb.active
    ws.title = "Department budgets"
    header: list[str | None] = [
        "Department",
        "Department head",
        "Headcount",
        "Personnel",
        "Travel",
        "Software and cloud",
        None,  # column G stays completely empty
        "Training",
        "Total",
    ]
    ws.merge_cells(start_row=1, start_column=1, end_row=1, end_column=len(header))
    title = ws.cell(row=1, column=1, value=f"{COMPANY} — Department budgets FY2026 (EUR thousands)")
    title.font = Font(bold=True, size=14)
    title.alignment = Alignment(horizontal="center")
    write_header(ws, 3, header)
    rows: list[Sequence[Any]] = []
    for name, head, heads, personnel, travel, software in DEPARTMENTS:
        training = heads * LEARNING_BUDGET_EUR // 1000
        total = personnel + travel + software + training
        rows.append([name, head, heads, personnel, travel, software, None, training, total])
        if name == BLANK_ROW_AFTER:
            rows.append([])
    data_rows = [r for r in rows if r]
    totals: list[Any] = ["Total", None]
    for col in range(2, len(header)):
        totals.append(None if col == 6 else sum(r[col] for r in data_rows))
    rows.append(totals)
    write_rows(ws, 4, rows)
    for col in range(1, len(header) + 1):
        if col != 7:
            ws.cell(row=3 + len(rows), column=col).font = Font(bold=True)
    set_widths(ws, [28, 20, 12, 12, 10, 18, 4, 10, 10])
    ws.freeze_panes = "A4"

    per_diem = wb.create_sheet("Per diem rates")
    write_header(per_diem, 1, ["City", "Currency", "Per diem", "Hotel cap"])
    write_rows(per_diem, 2, [(c.city, c.currency, c.meals, c.hotel) for c in CITY_LIMITS])
    set_widths(per_diem, [18, 10, 10, 10])
    per_diem.freeze_panes = "A2"

    approvers = wb.create_sheet("Approvers")
    write_header(approvers, 1, ["Threshold", "Approver", "Backup"])
    write_rows(approvers, 2, APPROVAL_MATRIX)
    set_widths(approvers, [28, 40, 40])
    approvers.freeze_panes = "A2"
    return save_workbook(wb, path)


def build_vendor_register_xlsx(path: Path) -> Path:
    wb = Workbook()
    set_workbook_properties(wb, "Vendor risk register", CISO)
    ws = wb.active
    ws.title = "Vendor risk register"
    write_header(ws, 1, ["Vendor", "Data shared", "Risk tier", "Review date"])
    vendors = [
        ("Nimbus Cloud Hosting", "Client datasets (Confidential), platform backups", "Tier 1",
         dt.date(2026, 3, 15)),
        ("Peoplewise HRIS", "Employee personal data, salaries, bank details", "Tier 1",
         dt.date(2026, 2, 10)),
        ("Ledgerly Accounting", "Supplier invoices, company bank details", "Tier 2",
         dt.date(2026, 4, 30)),
        ("TravelDesk (Voyago Ltd)", "Traveller names, passport numbers, itineraries", "Tier 2",
         dt.date(2026, 5, 20)),
        ("PageRelay", "On-call schedules, employee phone numbers", "Tier 2",
         dt.date(2026, 6, 12)),
        ("Huddle Chat", "Internal messages, incident channels", "Tier 2", dt.date(2026, 7, 1)),
        ("Tallyhour Timesheets", "Employee names, hours per client project", "Tier 3",
         dt.date(2026, 9, 1)),
        ("Brightline Recruiting", "Candidate CVs and interview notes", "Tier 2",
         dt.date(2026, 8, 18)),
        ("Shredwell Secure Disposal", "Retired laptops and disks (wiped before collection)",
         "Tier 3", dt.date(2026, 10, 5)),
        ("Mealcard Portugal", "Lisbon employee names and meal allowance balances", "Tier 3",
         dt.date(2026, 11, 16)),
    ]  # fmt: skip
    write_rows(ws, 2, vendors)
    for row in range(2, 2 + len(vendors)):
        ws.cell(row=row, column=4).number_format = "yyyy-mm-dd"
    set_widths(ws, [28, 52, 10, 14])
    ws.freeze_panes = "A2"
    return save_workbook(wb, path)


COMPENSATION_BANDS: tuple[tuple[str, str, int, int, int, int, int, int], ...] = (
    ("L1", "Associate Analyst", 24000, 30000, 58000, 70000, 48000, 60000),
    ("L2", "Analyst", 30000, 40000, 70000, 88000, 60000, 78000),
    ("L3", "Consultant", 40000, 52000, 88000, 110000, 78000, 100000),
    ("L4", "Senior Consultant", 52000, 66000, 110000, 135000, 100000, 128000),
    ("L5", "Lead Consultant", 66000, 82000, 135000, 165000, 128000, 160000),
    ("L6", "Principal", 82000, 105000, 165000, 200000, 160000, 200000),
    ("L7", "Director", 105000, 140000, 200000, 260000, 200000, 260000),
)


def build_compensation_xlsx(path: Path) -> Path:
    wb = Workbook()
    set_workbook_properties(wb, "Compensation bands 2026", f"{COMPANY} People Team")
    ws = wb.active
    ws.title = "Salary bands 2026"
    write_header(
        ws,
        1,
        [
            "Level",
            "Title",
            "Lisbon min (EUR)",
            "Lisbon max (EUR)",
            "Toronto min (CAD)",
            "Toronto max (CAD)",
            "Singapore min (SGD)",
            "Singapore max (SGD)",
        ],
    )
    write_rows(ws, 2, COMPENSATION_BANDS)
    note_row = 3 + len(COMPENSATION_BANDS)
    ws.cell(
        row=note_row,
        column=1,
        value=f"Gross annual base salary, effective {EFFECTIVE_DATE}. Bands are reviewed every "
        "January by the People Team and the office directors.",
    )
    set_widths(ws, [8, 20, 16, 16, 16, 16, 18, 18])
    ws.freeze_panes = "C2"
    return save_workbook(wb, path)


# ---------------------------------------------------------------------------
# Markdown documents
# ---------------------------------------------------------------------------


def build_oncall_runbook_md(path: Path) -> Path:
    sev_rows = "\n".join(
        f"| {sev} | {desc} | {ack} | {update} | {wake} |"
        for sev, desc, ack, update, wake in SEVERITIES
    )
    text = f"""# On-call Runbook: Platform Engineering

Owner: {HEAD_OF_ENGINEERING}, Head of Engineering. Last reviewed: 12 January 2026.

This runbook tells the on-call engineer what to do when a page arrives for the client data
platforms we operate. Security incidents follow the Security Incident Response Plan, which is
available to the security group; page the security on-call engineer as described below.

## 1. Rotation

Platform on-call follows the sun across our three offices, so nobody is paged at night in the
normal course of events.

- Primary on-call shifts (UTC):
  - Singapore: 00:00 to 08:00
  - Lisbon: 08:00 to 16:00
  - Toronto: 16:00 to 24:00
- Each office keeps a weekly rotation that hands over on Monday at 10:00 local time.
  - The outgoing engineer writes a handover note in the on-call channel.
  - Open incidents are handed over in a short call, never only in writing.
- A secondary on-call engineer in the same office backs up the primary.
- On-call pay is {money("Lisbon", 250)}, {money("Toronto", 360)} or {money("Singapore", 370)}
  per week as primary, and half of that as secondary.

## 2. Severity Levels

Assign a severity as soon as you acknowledge a page. When in doubt, choose the higher severity;
downgrading later is cheap.

| Severity | Definition | Acknowledge within | Status updates | Page outside shift |
| --- | --- | --- | --- | --- |
{sev_rows}

SEV1 and SEV2 incidents page the secondary on-call engineer and the Head of Engineering
automatically. SEV3 and SEV4 are handled during the responding office's business hours.

## 3. Responding to an Incident

### 3.1 The first 15 minutes

1. Acknowledge the page in PageRelay so that it stops escalating.
2. Assess the impact:
   - Check the dashboards:
     - `Platform / Pipeline health`
     - `Platform / Warehouse latency`
     - `Platform / Ingestion backlog`
   - Check the deployment log for changes in the last 24 hours.
   - Ask in the on-call channel whether anyone is already working on it.
3. Declare the incident:
   - Open a channel named `inc-YYYYMMDD-short-name` in Huddle.
   - Post the severity, a one-line summary and who is incident commander.
4. Mitigate first, investigate later:
   - Roll back the most recent deployment if the timing matches.
   - Pause affected ingestion jobs rather than letting them write bad data.

### 3.2 Useful commands

```bash
# Who is on call right now?
pagerelay oncall show --schedule platform-primary

# Recent deployments in the production cluster
kubectl -n platform rollout history deployment/ingest-api

# Roll back the ingestion API to the previous revision
kubectl -n platform rollout undo deployment/ingest-api

# Pause all scheduled ingestion jobs for one client
fernctl jobs pause --client acme-retail --reason "INC-2026-014"
```

### 3.3 Escalation

- Escalate to the secondary on-call engineer if you cannot mitigate within 30 minutes.
- Escalate to {HEAD_OF_ENGINEERING} for any SEV1, and for a SEV2 that lasts longer than 2 hours.
- Page the security on-call engineer at security-oncall@{DOMAIN} if there is any sign of
  unauthorised access.
  - Do not try to investigate a suspected breach yourself; preserve logs and wait.
- Tell the client's account lead before the client notices, whenever possible.

## 4. Communicating with Clients

Post status updates on the [status page](https://status.{DOMAIN}) at the cadence in the
severity table. Use plain language, state what is affected, what we are doing and when the next
update will come. Never speculate about the root cause in a client-facing update.

## 5. After the Incident

- Every SEV1 and SEV2 gets a blameless postmortem within 5 working days.
  - Use the template in the [engineering wiki](https://wiki.{DOMAIN}/engineering/postmortem).
  - Action items get an owner and a due date in the tracker.
- SEV3 incidents get a short written summary in the incident channel.
- Record time worked outside your shift as overtime; see the
  [Employee Handbook](../handbook/employee-handbook.pdf), section 2.1 Core Hours.

## 6. Links

- [Dashboards](https://grafana.{DOMAIN}/d/platform)
- [Status page](https://status.{DOMAIN})
- [On-call schedule](https://pagerelay.{DOMAIN}/schedules/platform-primary)
- [Travel and Expenses Policy](../handbook/travel-and-expenses.docx) for travel to client sites
"""
    return write_text(path, text)


def build_parental_leave_faq_md(path: Path) -> Path:
    text = f"""# Parental Leave FAQ

This FAQ answers the questions the People Team hears most often about parental leave. The
rules themselves are in the [Employee Handbook](../handbook/employee-handbook.pdf), section
3.2 Parental Leave, which always takes precedence.

## Entitlement

### How many weeks of parental leave do I get?

- Primary caregivers: **{PARENTAL_PRIMARY_WEEKS} weeks** at full pay.
- Secondary caregivers: **{PARENTAL_SECONDARY_WEEKS} weeks** at full pay.

The entitlement is the same in Lisbon, Toronto and Singapore, and it applies to parents of
every gender, to birth, adoption and surrogacy.

### Who counts as the primary caregiver?

The parent who will have the main day-to-day care of the child during the first year. Each
family decides this for itself; we only ask you to tell us which role you are taking.

### Am I eligible?

You are eligible once you have completed {PARENTAL_ELIGIBILITY_MONTHS} months of continuous
service on the expected date of birth or placement. If you are close to that date, talk to the
People Team; we look at each case individually.

## Pay

### Is it really full pay?

Yes. Where a government scheme pays parental benefits, Fernhill tops up the statutory payment
to your full salary:

- Lisbon: on top of the parental allowance paid by Social Security.
- Toronto: on top of Employment Insurance maternity and parental benefits.
- Singapore: on top of government-paid maternity, paternity or shared parental leave.

### Does annual leave keep accruing?

Yes. Annual leave accrues as normal during parental leave, so you return with your full
entitlement for the year.

## Planning your leave

### When do I need to tell the People Team?

At least {PARENTAL_NOTICE_WEEKS} weeks before your leave starts. Earlier is better, because it
gives your project leads time to plan handovers.

### Can I split my leave?

1. Primary caregivers take their leave in one continuous block.
2. Secondary caregivers can split their leave into up to {PARENTAL_SECONDARY_BLOCKS} blocks:
   - each block is at least one week long;
   - every block must be taken within {PARENTAL_WINDOW_MONTHS} months of the birth or
     placement.

### What happens to unused weeks after {PARENTAL_WINDOW_MONTHS} months?

They lapse. Leave must be taken within {PARENTAL_WINDOW_MONTHS} months of the birth or
placement and cannot be paid out.

## Coming back

### Is there a phased return?

Yes. You may use a phased return of {PHASED_RETURN_WEEKS} weeks, working
{PHASED_RETURN_HOURS_PCT}% of your normal hours at full pay.

### Can I work during my leave?

Only if you want to. You may work up to {KEEPING_IN_TOUCH_DAYS} paid keeping-in-touch days, for
example to attend a team offsite or training. Nobody may ask you to work during parental leave.

## Contacts

- People Team: people@{DOMAIN}
- Benefits questions: benefits@{DOMAIN}
- Your office People partner, listed on the intranet
"""
    return write_text(path, text)


# ---------------------------------------------------------------------------
# HTML: acceptable use policy
# ---------------------------------------------------------------------------


def build_acceptable_use_html(path: Path) -> Path:
    text = f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Acceptable Use Policy — {COMPANY}</title>
<style>
  body {{ font-family: "Helvetica Neue", Arial, sans-serif; margin: 0; color: #1b1b1b; }}
  nav {{ background: #1f4e59; padding: 0.5rem 1rem; }}
  nav a {{ color: #ffffff; margin-right: 1rem; text-decoration: none; }}
  main {{ max-width: 52rem; margin: 2rem auto; padding: 0 1rem; }}
  table {{ border-collapse: collapse; }}
  th, td {{ border: 1px solid #999999; padding: 0.3rem 0.6rem; text-align: left; }}
  footer {{ font-size: 0.8rem; color: #666666; text-align: center; padding: 2rem; }}
</style>
<script>
  window.intranetAnalytics = window.intranetAnalytics || [];
  window.intranetAnalytics.push({{ page: "it/acceptable-use-policy", section: "IT" }});
</script>
</head>
<body>
<nav aria-label="Intranet">
  <a href="/">Intranet home</a>
  <a href="/people">People</a>
  <a href="/it">IT and Security</a>
  <a href="/finance">Finance</a>
  <a href="/search">Search</a>
</nav>
<main>
<article>
<h1>Acceptable Use Policy</h1>
<p><em>Policy IT-01 · Version 2.3 · Effective {EFFECTIVE_DATE} · Owner: {HEAD_OF_IT}, Head of
IT</em></p>

<h2>1. Purpose and Scope</h2>
<p>This policy sets out how you may use {COMPANY}'s computers, phones, accounts, networks and
data. It applies to every employee, contractor and intern in Lisbon, Toronto and Singapore,
and to every device that accesses company or client data, whether the company owns it or
not.</p>
<p>The rules protect our clients' data and our own. Most of them are enforced automatically by
device management, but automatic controls never cover everything; your judgement is the last
line of defence.</p>

<h2>2. Data Classification</h2>
<p>All information we hold is classified into one of four levels. The owner of a data set sets
its level; if you are unsure, treat the data as Confidential until told otherwise.</p>
<h3>2.1 Classification Levels</h3>
<ul>
  <li><strong>Public</strong>: information published on our website or approved for release.</li>
  <li><strong>Internal</strong>: everyday business information, such as this policy.
    <ul>
      <li>May be shared with any employee or contractor.</li>
      <li>Must not be posted publicly.</li>
    </ul>
  </li>
  <li><strong>Confidential</strong>: client data, contracts, salaries and personal data.
    <ul>
      <li>Access only on a need-to-know basis.</li>
      <li>Only on company-managed systems or through the company VPN.</li>
    </ul>
  </li>
  <li><strong>Restricted</strong>: data whose exposure would cause severe harm.
    <ul>
      <li>Examples: health data, credentials, security findings.</li>
      <li>Stored only in the encrypted client vault; never downloaded.</li>
    </ul>
  </li>
</ul>

<h2>3. Devices</h2>
<h3>3.1 Company Devices</h3>
<p>IT issues every employee a company laptop and, where the role requires it, a company phone.
They remain company property and are managed centrally.</p>
<h4>3.1.1 Laptops</h4>
<ul>
  <li>Full-disk encryption is always on and may not be disabled.</li>
  <li>The screen locks after 5 minutes of inactivity.</li>
  <li>Operating system updates are installed within 14 days of release; critical security
  updates within 72 hours.</li>
</ul>
<h4>3.1.2 Mobile Phones</h4>
<p>Company phones are enrolled in mobile device management, use a six-digit PIN or biometric
unlock, and can be wiped remotely if lost.</p>
<h3>3.2 Personal Devices</h3>
<p>You may use a personal phone for email and chat if it is enrolled in the managed work
profile. Personal laptops may only be used for web applications that do not store data
locally, and never for Confidential or Restricted data.</p>
<h3>3.3 Which Data May Be Used on Which Device</h3>
<table>
  <caption>Permitted data by device type and classification</caption>
  <thead>
    <tr>
      <th rowspan="2">Device type</th>
      <th rowspan="2">Managed by</th>
      <th colspan="4">Data classification</th>
    </tr>
    <tr>
      <th>Public</th>
      <th>Internal</th>
      <th>Confidential</th>
      <th>Restricted</th>
    </tr>
  </thead>
  <tbody>
    <tr>
      <th rowspan="2">Laptop</th>
      <td>Fernhill IT (company laptop)</td>
      <td>Allowed</td>
      <td>Allowed</td>
      <td>Allowed</td>
      <td>Client vault only</td>
    </tr>
    <tr>
      <td>Employee (personal laptop)</td>
      <td>Allowed</td>
      <td>Web applications only</td>
      <td colspan="2">Not allowed</td>
    </tr>
    <tr>
      <th rowspan="2">Mobile phone</th>
      <td>Fernhill IT (company phone)</td>
      <td>Allowed</td>
      <td>Allowed</td>
      <td>Email and chat only</td>
      <td>Not allowed</td>
    </tr>
    <tr>
      <td>Employee (managed work profile)</td>
      <td>Allowed</td>
      <td>Allowed</td>
      <td colspan="2">Not allowed</td>
    </tr>
    <tr>
      <th>USB storage</th>
      <td>Any</td>
      <td>Allowed</td>
      <td colspan="3">Not allowed</td>
    </tr>
    <tr>
      <th>Client-provided device</th>
      <td>Client</td>
      <td colspan="4">Follow the client's own policy; never move data between clients</td>
    </tr>
  </tbody>
</table>

<h2>4. Accounts and Passwords</h2>
<ol>
  <li>Use your own account only; never share passwords or multi-factor codes.</li>
  <li>Passwords are at least 14 characters long and stored in the company password manager.
    <ol>
      <li>Use a passphrase of four or more random words for anything you must type.</li>
      <li>Never reuse a company password on another site.</li>
    </ol>
  </li>
  <li>Multi-factor authentication is required for every company system.</li>
  <li>Report a suspected compromise immediately and change the password.</li>
</ol>

<h2>5. Internet, Email and External Services</h2>
<p>Reasonable personal use of the internet and email is allowed outside client work, provided
it does not interfere with your job or break the law. Do not install browser extensions that
are not on the approved list, and never paste Confidential or Restricted data into external
web services, translation sites or file converters that are not approved by IT.</p>
<p>Treat unexpected attachments and links with suspicion, even from people you know. Use the
<em>Report phishing</em> button in the mail client; the security team reviews every report
within one business day.</p>

<h2>6. Monitoring and Privacy</h2>
<p>We monitor company systems to protect them, for example by scanning for malware and
logging access to client data. We do not read the content of your messages or browsing unless
there is a specific investigation approved by the Head of IT and the Data Protection Officer,
{DPO}, in line with local law.</p>

<h2>7. Lost Devices and Incidents</h2>
<p>Report a lost or stolen device to it-help@{DOMAIN} or +351 210 000 300 within one hour of
noticing, at any time of day. IT will lock and, if necessary, wipe the device. Report any other
suspected security incident to the security on-call engineer as described in the incident
response plan.</p>

<h2>8. Breaches of this Policy</h2>
<p>Breaching this policy may lead to the loss of access rights and to disciplinary action up to
and including dismissal. Deliberate misuse of client data may also be reported to the
client and to the authorities.</p>
</article>
</main>
<footer>
  <p>© 2026 {COMPANY} · Intranet · <a href="/privacy">Privacy notice</a> ·
  <a href="/cookies">Cookie settings</a></p>
</footer>
<script>
  document.querySelectorAll("nav a").forEach(function (link) {{
    if (link.getAttribute("href") === "/it") {{ link.setAttribute("aria-current", "page"); }}
  }});
</script>
</body>
</html>
"""
    return write_text(path, text)


# ---------------------------------------------------------------------------
# Corpus assembly
# ---------------------------------------------------------------------------

SECURITY_ACL: dict[str, Any] = {"groups": ["security"]}
COMPENSATION_ACL: dict[str, Any] = {"groups": ["hr", "people-leads"]}

BUILDERS: tuple[tuple[str, Callable[[Path], Path]], ...] = (
    ("handbook/employee-handbook.pdf", build_handbook_pdf),
    ("handbook/travel-and-expenses.docx", build_travel_docx),
    ("handbook/benefits-overview.pptx", build_benefits_pptx),
    ("finance/budget-2026.xlsx", build_budget_xlsx),
    ("engineering/oncall-runbook.md", build_oncall_runbook_md),
    ("it/acceptable-use-policy.html", build_acceptable_use_html),
    ("security/incident-response-plan.docx", build_incident_response_docx),
    ("security/vendor-risk-register.xlsx", build_vendor_register_xlsx),
    ("hr/compensation-bands.xlsx", build_compensation_xlsx),
    ("hr/parental-leave-faq.md", build_parental_leave_faq_md),
)


def build_corpus(out: Path) -> list[Path]:
    """Write every corpus file under ``out`` and return their paths."""
    written = [builder(out / relative) for relative, builder in BUILDERS]
    written.append(write_json(out / "security" / "_access.json", SECURITY_ACL))
    written.append(write_json(out / "hr" / "compensation-bands.xlsx.meta.json", COMPENSATION_ACL))
    return sorted(written)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Generate the Lorehouse sample corpus.")
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help=f"output directory (default: {DEFAULT_OUT.relative_to(REPO_ROOT)})",
    )
    args = parser.parse_args(argv)
    out: Path = args.out
    total = 0
    for path in build_corpus(out):
        size = path.stat().st_size
        total += size
        print(f"{size:>9,}  {path.relative_to(out).as_posix()}")
    print(f"{total:>9,}  total")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
