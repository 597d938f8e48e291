"""An S3 prefix as the source, against a real S3-compatible HTTP server on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from assets.resources import build_resources
from lorehouse.settings import Settings
from lorehouse.stores import DuckDBStore
from lorehouse.stores.lance_index import ChunkIndex
from lorehouse.wiring import lance_storage_options
from pipelines.sensors import source_change_sensor
from tests.conftest import materialize_everything
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
    raw = DuckDBStore(data_dir / "lorehouse.duckdb").table("documents_raw", ["source_uri"])
    assert set(raw["source_uri"]) >= {"s3://docs/corpus/finance/budget-2026.xlsx"}

    client.delete_object(Bucket="docs", Key="corpus/finance/budget-2026.xlsx")
    rerun = materialize_all(
        "s3://docs/corpus",
        data_dir,
        s3_endpoint_url=s3_endpoint,
        s3_region="eu-west-1",
    )
    assert metadata_of(rerun, "raw_documents")["removed"] == 1
    assert metadata_of(rerun, "parsed_documents")["parsed_this_run"] == 0


def test_reindex_with_source_and_lancedb_on_s3(
    s3_endpoint: str, sample_corpus: Path, data_dir: Path
) -> None:
    """The whole graph reads documents from and writes vectors to S3; a change seen by the
    sensor is reindexed, and a deleted object leaves the index on S3."""
    client = s3_bucket(s3_endpoint, "docs")
    client.create_bucket(
        Bucket="index", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"}
    )
    names = ["hr/parental-leave-faq.md", "engineering/oncall-runbook.md"]
    for rel_path in names:
        client.put_object(
            Bucket="docs", Key=f"corpus/{rel_path}", Body=(sample_corpus / rel_path).read_bytes()
        )
    on_s3 = {
        "s3_endpoint_url": s3_endpoint,
        "s3_region": "eu-west-1",
        "lancedb_uri": "s3://index/lancedb",
    }
    settings = Settings(source_uri="s3://docs/corpus", data_dir=data_dir, **on_s3)
    sensor_resources = build_resources(settings)

    def tick(cursor: str | None) -> dg.SensorResult | dg.SkipReason:
        with dg.build_sensor_context(cursor=cursor, resources=sensor_resources) as context:
            return source_change_sensor(Settings())(context)

    first = tick(None)
    assert isinstance(first, dg.SensorResult) and first.run_requests
    assert materialize_everything("s3://docs/corpus", data_dir, **on_s3, with_evals=False).success
    index = ChunkIndex(
        "s3://index/lancedb",
        storage_options=lance_storage_options("s3://index/lancedb", s3_endpoint, "eu-west-1"),
    )
    chunks = set(DuckDBStore(data_dir / "lorehouse.duckdb").table("chunks")["chunk_id"])
    assert set(index.stored_keys()) == chunks
    listed = client.list_objects_v2(Bucket="index", Prefix="lancedb/")
    assert listed["KeyCount"] > 0
    assert not (data_dir / "lancedb").exists()

    runbook = (sample_corpus / names[1]).read_text().replace("EUR 250", "EUR 275")
    client.put_object(Bucket="docs", Key=f"corpus/{names[1]}", Body=runbook.encode())
    client.delete_object(Bucket="docs", Key=f"corpus/{names[0]}")
    changed = tick(first.cursor)
    assert isinstance(changed, dg.SensorResult)
    assert changed.run_requests[0].tags["lorehouse/changed"] == "1"
    assert changed.run_requests[0].tags["lorehouse/removed"] == "1"
    rerun = materialize_everything("s3://docs/corpus", data_dir, **on_s3, with_evals=False)
    assert rerun.success
    embedded = metadata_of(rerun, "chunk_embeddings")
    assert embedded["embedded"] == 1
    stored = {row.doc_id for row in index.stored_keys().values()}
    assert stored == set(DuckDBStore(data_dir / "lorehouse.duckdb").table("documents")["doc_id"])
    texts = index.rows("true", ["text_embed"], limit=100)
    assert any("EUR 275" in row["text_embed"] for row in texts)
    assert not any("Parental Leave" in row["text_embed"] for row in texts)
    assert isinstance(tick(changed.cursor), dg.SkipReason)
