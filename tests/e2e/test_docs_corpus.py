"""The whole public multi-format corpus through the Dagster assets: nothing is lost."""

from __future__ import annotations

import pytest

from lorehouse.stores import DocumentStatus, DuckDBStore
from tests.conftest import DOCS_CORPUS
from tests.dagster.conftest import materialize_all

pytestmark = [pytest.mark.corpus, pytest.mark.slow]


@pytest.fixture(scope="module")
def statuses(tmp_path_factory: pytest.TempPathFactory) -> dict[str, DocumentStatus]:
    data_dir = tmp_path_factory.mktemp("docs-corpus")
    # A generous timeout: this test pins outcomes, not speed, and the 619-page PDF must not
    # turn into a timeout on a busy machine.
    result = materialize_all(DOCS_CORPUS, data_dir, parse_timeout_seconds=900)
    assert result.success
    return {s.rel_path: s for s in DuckDBStore(data_dir / "lorehouse.duckdb").document_statuses()}


def _corpus_files() -> list[str]:
    files = []
    for path in sorted(DOCS_CORPUS.rglob("*")):
        rel_path = path.relative_to(DOCS_CORPUS).as_posix()
        if path.is_file() and not rel_path.startswith("expected/") and rel_path != "SOURCES.md":
            files.append(rel_path)
    return files


def test_every_file_ends_parsed_or_failed_with_a_reason(
    statuses: dict[str, DocumentStatus],
) -> None:
    files = _corpus_files()
    assert len(files) >= 80
    missing = [f for f in files if f not in statuses]
    assert not missing
    for rel_path in files:
        status = statuses[rel_path]
        assert status.status in {"parsed", "failed"}, rel_path
        if status.status == "failed":
            assert status.reason and status.detail, rel_path


def test_edge_case_outcomes_are_pinned(statuses: dict[str, DocumentStatus]) -> None:
    failed = {
        p: s.reason
        for p, s in statuses.items()
        if s.status == "failed" and not p.startswith("expected/")
    }
    assert failed == {
        "pdf/edge-cases/password.pdf": "encrypted",
        "pdf/edge-cases/2206.01062_pg3.pdf": "encrypted",
        "xlsx/edge-cases/password_protected.xlsx": "encrypted",
        "pdf/edge-cases/loremipsum-flat.pdf": "no_text_layer",
        "pdf/edge-cases/MEDRPT-2024-PAT-3847_medical_report_scan.pdf": "no_text_layer",
        "pdf/single_table.pdf": "no_text_layer",
        "pdf/table-multi-row-column-cells.pdf": "no_text_layer",
        "xlsx/edge-cases/empty.xlsx": "empty",
        "docx/edge-cases/Strict.docx": "unsupported_type",
    }
    assert statuses["pdf/edge-cases/copy-protected.pdf"].status == "parsed"


def test_large_documents_parse(statuses: dict[str, DocumentStatus]) -> None:
    for rel_path in ("pdf/DA-619p.pdf", "docx/handbook-872p.docx", "html/example-10k.html"):
        assert statuses[rel_path].status == "parsed", rel_path
