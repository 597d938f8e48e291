"""Citations and drafts: an answer's text with its [n] markers, and the excerpts shown with it.

Every answer, the LLM's or the extractive one, is a DraftAnswer citing the context passages
by number; a source's own reference markers are taken out of a passage before it is quoted,
so they are never read as Lorehouse's citations.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from lorehouse.agents.assertion import LeadSignals
from lorehouse.search.hits import ChunkView
from lorehouse.text import chunk_body

#: A citation of a context passage as answers write it: "[3]".
CITATION = re.compile(r"\[(\d{1,3})\]")


#: A reference-style link, "the [Checkov website][2]": its "[2]" is the source's link label,
#: and quoted as is it read as a citation of context passage 2. Not after a word or a
#: bracket, where "[1][2]" indexes something ("grid[1][2]").
_REFERENCE_LINK = re.compile(r"(?<![\w\]])\[([^\[\]\n]+)\]\[[^\[\]\n]*\]")


#: A source's own reference markers: Wikipedia's "[106]", "[a]", "[citation needed]",
#: "[self-published source?]", a paper's "[3, 4]" or "[12-14]". Left in a passage they read as
#: Lorehouse's citations: an extractive answer quoting "... Surface Hub. [106]" showed a
#: citation [106] of no passage, and renumbering by use made the source's "[2]" citation [1].
_SOURCE_MARKER = re.compile(
    r"[ \t]*\[(?:\d{1,3}(?:\s*[,\u2013-]\s*\d{1,3})*|[a-z]|citation needed"
    r"|[^\[\]\n]{1,40}\?[*_ ]*)\]"
    # The same marker kept as a link to its footnote by Markdown exports of a wiki page:
    # "[[ 30 ]](#cite_note-30)".
    r"|[ \t]*\[\[[^\[\]\n]{1,40}\]\]\(#cite[^)\s]*\)"
)


@dataclass
class DraftExcerpt:
    """The sentences of one cited passage a reader checks the answer against.

    `sentences` run in the passage's order around the ones the answer drew from this
    passage, whose indexes are in `marked`; of those, `supports` holds the ones a reader is
    told support the answer (the lead and what states its facts, or without an asserted
    lead each passage's best sentence); `heading` is the section they sit under.
    """

    passage: int
    heading: tuple[str, ...]
    sentences: list[str]
    marked: list[int]
    supports: list[int] = field(default_factory=list)


@dataclass
class DraftAnswer:
    """Answer text and the citation numbers it uses, with the context passage of each.

    `passages[i]` is the 1-based context passage that citation `cited[i]` refers to; left
    empty, a citation number is its passage number (as an LLM writes them).
    """

    text: str
    cited: list[int]
    answerable: bool
    passages: list[int] = field(default_factory=list)
    #: The supporting excerpts, one per cited passage, in citation order (extractive answers;
    #: an LLM's are found afterwards from the sentences it cites).
    excerpts: list[DraftExcerpt] = field(default_factory=list)
    #: Whether the text states a lead as the answer; False for "the documents don't state
    #: this directly", which shows the closest passages instead (`lorehouse.agents.assertion`).
    asserted: bool = True
    #: What the extractive lead's assertion was decided on, and the chance it answers.
    signals: LeadSignals | None = None
    confidence: float | None = None
    #: Why the lead was not asserted, for the trace.
    unasserted_because: str = ""

    def cited_passages(self) -> list[tuple[int, int]]:
        """(citation number, context passage number) of each citation, in order of use."""
        return list(zip(self.cited, self.passages or self.cited, strict=True))


def numbered_by_use(draft: DraftAnswer) -> DraftAnswer:
    """The draft with its citations renumbered 1..n in the order its text first uses them.

    A reader meets [1] first, then [2]; the passage each number stands for is kept in
    `passages`, so the citation list still points at the right chunk.
    """
    renumbered = {passage: number for number, passage in enumerate(draft.cited, start=1)}
    text = CITATION.sub(
        lambda match: f"[{renumbered.get(int(match.group(1)), int(match.group(1)))}]", draft.text
    )
    return replace(draft, text=text, cited=list(renumbered.values()), passages=list(renumbered))


def without_source_markers(text: str) -> str:
    """The text without the source's own bracketed reference markers, so that every [n] an
    answer shows is a citation of a context passage.

    A bracket glued to a word or to another bracket is an index ("items[0]", "grid[1][2]"),
    not a marker, and is kept; a run of markers ("... Redmond. [2][3]") goes one by one.
    """

    def drop(match: re.Match[str]) -> str:
        before = text[match.start() - 1] if match.start() else ""
        marker = match.group(0)
        glued = marker.startswith("[") and (before.isalnum() or before in "]_")
        return marker if glued and "](#cite" not in marker else ""

    while True:
        cleaned = _SOURCE_MARKER.sub(drop, text)
        if cleaned == text:
            return cleaned
        text = cleaned


def source_text(hit: ChunkView) -> str:
    """A passage's own Markdown, as both the LLM's context and extractive answers read it:
    no breadcrumb line, and a reference-style link as its text."""
    return _REFERENCE_LINK.sub(r"\1", chunk_body(hit.text_chat, hit.heading_path))


def citations_in(text: str) -> list[int]:
    """Cited passage numbers in order of first appearance."""
    return list(dict.fromkeys(int(n) for n in CITATION.findall(text)))
