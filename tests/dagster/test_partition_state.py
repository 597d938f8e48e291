"""Where each index partition stands, as `lorehouse partitions` and the partitions sensor say
it: published, failed with the error a person can act on, running, queued behind named runs,
or stalled; against the shipped run queue limits of pipelines/dagster.yaml."""

from __future__ import annotations

import json
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest
from typer.testing import CliRunner

from cli.main import app as cli
from lorehouse.settings import BUNDLED_SAMPLE_CORPUS, REPO_ROOT, Settings, get_settings
from lorehouse.stores.partitions import partition_keys
from lorehouse.wiring import Lorehouse
from pipelines.definitions import build_definitions
from pipelines.jobs import INDEX_JOB, LAST_PARTITIONED_ASSET, PARTITIONS_JOB, partitions_job
from pipelines.local_runs import workspace_job_origin
from pipelines.partition_state import PartitionState, partition_states
from pipelines.sensors import ChainCursor

KEYS = partition_keys(4)
STALL = 1800
#: What the corrupt store of a partition makes its first stage fail with.
NOT_A_DATABASE = "not a valid DuckDB database file"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A DAGSTER_HOME with the instance settings Lorehouse ships (its run queue limits)."""
    folder = tmp_path / "dagster_home"
    folder.mkdir()
    shutil.copy(REPO_ROOT / "pipelines" / "dagster.yaml", folder / "dagster.yaml")
    return folder


@pytest.fixture
def instance(home: Path) -> Iterator[dg.DagsterInstance]:
    with dg.DagsterInstance.from_config(str(home)) as opened:
        yield opened


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(
        source_uri=str(BUNDLED_SAMPLE_CORPUS),
        data_dir=tmp_path / "data",
        workers=1,
        index_partitions=len(KEYS),
    )


def _build(settings: Settings, instance: dg.DagsterInstance, key: str) -> dg.ExecuteInProcessResult:
    """partitions_job over one partition, as the sensor's run of it does."""
    job = build_definitions(settings).resolve_job_def(PARTITIONS_JOB)
    return job.execute_in_process(instance=instance, partition_key=key, raise_on_error=False)


def _corrupt(settings: Settings, key: str) -> Path:
    """The partition's store file replaced by bytes that are no database."""
    path = Lorehouse(settings).partition_layout().store_path(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"not a database " * 100)
    return path


def _run(
    instance: dg.DagsterInstance,
    key: str | None,
    status: dg.DagsterRunStatus,
    *,
    last_event_ago: float = 5.0,
    job_name: str = PARTITIONS_JOB,
    tags: dict[str, str] | None = None,
    asset_selection: frozenset[dg.AssetKey] | None = None,
) -> str:
    """A run as the run queue holds it: queued, or started with its last event
    `last_event_ago` seconds ago. A partition run carries partitions_job's own tags."""
    run_id = str(uuid.uuid4())
    run_tags = dict(tags or {**partitions_job(Settings()).tags, "dagster/partition": str(key)})
    queued = status == dg.DagsterRunStatus.QUEUED
    instance.add_run(
        dg.DagsterRun(
            job_name=job_name,
            run_id=run_id,
            status=status if queued else dg.DagsterRunStatus.NOT_STARTED,
            tags=run_tags,
            asset_selection=asset_selection,
            # As the sensor's and the UI's runs: from the workspace's code location.
            remote_job_origin=workspace_job_origin(job_name),
        )
    )
    if not queued:
        started = dg.DagsterEvent(dg.DagsterEventType.RUN_START.value, job_name=job_name)
        instance.handle_new_event(
            dg.EventLogEntry(
                error_info=None,
                level="DEBUG",
                user_message="",
                run_id=run_id,
                timestamp=time.time() - last_event_ago,
                job_name=job_name,
                dagster_event=started,
            )
        )
    return run_id


def _by_key(states: list[PartitionState]) -> dict[str, PartitionState]:
    assert [state.partition for state in states] == KEYS
    return {state.partition: state for state in states}


def test_a_partition_is_published_then_failed_with_its_error_then_published_again(
    settings: Settings, instance: dg.DagsterInstance
) -> None:
    states = _by_key(partition_states(instance, KEYS, STALL))
    assert {state.state for state in states.values()} == {"never built"}

    first = _build(settings, instance, "p01")
    assert first.success
    built = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=LAST_PARTITIONED_ASSET, asset_partitions=["p01"]), limit=1
    ).records[0]
    p01 = _by_key(partition_states(instance, KEYS, STALL))["p01"]
    assert (p01.state, p01.run_id, p01.since) == ("published", first.run_id, built.timestamp)

    # Its store file goes bad: the next run fails, and the partition says where and why,
    # in one line, with when it was last published.
    store = _corrupt(settings, "p01")
    failed = _build(settings, instance, "p01")
    assert not failed.success
    states = _by_key(partition_states(instance, KEYS, STALL))
    p01 = states["p01"]
    assert (p01.state, p01.run_id) == ("failed", failed.run_id)
    assert p01.detail.startswith("parsed_documents: IOException: IO Error: The file")
    assert NOT_A_DATABASE in p01.detail and "\n" not in p01.detail
    assert p01.since is not None and p01.since >= built.timestamp
    assert p01.published_at == built.timestamp
    assert {states[key].state for key in ("p00", "p02", "p03")} == {"never built"}

    store.unlink()
    again = _build(settings, instance, "p01")
    assert again.success
    p01 = _by_key(partition_states(instance, KEYS, STALL))["p01"]
    assert (p01.state, p01.run_id, p01.detail) == ("published", again.run_id, "")


