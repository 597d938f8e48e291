"""Chunking on real documents: limits by the real tokenizer, heading paths, table headers."""

from __future__ import annotations

import pytest

from lorehouse.chunking import Chunk, Chunker
from lorehouse.embedding.minilm import TokenCounter, default_token_counter
from lorehouse.language import shared_detector
from lorehouse.models import ParsedDocument
from lorehouse.text import BREADCRUMB_SEPARATOR, plain_text
from tests.conftest import DOCS_CORPUS, parsed_markdown

LIMIT = 256


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return default_token_counter()


@pytest.fixture(scope="module")
def chunker(counter: TokenCounter) -> Chunker:
    return Chunker(LIMIT, counter.count)


@pytest.fixture(scope="module")
def handbook() -> ParsedDocument:
    return parsed_markdown(DOCS_CORPUS / "docx" / "handbook-872p.docx")


@pytest.fixture(scope="module")
def handbook_chunks(chunker: Chunker, handbook: ParsedDocument) -> list[Chunk]:
    return chunker.chunk(handbook, acl=["staff"])


def _body(chunk: Chunk) -> str:
    breadcrumb = BREADCRUMB_SEPARATOR.join(chunk.heading_path)
    return chunk.text_chat.removeprefix(f"{breadcrumb}\n\n") if breadcrumb else chunk.text_chat


@pytest.mark.corpus
def test_every_handbook_chunk_starts_with_its_heading_path(handbook_chunks: list[Chunk]) -> None:
    assert len(handbook_chunks) > 500
    with_path = [c for c in handbook_chunks if c.heading_path]
    assert len(with_path) / len(handbook_chunks) > 0.99
    for chunk in with_path:
        breadcrumb = BREADCRUMB_SEPARATOR.join(chunk.heading_path)
        assert chunk.text_embed.startswith(breadcrumb + "\n")
        assert chunk.text_chat.startswith(breadcrumb + "\n\n")
    assert {c.acl for c in handbook_chunks} == {("staff",)}


@pytest.mark.corpus
def test_no_chunk_exceeds_the_limit_by_the_real_tokenizer(
    handbook_chunks: list[Chunk], counter: TokenCounter
) -> None:
    counts = counter.count_many([c.text_embed for c in handbook_chunks])
    assert max(counts) <= LIMIT
    assert counts == [c.token_count for c in handbook_chunks]
    # Merging small neighbours keeps chunks reasonably full rather than one per paragraph.
    assert sum(counts) / len(counts) > LIMIT / 3


@pytest.mark.corpus
def test_chunk_ids_are_identical_across_runs(
    chunker: Chunker, handbook: ParsedDocument, handbook_chunks: list[Chunk]
) -> None:
    again = Chunker(LIMIT, default_token_counter().count).chunk(handbook, acl=["staff"])
    assert [c.chunk_id for c in again] == [c.chunk_id for c in handbook_chunks]
    assert len({c.chunk_id for c in handbook_chunks}) == len(handbook_chunks)


@pytest.mark.corpus
def test_positions_restore_document_order(
    handbook: ParsedDocument, handbook_chunks: list[Chunk]
) -> None:
    assert [c.position for c in handbook_chunks] == list(range(len(handbook_chunks)))
    cursor = 0
    for chunk in handbook_chunks:
        last_line = _body(chunk).splitlines()[-1]
        found = handbook.markdown.find(last_line, cursor)
        assert found >= cursor, f"chunk {chunk.position} is out of order: {last_line[:60]!r}"
        cursor = found
    pages = [c.page_start for c in handbook_chunks if c.page_start is not None]
    assert pages == sorted(pages)
    assert pages[-1] == max(span.page for span in handbook.page_map)


@pytest.mark.corpus
@pytest.mark.parametrize(
    ("relative", "limit"),
    [("pdf/2305.03393v1-pg9.pdf", 128), ("pdf/redp5110_sampled.pdf", LIMIT)],
)
def test_a_split_table_repeats_its_header_in_every_chunk(
    relative: str, limit: int, counter: TokenCounter
) -> None:
    document = parsed_markdown(DOCS_CORPUS / relative)
    chunks = Chunker(limit, counter.count).chunk(document)
    tables = [c for c in chunks if c.is_table]
    by_header: dict[str, list[Chunk]] = {}
    for chunk in tables:
        header = _body(chunk).splitlines()[0]
        by_header.setdefault(header, []).append(chunk)
    header, parts = max(by_header.items(), key=lambda item: len(item[1]))
    assert len(parts) >= 2, "expected a table long enough to be split"
    body_rows: list[str] = []
    for part in parts:
        lines = _body(part).splitlines()
        assert lines[0] == header
        assert set(lines[1].replace("|", "").split()) == {"---"}
        body_rows += lines[2:]
        assert part.token_count <= limit
    # Every row of the source table is in exactly one part: no row is cut or lost.
    source_rows = [row for row in body_rows if row in document.markdown.splitlines()]
    assert source_rows == body_rows
    assert len(set(body_rows)) == len(body_rows)


