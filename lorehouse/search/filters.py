"""What a caller may narrow a search to, and what it may see: the SQL predicates every leg of
a search, and every read of its rows, runs under.

The access predicate is its own function so that nothing reads chunks without it: a search,
a preview, a citation and the BM25 statistics of a caller's scope all start from the same
clause.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pydantic import BaseModel, Field

from lorehouse.models import PUBLIC_GROUP
from lorehouse.search.tables import sql_in, sql_string

_GROUP_NAME = re.compile(r"^[A-Za-z0-9_.:@-]{1,128}$")


class SearchFilters(BaseModel):
    """Restrictions a caller may add; all of them are evaluated inside the store."""

    doc_ids: list[str] | None = Field(default=None, max_length=1000)
    page_from: int | None = Field(default=None, ge=1, description="First page, inclusive.")
    page_to: int | None = Field(default=None, ge=1, description="Last page, inclusive.")
    file_types: list[str] | None = Field(default=None, max_length=20)
    is_table: bool | None = None
    #: Chunks in these languages (ISO 639-1), as told when the chunk was cut.
    languages: list[str] | None = Field(default=None, max_length=20)

    def clauses(self) -> list[str]:
        """SQL predicates for LanceDB, with every value quoted."""
        clauses = []
        if self.doc_ids is not None:
            clauses.append(sql_in("doc_id", self.doc_ids))
        if self.file_types is not None:
            clauses.append(sql_in("file_type", self.file_types))
        # A chunk overlapping the range counts: a table starting on page 4 and ending on 5 is
        # on page 5.
        if self.page_from is not None:
            clauses.append(f"page_end >= {int(self.page_from)}")
        if self.page_to is not None:
            clauses.append(f"page_start <= {int(self.page_to)}")
        if self.is_table is not None:
            clauses.append(f"is_table = {str(self.is_table).lower()}")
        if self.languages is not None:
            clauses.append(sql_in("language", self.languages))
        return clauses


def access_clause(caller_groups: Sequence[str]) -> str:
    """Public chunks, plus restricted ones sharing a group with the caller.

    Every caller holds PUBLIC_GROUP, the group of public rows, so the clause is one
    `array_has_any` the `acl` LABEL_LIST index answers.
    """
    groups = dict.fromkeys([PUBLIC_GROUP, *(g for g in caller_groups if _GROUP_NAME.match(g))])
    listed = ", ".join(sql_string(g) for g in groups)
    return f"array_has_any(acl, [{listed}])"


def where_clause(filters: SearchFilters | None, caller_groups: Sequence[str]) -> str:
    """The full predicate of a search: access control always, the caller's filters if any.

    Without filters it is the access clause itself (one function call, which needs no
    parentheses): a snapshot then holds one mask and one set of BM25 statistics a caller,
    for the search's `where` and its BM25 scope alike, not two of the same rows."""
    access = access_clause(caller_groups)
    clauses = [access, *(filters.clauses() if filters else [])]
    return access if len(clauses) == 1 else " AND ".join(f"({c})" for c in clauses)