def test_a_queued_partition_names_what_it_waits_behind_and_a_silent_one_is_stalled(
    instance: dg.DagsterInstance,
) -> None:
    # Two partition runs take both lorehouse/writes=partition slots; p02 queues behind them,
    # and a retry of p00 queues behind p00's own run.
    p00 = _run(instance, "p00", dg.DagsterRunStatus.STARTED, last_event_ago=60)
    p01 = _run(instance, "p01", dg.DagsterRunStatus.STARTED, last_event_ago=60)
    p02 = _run(instance, "p02", dg.DagsterRunStatus.QUEUED)
    retry = _run(instance, "p00", dg.DagsterRunStatus.QUEUED)
    states = _by_key(partition_states(instance, KEYS, STALL))
    assert (states["p00"].state, states["p00"].run_id) == ("running", p00)
    assert f"run {retry[:8]} is queued behind it" in states["p00"].detail
    assert (states["p01"].state, states["p01"].run_id) == ("running", p01)
    queued = states["p02"]
    assert (queued.state, queued.run_id) == ("queued", p02)
    assert set(queued.waiting_behind) == {p00, p01}
    assert "waiting for a lorehouse/writes=partition slot (2 taken)" in queued.detail
    assert f"{p01[:8]} (p01, running)" in queued.detail
    assert states["p03"].state == "never built"

    # Half an hour on without an event from either run: they are stalled, and p02 still
    # waits, behind runs it names as stalled.
    later = time.time() + STALL
    states = _by_key(partition_states(instance, KEYS, STALL, now=later))
    for key in ("p00", "p01"):
        assert states[key].state == "stalled", states[key]
        assert "no event for 31 min" in states[key].detail
    assert states["p00"].since == pytest.approx(time.time() - 60, abs=5)
    assert states["p02"].state == "queued"
    assert f"{p01[:8]} (p01, stalled 31 min)" in states["p02"].detail

    # p01's run worker is lost and the run marked failed: p02 is next, and stays "queued"
    # until nothing has started it for longer than the stall limit.
    p01_run = instance.get_run_by_id(p01)
    assert p01_run is not None
    instance.report_run_failed(p01_run, "Run worker's pod was evicted")
    states = _by_key(partition_states(instance, KEYS, STALL))
    assert (states["p01"].state, states["p01"].detail) == (
        "failed",
        "Run worker's pod was evicted",
    )
    assert (states["p02"].state, states["p02"].detail) == ("queued", "next to start")
    assert states["p02"].waiting_behind == ()
    much_later = time.time() + STALL + 60
    states = _by_key(partition_states(instance, KEYS, STALL, now=much_later))
    assert states["p02"].state == "stalled"
    assert "nothing is ahead of it in the run queue" in states["p02"].detail
    assert "Dagster daemon" in states["p02"].detail


def test_an_index_run_is_running_for_every_partition_it_covers(
    settings: Settings, instance: dg.DagsterInstance
) -> None:
    index_tags = dict(build_definitions(settings).resolve_job_def(INDEX_JOB).tags)

    def index_run(tags: dict[str, str], selection: set[dg.AssetKey] | None = None) -> str:
        return _run(
            instance,
            None,
            dg.DagsterRunStatus.STARTED,
            job_name=INDEX_JOB,
            tags=tags,
            asset_selection=frozenset(selection) if selection is not None else None,
        )

    # The inventory alone through index_job (`lorehouse materialize --select raw_documents`)
    # carries the full range but builds no partition.
    index_run(index_tags, {dg.AssetKey("raw_documents")})
    states = _by_key(partition_states(instance, KEYS, STALL))
    assert [states[key].state for key in KEYS] == ["never built"] * 4
    # `lorehouse materialize --partitions p01...p02` builds those two.
    ranged = index_run(
        {
            **index_tags,
            "dagster/asset_partition_range_start": "p01",
            "dagster/asset_partition_range_end": "p02",
        }
    )
    states = _by_key(partition_states(instance, KEYS, STALL))
    assert [states[key].state for key in KEYS] == [
        "never built",
        "running",
        "running",
        "never built",
    ]
    assert states["p01"].run_id == ranged and "index_job p01...p02" in states["p01"].detail
    # A whole index_job run is running for every partition.
    full = index_run(index_tags)
    states = _by_key(partition_states(instance, KEYS, STALL))
    assert [states[key].state for key in KEYS] == ["running"] * 4
    assert (states["p00"].run_id, states["p03"].run_id) == (full, full)
    assert f"index_job {KEYS[0]}...{KEYS[-1]}" in states["p03"].detail


