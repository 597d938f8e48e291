"""source_change_sensor over a local folder and over a real S3-compatible server."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dagster as dg

from assets.resources import build_resources
from lorehouse.settings import Settings
from pipelines.definitions import defs
from pipelines.sensors import source_change_sensor
from tests.dagster.conftest import s3_bucket


def _tick(
    resources: dict[str, Any], cursor: str | None
) -> tuple[dg.SensorResult | dg.SkipReason, str | None]:
    """One sensor evaluation, as the daemon runs it; returns its result and the new cursor."""
    with dg.build_sensor_context(
        cursor=cursor,
        resources=resources,
        instance=dg.DagsterInstance.ephemeral(),
    ) as context:
        result = source_change_sensor(Settings())(context)
        new_cursor = result.cursor if isinstance(result, dg.SensorResult) else context.cursor
    return result, new_cursor


def _requested(result: object) -> dict[str, str]:
    assert isinstance(result, dg.SensorResult), result
    (request,) = result.run_requests
    assert request.job_name in (None, "inventory_job")
    return {k.removeprefix("lorehouse/"): v for k, v in request.tags.items()}


def _sensor_walkthrough(
    resources: dict[str, Any],
    write: Callable[[str, bytes], None],
    delete: Callable[[str], None],
    touch: Callable[[str], None],
) -> None:
    """First tick indexes everything; then exactly the changes request runs."""
    first, cursor = _tick(resources, None)
    assert _requested(first)["added"] == "3"

    unchanged, cursor = _tick(resources, cursor)
    assert isinstance(unchanged, dg.SkipReason)
    assert "no file added, changed or removed" in (unchanged.skip_message or "")

    touch("hr/leave.md")  # same bytes, new change token: hashed, but no run
    touched, cursor = _tick(resources, cursor)
    assert isinstance(touched, dg.SkipReason)

    write("hr/leave.md", b"# Leave\n\nTwenty-five days of paid leave.\n")
    changed, cursor = _tick(resources, cursor)
    assert _requested(changed) == {
        "trigger": "source_change",
        "added": "0",
        "changed": "1",
        "removed": "0",
    }

    write("it/laptops.md", b"# Laptops\n\nEvery engineer gets a laptop.\n")
    delete("finance/budget.md")
    both, cursor = _tick(resources, cursor)
    tags = _requested(both)
    assert (tags["added"], tags["changed"], tags["removed"]) == ("1", "0", "1")

    again, _ = _tick(resources, cursor)
    assert isinstance(again, dg.SkipReason)


FILES = {
    "hr/leave.md": b"# Leave\n\nTwenty days of paid leave.\n",
    "finance/budget.md": b"# Budget\n\nThe travel budget is 2,000 EUR.\n",
    "security/_access.json": b'{"groups": ["security"]}',
}


def test_the_sensor_follows_a_local_folder(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    for rel_path, data in FILES.items():
        (root / rel_path).parent.mkdir(parents=True, exist_ok=True)
        (root / rel_path).write_bytes(data)

    def write(rel_path: str, data: bytes) -> None:
        (root / rel_path).parent.mkdir(parents=True, exist_ok=True)
        (root / rel_path).write_bytes(data)
        stat = (root / rel_path).stat()  # a new mtime even within the clock's resolution
        os.utime(root / rel_path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))

    def touch(rel_path: str) -> None:
        stat = (root / rel_path).stat()
        os.utime(root / rel_path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 2_000_000_000))

    _sensor_walkthrough(
        build_resources(Settings(source_uri=str(root))),
        write,
        lambda rel_path: (root / rel_path).unlink(),
        touch,
    )


def test_the_sensor_follows_an_s3_prefix(s3_endpoint: str) -> None:
    client = s3_bucket(s3_endpoint, "docs")

    def write(rel_path: str, data: bytes) -> None:
        client.put_object(Bucket="docs", Key=f"corpus/{rel_path}", Body=data)

    def touch(rel_path: str) -> None:  # rewriting the same bytes keeps the ETag
        body = client.get_object(Bucket="docs", Key=f"corpus/{rel_path}")["Body"].read()
        write(rel_path, body)

    for rel_path, data in FILES.items():
        write(rel_path, data)
    client.put_object(Bucket="docs", Key="elsewhere/other.md", Body=b"# outside the prefix")
    resources = build_resources(
        Settings(source_uri="s3://docs/corpus", s3_endpoint_url=s3_endpoint, s3_region="eu-west-1")
    )
    _sensor_walkthrough(
        resources,
        write,
        lambda rel_path: client.delete_object(Bucket="docs", Key=f"corpus/{rel_path}"),
        touch,
    )


def test_the_code_location_has_the_sensor_and_the_nightly_schedule() -> None:
    sensor = defs.resolve_sensor_def("source_change_sensor")
    assert sensor.job_name == "inventory_job"
    schedule = defs.resolve_schedule_def("nightly_reindex_schedule")
    assert schedule.cron_schedule == Settings().reindex_cron


def test_the_upload_sensor_is_there_running_when_uploads_are_on(tmp_path: Path) -> None:
    from pipelines.definitions import build_definitions

    names = {sensor.name for sensor in defs.sensors or []}
    assert "upload_sensor" not in names
    with_uploads = build_definitions(
        Settings(source_uri=str(tmp_path), upload_folder="uploads", data_dir=tmp_path / "data")
    )
    sensor = with_uploads.resolve_sensor_def("upload_sensor")
    assert sensor.job_name == "inventory_job"
    assert sensor.default_status is dg.DefaultSensorStatus.RUNNING

    # Its tick lists the upload folder alone: a file elsewhere in the source is not its own.
    def tick(cursor: str | None) -> tuple[object, str | None]:
        with dg.build_sensor_context(
            cursor=cursor, instance=dg.DagsterInstance.ephemeral()
        ) as context:
            result = sensor(context)
            return result, result.cursor if isinstance(result, dg.SensorResult) else cursor

    _, cursor = tick(None)  # the folder's own access rule is new
    (tmp_path / "elsewhere.md").write_text("# Elsewhere\n")
    unchanged, cursor = tick(cursor)
    assert isinstance(unchanged, dg.SkipReason)
    uploads = tmp_path / "uploads" / "owner" / "0123456789abcdef"
    uploads.mkdir(parents=True)
    (uploads / "notes.md.meta.json").write_text('{"groups": ["lab"]}')
    (uploads / "notes.md").write_text("# Notes\n")
    uploaded, cursor = tick(cursor)
    assert isinstance(uploaded, dg.SensorResult)
    (request,) = uploaded.run_requests or []
    assert request.tags["lorehouse/trigger"] == "upload"
    assert request.tags["lorehouse/added"] == "2"  # the file and its sidecar
