"""Hierarchical, table-aware chunking of parsed Markdown.

Retrieval quality depends on chunks that stand alone: a chunk must say where it sits (its
heading path travels with it), must not end mid-sentence, and a table fragment must still have
its header so "the 32,051 in row Base 256" keeps its column name. The Markdown is parsed into
an AST (markdown-it-py), cut at sections first, then at blocks (paragraphs, lists, tables,
code), then at sentences, then at words, only as deep as the token limit forces, and small
neighbours of one section are merged back up to the limit.

Tokens are counted with the embedding model's own tokenizer on `text_embed`, the exact text
that is embedded, so no chunk is silently truncated by the model. WordPiece tokenization is
whitespace-delimited, so token counts of whitespace-joined pieces add up exactly; the chunker
relies on that to merge without recounting. A chunk is also bounded in characters (see
`_MAX_CHARS_PER_TOKEN`), because WordPiece turns any over-long "word" into a single [UNK]: a
megabyte without a space would otherwise count as one token and travel, whole, to an API
embedder or into an LLM prompt.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from markdown_it import MarkdownIt
from markdown_it.token import Token
from segtok.segmenter import split_single

from lorehouse.language import LanguageDetector
from lorehouse.models import PageSpan, ParsedDocument
from lorehouse.text import (
    BREADCRUMB_SEPARATOR,
    plain_inline,
    plain_table_line,
    plain_text,
    table_cells,
)

CHUNKER_VERSION = "4"
# The embedding model adds [CLS] and [SEP] to every input.
_SPECIAL_TOKENS = 2
# Text is counted as at least one token per this many characters. Prose, code and tables run
# at 2-6 characters per WordPiece token, so only runs of characters without a break (base64,
# a pasted binary, a minified file) are affected; a 256-token chunk holds at most 2,560.
_MAX_CHARS_PER_TOKEN = 10

TokenCounter = Callable[[str], int]


@dataclass(frozen=True)
class Chunk:
    """One retrievable piece of a document, with two texts: plain text to embed and Markdown
    to show and cite, each under its heading path."""

    chunk_id: str
    doc_id: str
    position: int
    heading_path: tuple[str, ...]
    text_embed: str
    text_chat: str
    page_start: int | None
    page_end: int | None
    is_table: bool
    token_count: int
    acl: tuple[str, ...]
    #: ISO 639-1 code, told among the deployment's languages; a chunk too short to tell (a
    #: heading, a command, a table of numbers) has its document's. None: not told.
    language: str | None = None


@dataclass
class _Piece:
    """A run of the document's Markdown that is kept whole, with its plain-text token cost."""

    markdown: str
    plain: str
    start: int
    end: int
    tokens: int
    is_table: bool = False


@dataclass
class _Section:
    heading_path: tuple[str, ...]
    blocks: list[tuple[Token, int, int]] = field(default_factory=list)