def test_the_not_published_message_says_each_partitions_state(
    settings: Settings, instance: dg.DagsterInstance
) -> None:
    _corrupt(settings, "p01")
    assert not _build(settings, instance, "p01").success
    _run(instance, "p02", dg.DagsterRunStatus.QUEUED)
    defs = build_definitions(settings)
    cursor = ChainCursor(pending={"p01": 0, "p02": 0}).encode()
    with dg.build_sensor_context(
        instance=instance, cursor=cursor, repository_def=defs.get_repository_def()
    ) as context:
        tick = defs.resolve_sensor_def("changed_partitions_sensor").evaluate_tick(context)
    message = tick.skip_message or ""
    assert not tick.run_requests
    assert message.startswith(
        "partitions not published yet: p01, p02: p01 failed: parsed_documents"
    )
    assert NOT_A_DATABASE in message
    assert "p02 queued: next to start" in message


@pytest.fixture
def cli_instance(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dg.DagsterInstance]:
    """The DAGSTER_HOME the command reads, opened by the test to record runs in it."""
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.setenv("LOREHOUSE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("LOREHOUSE_INDEX_PARTITIONS", str(len(KEYS)))
    monkeypatch.setenv("COLUMNS", "240")
    get_settings.cache_clear()
    with dg.DagsterInstance.from_config(str(home)) as opened:
        yield opened
    get_settings.cache_clear()


def _rows(output: str) -> dict[str, str]:
    """The table's line of each partition."""
    rows = {}
    for line in output.splitlines():
        cells = line.strip("│┃ ").split()
        if cells and cells[0] in KEYS:
            rows[cells[0]] = line
    return rows


def test_lorehouse_partitions_prints_each_partition_and_json(
    cli_instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    running = _run(cli_instance, "p00", dg.DagsterRunStatus.STARTED, last_event_ago=120)
    _run(cli_instance, "p01", dg.DagsterRunStatus.QUEUED)
    failed = cli_instance.get_run_by_id(_run(cli_instance, "p02", dg.DagsterRunStatus.STARTED))
    assert failed is not None
    cli_instance.report_run_failed(failed, "Run worker's pod was evicted")

    result = CliRunner().invoke(cli, ["partitions"])
    assert result.exit_code == 0, result.output
    rows = _rows(result.stdout)
    assert sorted(rows) == KEYS
    assert "running" in rows["p00"] and running[:8] in rows["p00"]
    assert "queued" in rows["p01"] and "next to start" in rows["p01"]
    assert "failed" in rows["p02"] and "Run worker's pod was evicted" in rows["p02"]
    assert "never built" in rows["p03"]
    assert "4 partitions: " in result.stderr and "1 failed" in result.stderr
    assert "lorehouse materialize --partitions" in result.stderr

    # Two minutes without an event is a stall where the deployment allows one minute.
    monkeypatch.setenv("LOREHOUSE_PARTITION_STALL_SECONDS", "60")
    get_settings.cache_clear()
    result = CliRunner().invoke(cli, ["partitions", "--json"])
    assert result.exit_code == 0, result.output
    listed = json.loads(result.stdout)
    assert [item["partition"] for item in listed] == KEYS
    assert [item["state"] for item in listed] == ["stalled", "queued", "failed", "never built"]
    assert listed[0]["run_id"] == running and "no event for 2 min" in listed[0]["detail"]
    assert listed[2]["since"].endswith("+00:00")


def test_lorehouse_partitions_without_an_instance_says_how_to_set_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    monkeypatch.setenv("LOREHOUSE_DATA_DIR", str(tmp_path / "data"))
    get_settings.cache_clear()
    try:
        unset = CliRunner().invoke(cli, ["partitions"])
        monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "missing"))
        missing = CliRunner().invoke(cli, ["partitions"])
    finally:
        get_settings.cache_clear()
    # A message and an exit, not a crash.
    assert unset.exit_code == 1 and isinstance(unset.exception, SystemExit)
    assert "DAGSTER_HOME is not set" in unset.stderr
    assert "export DAGSTER_HOME=" in unset.stderr
    assert "Traceback" not in unset.output
    assert missing.exit_code == 1
    assert f"DAGSTER_HOME={tmp_path / 'missing'} is not a folder" in missing.stderr
