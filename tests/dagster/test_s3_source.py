"""An S3 prefix as the source, against a real S3-compatible HTTP server on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path

from lorehouse.stores import DuckDBStore
from tests.dagster.conftest import materialize_all, metadata_of, s3_bucket


def test_s3_prefix_is_inventoried_and_parsed_with_acls(
    s3_endpoint: str, sample_corpus: Path, data_dir: Path
) -> None:
    client = s3_bucket(s3_endpoint, "docs")
    for rel_path in (
        "hr/parental-leave-faq.md",
        "security/_access.json",
        "security/incident-response-plan.docx",
        "finance/budget-2026.xlsx",
    ):
        client.put_object(
            Bucket="docs", Key=f"corpus/{rel_path}", Body=(sample_corpus / rel_path).read_bytes()
        )
    client.put_object(Bucket="docs", Key="elsewhere/ignored.md", Body=b"# Not in the prefix")

    result = materialize_all(
        "s3://docs/corpus",
        data_dir,
        s3_endpoint_url=s3_endpoint,
        s3_region="eu-west-1",
    )
    assert result.success
    assert metadata_of(result, "raw_documents")["dagster/row_count"] == 3
    statuses = {
        s.rel_path: s for s in DuckDBStore(data_dir / "lorehouse.duckdb").document_statuses()
    }
    assert set(statuses) == {
        "hr/parental-leave-faq.md",
        "security/incident-response-plan.docx",
        "finance/budget-2026.xlsx",
    }
    assert all(s.status == "parsed" for s in statuses.values())
    assert statuses["security/incident-response-plan.docx"].acl_groups == ["security"]
    raw = DuckDBStore(data_dir / "lorehouse.duckdb").raw_documents()
    assert {d.source_uri for d in raw.values()} >= {"s3://docs/corpus/finance/budget-2026.xlsx"}

    client.delete_object(Bucket="docs", Key="corpus/finance/budget-2026.xlsx")
    rerun = materialize_all(
        "s3://docs/corpus",
        data_dir,
        s3_endpoint_url=s3_endpoint,
        s3_region="eu-west-1",
    )
    assert metadata_of(rerun, "raw_documents")["removed"] == 1
    assert metadata_of(rerun, "parsed_documents")["parsed_this_run"] == 0