def test_plain_text_strips_styling_and_shortens_urls() -> None:
    markdown = (
        "## Travel\n\nBook via **[the portal](https://travel.example.com/book?id=7)** or "
        "see https://www.fernhill-analytics.example/policies/travel.pdf and `code`.\n\n"
        "| City | Rate |\n| --- | --- |\n| Toronto | CAD 275 |"
    )
    assert plain_text(markdown) == (
        "Travel\nBook via the portal (travel.example.com) or see fernhill-analytics.example "
        "and code.\nCity | Rate\nToronto | CAD 275"
    )


def test_an_underscore_inside_a_word_is_part_of_it() -> None:
    """ "QIBM_DB_SECADM" is one identifier: read as emphasis it became "QIBMDBSECADM", which
    neither a search for it nor an answer quoting it could match."""
    markdown = "Grant QIBM_DB_SECADM to the _security_ officer, and __always__ run my_job.py."
    assert plain_text(markdown) == (
        "Grant QIBM_DB_SECADM to the security officer, and always run my_job.py."
    )
    # Escaped, as exports write them, they read as the characters a renderer shows.
    assert plain_text(r"Grant QIBM\_DB\_SECADM and \*USE, not \*ALL\*.") == (
        "Grant QIBM_DB_SECADM and *USE, not *ALL*."
    )


def test_an_over_long_sentence_is_cut_between_words_only(counter: TokenCounter) -> None:
    sentence = "The policy " + "applies to every employee " * 120 + "without exception."
    document = ParsedDocument(
        doc_id="d1",
        content_sha256="0" * 64,
        markdown=f"# Scope\n\nShort first sentence. {sentence} Short last sentence.\n",
        page_map=[],
        parser="test",
        parser_version="1",
        parse_ms=0.0,
    )
    chunks = Chunker(64, counter.count).chunk(document)
    assert all(c.token_count <= 64 for c in chunks)
    words = " ".join(_body(c) for c in chunks).split()
    assert words == f"Short first sentence. {sentence} Short last sentence.".split()
    assert _body(chunks[0]).startswith("Short first sentence.")


def test_a_run_of_characters_without_a_break_is_split_into_bounded_chunks_losing_nothing(
    counter: TokenCounter,
) -> None:
    # WordPiece reads any word over 100 characters as one [UNK]; a pasted blob must still
    # become chunks an API embedder or an LLM prompt can take.
    blob = "QUJD" * 250_000  # a megabyte of base64, no whitespace
    document = ParsedDocument(
        doc_id="d1",
        content_sha256="0" * 64,
        markdown=f"# Attachment\n\nThe key follows. {blob}\n",
        page_map=[],
        parser="test",
        parser_version="1",
        parse_ms=0.0,
    )
    chunks = Chunker(LIMIT, counter.count).chunk(document)
    assert max(len(c.text_chat) for c in chunks) <= 3000
    assert all(c.token_count <= LIMIT for c in chunks)
    assert "".join(_body(c).replace(" ", "") for c in chunks) == f"Thekeyfollows.{blob}"


def test_entities_read_as_characters_and_a_spacer_row_makes_no_chunk(
    counter: TokenCounter,
) -> None:
    """A row of `&nbsp;` spacers (a layout trick in Markdown pages) is blank to a reader:
    no chunk of nothing, and an entity in prose is embedded as the character it stands for."""
    document = ParsedDocument(
        doc_id="d1",
        content_sha256="0" * 64,
        markdown=(
            "# Portal\n\nAT&amp;T customers ask for the report first.\n\n"
            "## Layout\n\n" + "&nbsp;" * 80 + "\n"
        ),
        page_map=[],
        parser="test",
        parser_version="1",
        parse_ms=0.0,
    )
    chunks = Chunker(LIMIT, counter.count).chunk(document)
    assert [list(c.heading_path) for c in chunks] == [["Portal"]]
    assert "AT&T customers ask for the report first." in chunks[0].text_embed
    assert "&amp;" in chunks[0].text_chat  # the Markdown shown to readers is left as written


def _document(markdown: str) -> ParsedDocument:
    return ParsedDocument(
        doc_id="d1",
        content_sha256="0" * 64,
        markdown=markdown,
        page_map=[],
        parser="test",
        parser_version="1",
        parse_ms=0.0,
    )


def test_each_chunk_carries_its_language_and_a_short_one_its_documents(
    counter: TokenCounter,
) -> None:
    """A German document with an English section: the section is English, a lone command
    block too short to tell is German like its document."""
    german = (
        "Die Paketverwaltung installiert Programme aus den konfigurierten Paketquellen und "
        "löst dabei alle Abhängigkeiten auf. "
    ) * 8
    english = "The package manager installs programs from the configured sources. " * 8
    document = _document(
        f"# Pakete\n\n{german}\n\n# Commands\n\n```\napt-get -y\n```\n\n# Summary\n\n{english}\n"
    )
    chunker = Chunker(64, counter.count, shared_detector(("en", "de")))
    chunks = chunker.chunk(document)
    languages = {chunk.heading_path[0]: chunk.language for chunk in chunks}
    assert languages == {"Pakete": "de", "Commands": "de", "Summary": "en"}
    # Without a detector chunks carry no language; a new set of languages cuts again.
    assert {c.language for c in Chunker(64, counter.count).chunk(document)} == {None}
    assert chunker.version != Chunker(64, counter.count, shared_detector(("en",))).version
