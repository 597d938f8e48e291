"""Materializing the first two stages: results, checks, and incremental reruns."""

from __future__ import annotations

import shutil
from pathlib import Path

from lorehouse.stores import DuckDBStore
from tests.dagster.conftest import materialize_all, metadata_of


def test_sample_corpus_materializes_with_all_checks_passing(
    sample_corpus: Path, data_dir: Path
) -> None:
    result = materialize_all(sample_corpus, data_dir)
    assert result.success
    evaluations = result.get_asset_check_evaluations()
    assert len(evaluations) == 4
    assert all(e.passed for e in evaluations), [e.check_name for e in evaluations if not e.passed]
    store = DuckDBStore(data_dir / "lorehouse.duckdb")
    statuses = {s.rel_path: s for s in store.document_statuses()}
    assert len(statuses) == 10
    assert all(s.status == "parsed" for s in statuses.values())
    assert statuses["security/incident-response-plan.docx"].acl_groups == ["security"]
    assert statuses["hr/compensation-bands.xlsx"].acl_groups == ["hr", "people-leads"]
    assert "security/_access.json" not in statuses
    meta = metadata_of(result, "parsed_documents")
    assert meta["parsed_this_run"] == 10
    assert "| pdf | 1 |" in meta["parsed_by_type"]


def test_rerun_parses_only_what_changed_and_forgets_removed_files(
    sample_corpus: Path, tmp_path: Path, data_dir: Path
) -> None:
    source = tmp_path / "source"
    shutil.copytree(sample_corpus, source)
    assert materialize_all(source, data_dir).success

    unchanged = materialize_all(source, data_dir)
    assert metadata_of(unchanged, "parsed_documents")["parsed_this_run"] == 0
    assert metadata_of(unchanged, "parsed_documents")["unchanged_skipped"] == 10

    faq = source / "hr/parental-leave-faq.md"
    faq.write_text(faq.read_text() + "\n\n## New question\n\nAdoption leave is 20 weeks.\n")
    (source / "engineering/oncall-runbook.md").unlink()
    changed = materialize_all(source, data_dir)
    assert metadata_of(changed, "raw_documents")["changed"] == 1
    assert metadata_of(changed, "raw_documents")["removed"] == 1
    assert metadata_of(changed, "parsed_documents")["parsed_this_run"] == 1

    store = DuckDBStore(data_dir / "lorehouse.duckdb")
    parsed = store.table("documents_parsed")
    assert len(parsed) == 9
    assert parsed["markdown"].str.contains("Adoption leave is 20 weeks").sum() == 1
    assert "engineering/oncall-runbook.md" not in {s.rel_path for s in store.document_statuses()}


def test_a_broken_file_is_recorded_and_the_run_goes_on(tmp_path: Path, data_dir: Path) -> None:
    source = tmp_path / "source"
    source.mkdir()
    (source / "good.md").write_text("# Good\n\nFine.\n")
    (source / "truncated.pdf").write_bytes(b"%PDF-1.7\n1 0 obj << /Type /Catalog")
    (source / "binary.md").write_bytes(bytes(range(256)) * 4)
    (source / "empty.docx").write_bytes(b"")
    result = materialize_all(source, data_dir)
    assert result.success
    statuses = {
        s.rel_path: s for s in DuckDBStore(data_dir / "lorehouse.duckdb").document_statuses()
    }
    assert statuses["good.md"].status == "parsed"
    assert (statuses["truncated.pdf"].status, statuses["truncated.pdf"].reason) == (
        "failed",
        "corrupt",
    )
    assert statuses["binary.md"].reason == "unsupported_type"
    assert statuses["empty.docx"].reason == "empty"
    accounted = next(
        e
        for e in result.get_asset_check_evaluations()
        if e.check_name == "every_document_accounted_for"
    )
    assert accounted.passed


def test_a_file_over_the_size_limit_fails_without_being_opened(
    tmp_path: Path, data_dir: Path
) -> None:
    source = tmp_path / "source"
    source.mkdir()
    (source / "small.md").write_text("# Small\n")
    (source / "large.md").write_text("# Large\n" + "word " * 2000)
    assert materialize_all(source, data_dir, max_file_bytes=1000).success
    statuses = {
        s.rel_path: s for s in DuckDBStore(data_dir / "lorehouse.duckdb").document_statuses()
    }
    assert statuses["small.md"].status == "parsed"
    assert statuses["large.md"].reason == "too_large"
