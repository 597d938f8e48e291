"""What a question's filters cover, said in words when the answer comes from beyond them."""

from __future__ import annotations

from lorehouse.agents.scope import narrows, scope_not_saying
from lorehouse.search.filters import SearchFilters
from lorehouse.search.hits import SearchHit


def _hit(doc_id: str, rel_path: str) -> SearchHit:
    return SearchHit(
        rank=1,
        chunk_id=f"{doc_id}-0",
        doc_id=doc_id,
        title=None,
        rel_path=rel_path,
        source_uri=f"file:///{rel_path}",
        file_type="pdf",
        position=0,
        heading_path=[],
        page_start=2,
        page_end=2,
        is_table=False,
        text_chat="Hybrid work.",
        score=1.0,
        scores={},
        citation=f"/v1/chunks/{doc_id}-0",
    )


def test_no_filter_or_an_empty_one_narrows_nothing() -> None:
    assert not narrows(None)
    assert not narrows(SearchFilters())
    assert narrows(SearchFilters(is_table=False))


def test_the_scope_names_pages_documents_and_file_types() -> None:
    handbook = _hit("d1", "handbook/employee-handbook.pdf")
    one_document = SearchFilters(doc_ids=["d1"], page_from=2, page_to=4)
    assert scope_not_saying(one_document, [handbook]) == (
        "Pages 2-4 of handbook/employee-handbook.pdf do not say."
    )
    assert scope_not_saying(SearchFilters(doc_ids=["d1"]), [handbook]) == (
        "handbook/employee-handbook.pdf does not say."
    )
    # Nothing found inside the filters: the document is not named, never guessed.
    assert scope_not_saying(SearchFilters(doc_ids=["d1", "d2"]), []) == (
        "The 2 chosen documents do not say."
    )
    pdf_pages = SearchFilters(file_types=["pdf"], page_from=2, page_to=4)
    assert scope_not_saying(pdf_pages, []) == "Pages 2-4 of the PDF files do not say."
    assert scope_not_saying(SearchFilters(page_to=1), []) == "Page 1 of the documents does not say."
    assert scope_not_saying(SearchFilters(is_table=True), []) == (
        "The tables of the documents do not say."
    )
    assert scope_not_saying(SearchFilters(languages=["de", "fr"]), []) == (
        "The documents in German or French do not say."
    )