class Chunker:
    """Splits parsed documents into chunks of at most `max_tokens` embedding-model tokens."""

    def __init__(
        self,
        max_tokens: int,
        count_tokens: TokenCounter,
        detector: LanguageDetector | None = None,
    ) -> None:
        """`detector` tells each chunk's language (None: chunks carry none), which BM25's
        analyzer and the `languages` search filter read."""
        if max_tokens < 32:
            raise ValueError("max_tokens below 32 leaves no room for a heading path and text")
        self.max_tokens = max_tokens
        self._count_with_specials = count_tokens
        self._detector = detector
        self._markdown = MarkdownIt("commonmark").enable("table")

    @property
    def version(self) -> str:
        """Recorded with every chunk: a new limit, chunker version or set of languages
        re-chunks everything."""
        languages = "+".join(self._detector.languages) if self._detector else "-"
        return f"{CHUNKER_VERSION}/max{self.max_tokens}/lang-{languages}"

    def chunk(self, document: ParsedDocument, acl: Sequence[str] = ()) -> list[Chunk]:
        """The document's chunks in reading order (positions 0..n-1)."""
        text = document.markdown
        line_starts = _line_offsets(text)
        detector = self._detector
        language = detector.detect(text) if detector else None
        chunks: list[Chunk] = []
        for section in self._sections(text, line_starts):
            breadcrumb = BREADCRUMB_SEPARATOR.join(section.heading_path)
            budget = self.max_tokens - _SPECIAL_TOKENS - self._tokens(breadcrumb)
            if budget < 16:  # a pathological heading path: keep the nearest headings only
                breadcrumb, budget = self._shortened_breadcrumb(section.heading_path)
            for group in self._groups(text, section, budget, line_starts):
                markdown = "\n\n".join(piece.markdown for piece in group)
                plain = "\n".join(piece.plain for piece in group)
                text_embed = f"{breadcrumb}\n{plain}" if breadcrumb else plain
                text_chat = f"{breadcrumb}\n\n{markdown}" if breadcrumb else markdown
                pages = _pages(document.page_map, group[0].start, group[-1].end)
                position = len(chunks)
                chunks.append(
                    Chunk(
                        chunk_id=_chunk_id(document.doc_id, position, text_chat),
                        doc_id=document.doc_id,
                        position=position,
                        heading_path=section.heading_path,
                        text_embed=text_embed,
                        text_chat=text_chat,
                        page_start=pages[0],
                        page_end=pages[1],
                        is_table=group[0].is_table,
                        token_count=_SPECIAL_TOKENS
                        + self._tokens(breadcrumb)
                        + sum(piece.tokens for piece in group),
                        acl=tuple(acl),
                        language=detector.detect(plain, language) if detector else None,
                    )
                )
        return chunks

    # -- structure -----------------------------------------------------------------------------

    def _sections(self, text: str, line_starts: list[int]) -> Iterable[_Section]:
        """Top-level blocks grouped under the heading path they sit beneath."""
        tokens = self._markdown.parse(text)
        path: list[tuple[int, str]] = []
        section = _Section(heading_path=())
        for index, token in enumerate(tokens):
            if token.level != 0 or token.nesting == -1 or token.map is None:
                continue
            if token.type == "heading_open":
                if section.blocks:
                    yield section
                level = int(token.tag[1])
                title = plain_inline(tokens[index + 1].content)
                path = [(lvl, name) for lvl, name in path if lvl < level] + [(level, title)]
                section = _Section(heading_path=tuple(name for _, name in path))
                continue
            if token.type == "hr":
                continue
            start = line_starts[token.map[0]]
            end = line_starts[token.map[1]] if token.map[1] < len(line_starts) else len(text)
            section.blocks.append((token, start, end))
        if section.blocks:
            yield section

    def _groups(
        self, text: str, section: _Section, budget: int, line_starts: list[int]
    ) -> list[list[_Piece]]:
        """Pieces of a section merged greedily up to the budget; tables never merge with prose."""
        groups: list[list[_Piece]] = []
        current: list[_Piece] = []
        used = 0
        for token, start, end in section.blocks:
            for piece in self._pieces(text, token, start, end, budget, line_starts):
                if not piece.plain.strip():  # markup alone ("&nbsp;" spacers): nothing to read
                    continue
                joinable = current and not piece.is_table and not current[-1].is_table
                if joinable and used + piece.tokens <= budget:
                    current.append(piece)
                    used += piece.tokens
                    continue
                if current:
                    groups.append(current)
                current, used = [piece], piece.tokens
        if current:
            groups.append(current)
        return groups

    def _pieces(
        self, text: str, token: Token, start: int, end: int, budget: int, line_starts: list[int]
    ) -> list[_Piece]:
        """A block as one piece when it fits, else cut at the next finer level."""
        raw = text[start:end].rstrip()
        end = start + len(raw)
        if not raw.strip():
            return []
        if token.type == "table_open":
            return self._table_pieces(raw, start, budget)
        piece = self._piece(raw, start)
        if piece.tokens <= budget:
            return [piece]
        if token.type in ("bullet_list_open", "ordered_list_open"):
            return self._list_pieces(text, start, end, budget)
        if token.type in ("fence", "code_block"):
            return self._line_pieces(raw, start, budget)
        return self._sentence_pieces(raw, start, budget)

    # -- splitting -----------------------------------------------------------------------------

    def _list_pieces(self, text: str, start: int, end: int, budget: int) -> list[_Piece]:
        """A long list cut between its top-level items (an item keeps its sub-items)."""
        raw = text[start:end]
        items = [m.start() for m in re.finditer(r"(?m)^(?:[-*+]|\d+[.)]) ", raw)]
        bounds = [*items, len(raw)] if items and items[0] == 0 else [0, *items, len(raw)]
        pieces: list[_Piece] = []
        for left, right in itertools.pairwise(bounds):
            item = raw[left:right].rstrip()
            if not item:
                continue
            piece = self._piece(item, start + left)
            if piece.tokens <= budget:
                pieces.append(piece)
            else:
                pieces.extend(self._sentence_pieces(item, start + left, budget))
        return self._merge(pieces, budget, joiner="\n")

    def _sentence_pieces(self, raw: str, start: int, budget: int) -> list[_Piece]:
        """Prose cut between sentences; only a sentence over the budget is cut between words."""
        pieces: list[_Piece] = []
        cursor = 0
        for sentence in split_single(raw):
            sentence = sentence.strip()
            if not sentence:
                continue
            offset = raw.find(sentence, cursor)
            offset = cursor if offset < 0 else offset
            cursor = offset + len(sentence)
            piece = self._piece(sentence, start + offset)
            if piece.tokens <= budget:
                pieces.append(piece)
            else:
                pieces.extend(self._word_pieces(sentence, start + offset, budget))
        return self._merge(pieces, budget, joiner=" ")

    def _line_pieces(self, raw: str, start: int, budget: int) -> list[_Piece]:
        """Code cut between lines (a fence is reopened in each piece)."""
        lines = raw.splitlines()
        fence = lines[0] if lines and lines[0].startswith(("```", "~~~")) else None
        body = lines[1:-1] if fence and len(lines) > 1 else lines
        pieces: list[_Piece] = []
        offset = 0
        for line in body:
            position = raw.find(line, offset)
            offset = max(offset, position + len(line))
            piece = self._piece(line, start + max(position, 0))
            if piece.tokens > budget:
                pieces.extend(self._word_pieces(line, piece.start, budget))
            elif line.strip():
                pieces.append(piece)
        merged = self._merge(pieces, budget, joiner="\n")
        if fence:
            for piece in merged:
                piece.markdown = f"{fence}\n{piece.markdown}\n{fence[:3]}"
        return merged

    def _word_pieces(self, raw: str, start: int, budget: int) -> list[_Piece]:
        """The last resort for one over-long sentence or cell: cut between words."""
        pieces: list[_Piece] = []
        for match in re.finditer(r"\S+", raw):
            piece = self._piece(match.group(), start + match.start())
            if piece.tokens > budget:  # a single "word" longer than the budget (a hash, a URL)
                pieces.extend(self._split_word(piece, budget))
            else:
                pieces.append(piece)
        return self._merge(pieces, budget, joiner=" ")

    def _split_word(self, piece: _Piece, budget: int) -> list[_Piece]:
        """An over-long "word" cut into consecutive runs that each fit, so none of it is lost.

        Each run is measured from at most `budget * _MAX_CHARS_PER_TOKEN` characters, so a
        megabyte-long word costs linear, not quadratic, tokenizing.
        """
        runs: list[_Piece] = []
        rest, start = piece.markdown, piece.start
        while rest:
            characters = min(len(rest), budget * _MAX_CHARS_PER_TOKEN)
            run = self._piece(rest[:characters], start)
            while run.tokens > budget and characters > 1:
                characters = max(1, characters * budget // (run.tokens + 1))
                run = self._piece(rest[:characters], start)
            runs.append(run)
            rest, start = rest[characters:], start + characters
        return runs

    def _table_pieces(self, raw: str, start: int, budget: int) -> list[_Piece]:
        """Row groups that each repeat the header; columns split only for a too-wide row."""
        lines = raw.splitlines()
        header, separator, rows = lines[0], lines[1] if len(lines) > 1 else "", lines[2:]
        head = self._piece(f"{header}\n{separator}", start)
        offsets = _offsets_of(lines, start)
        pieces: list[_Piece] = []
        group: list[int] = []

        def flush() -> None:
            if group:
                body = "\n".join(rows[i] for i in group)
                piece = self._piece(f"{header}\n{separator}\n{body}", offsets[group[0] + 2])
                piece.end = offsets[group[-1] + 2] + len(rows[group[-1]])
                piece.is_table = True
                pieces.append(piece)
                group.clear()

        if not rows:
            head.is_table = True
            if head.tokens <= budget:
                return [head]
            return self._wide_row_pieces(header, [], start, budget)
        used = head.tokens
        for index, row in enumerate(rows):
            cost = self._tokens(plain_table_line(row))
            if head.tokens + cost > budget:
                flush()
                used = head.tokens
                pieces.extend(self._wide_row_pieces(header, [row], offsets[index + 2], budget))
                continue
            if used + cost > budget:
                flush()
                used = head.tokens
            group.append(index)
            used += cost
        flush()
        return pieces

    def _wide_row_pieces(
        self, header: str, rows: list[str], start: int, budget: int
    ) -> list[_Piece]:
        """A row too wide for the budget: column groups, each keeping the first column."""
        header_cells = table_cells(header)
        row_cells = [table_cells(row) for row in rows]
        groups: list[list[int]] = []
        current = [0]
        for column in range(1, len(header_cells)):
            trial = [*current, column]
            too_wide = self._table_piece(header_cells, row_cells, trial, start).tokens > budget
            if too_wide and len(current) > 1:
                groups.append(current)
                current = [0, column]
            else:
                current = trial
        groups.append(current)
        pieces: list[_Piece] = []
        for columns in groups:
            piece = self._table_piece(header_cells, row_cells, columns, start)
            if piece.tokens <= budget:
                pieces.append(piece)
                continue
            for part in self._word_pieces(piece.plain, start, budget):  # one cell alone too big
                part.is_table = True
                pieces.append(part)
        return pieces

    def _table_piece(
        self, header: list[str], rows: list[list[str]], columns: list[int], start: int
    ) -> _Piece:
        def pick(cells: list[str]) -> str:
            return "| " + " | ".join(cells[c] if c < len(cells) else "" for c in columns) + " |"

        lines = [pick(header), "| " + " | ".join("---" for _ in columns) + " |"]
        lines += [pick(row) for row in rows]
        piece = self._piece("\n".join(lines), start)
        piece.is_table = True
        return piece

    # -- helpers -------------------------------------------------------------------------------

    def _merge(self, pieces: list[_Piece], budget: int, joiner: str) -> list[_Piece]:
        """Neighbouring pieces of one block joined back up to the budget."""
        merged: list[_Piece] = []
        for piece in pieces:
            last = merged[-1] if merged else None
            if last is not None and last.tokens + piece.tokens <= budget:
                last.markdown = f"{last.markdown}{joiner}{piece.markdown}"
                last.plain = f"{last.plain}{joiner}{piece.plain}"
                last.end = piece.end
                last.tokens += piece.tokens
            else:
                merged.append(_Piece(**vars(piece)))
        return merged

    def _piece(self, markdown: str, start: int) -> _Piece:
        plain = plain_text(markdown)
        return _Piece(
            markdown=markdown,
            plain=plain,
            start=start,
            end=start + len(markdown),
            tokens=self._tokens(plain),
        )

    def _tokens(self, text: str) -> int:
        """Tokens of a text without the model's two special tokens (which a chunk pays once).

        Never fewer than the character bound allows; the sum over pieces stays an upper
        bound of the joined text's count, so merging without recounting stays safe.
        """
        if not text:
            return 0
        counted = self._count_with_specials(text) - _SPECIAL_TOKENS
        return max(counted, len(text) // _MAX_CHARS_PER_TOKEN)

    def _shortened_breadcrumb(self, path: tuple[str, ...]) -> tuple[str, int]:
        for keep in range(len(path) - 1, -1, -1):
            breadcrumb = BREADCRUMB_SEPARATOR.join(path[len(path) - keep :])
            budget = self.max_tokens - _SPECIAL_TOKENS - self._tokens(breadcrumb)
            if budget >= self.max_tokens // 2:
                return breadcrumb, budget
        return "", self.max_tokens - _SPECIAL_TOKENS


# -- positions --------------------------------------------------------------------------------


def _line_offsets(text: str) -> list[int]:
    offsets = [0]
    for match in re.finditer("\n", text):
        offsets.append(match.end())
    return offsets


def _offsets_of(lines: list[str], start: int) -> list[int]:
    offsets = []
    position = start
    for line in lines:
        offsets.append(position)
        position += len(line) + 1
    return offsets


def _pages(page_map: Sequence[PageSpan], start: int, end: int) -> tuple[int | None, int | None]:
    """First and last page (slide, sheet) that the character range [start, end) touches."""
    pages = [
        span.page for span in page_map if span.start < max(end, start + 1) and span.end > start
    ]
    if not pages:
        return None, None
    return min(pages), max(pages)


def _chunk_id(doc_id: str, position: int, text_chat: str) -> str:
    digest = hashlib.sha256(f"{doc_id}\x1f{position}\x1f{text_chat}".encode()).hexdigest()
    return digest[:32]
