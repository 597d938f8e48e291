"""What a question's filters cover, in words, for an answer that had to look beyond them.

A person who filters a question to pages 2-4 of the handbook and gets an unrelated sentence
from those pages, stated as the answer, is misled twice: by the sentence and by the silence
about the rest of the corpus. When nothing within the filters can be asserted and the
unfiltered corpus answers, the answer says so first: "Pages 2-4 of employee-handbook.pdf do
not say. Elsewhere: ...".
"""

from __future__ import annotations

from collections.abc import Sequence

from lorehouse.search.bm25 import SNOWBALL_LANGUAGES
from lorehouse.search.filters import SearchFilters
from lorehouse.search.hits import SearchHit


def narrows(filters: SearchFilters | None) -> bool:
    """Whether `filters` restrict the search at all."""
    return filters is not None and any(value is not None for value in filters.model_dump().values())


def scope_not_saying(filters: SearchFilters, within: Sequence[SearchHit]) -> str:
    """ "Pages 2-4 of the PDF files do not say." for `filters`; `within` (the hits found
    inside them) names a single chosen document by its path."""
    plural = True
    if filters.doc_ids is not None:
        chosen = set(filters.doc_ids)
        paths = {hit.rel_path for hit in within if hit.doc_id in chosen}
        if len(filters.doc_ids) == 1 and len(paths) == 1:
            what, plural = paths.pop(), False
        else:
            count = len(filters.doc_ids)
            what = "the chosen document" if count == 1 else f"the {count} chosen documents"
            plural = count > 1
    elif filters.file_types is not None:
        kinds = ", ".join(kind.upper() for kind in filters.file_types)
        what = f"the {kinds} files"
    else:
        what = "the documents"
    if filters.languages is not None:
        what = f"{what} in {' or '.join(_language_name(code) for code in filters.languages)}"
    if filters.is_table is not None:
        what = f"the tables of {what}" if filters.is_table else f"the text outside tables of {what}"
        plural = True
    pages = _pages(filters)
    if pages:
        subject, plural = f"{pages} of {what}", pages.startswith("Pages")
    else:
        subject = what[0].upper() + what[1:] if what.startswith("the ") else what
    return f"{subject} {'do' if plural else 'does'} not say."


def _language_name(code: str) -> str:
    """'German' for 'de': the Snowball stemmer's name, which every told language has."""
    stemmer = SNOWBALL_LANGUAGES.get(code)
    return stemmer.capitalize() if stemmer else code


def _pages(filters: SearchFilters) -> str:
    first, last = filters.page_from, filters.page_to
    if first is not None and last is not None:
        return f"Page {first}" if first == last else f"Pages {first}-{last}"
    if first is not None:
        return f"Pages {first} onwards"
    if last is not None:
        return "Page 1" if last == 1 else f"Pages 1-{last}"
    return ""
