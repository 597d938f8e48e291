"""The cluster configuration on one machine: a Dagster instance whose runs, events and
schedules live in PostgreSQL, steps in their own processes (the multiprocess executor),
documents, the LanceDB index and the partitions' files on S3 (a real S3-compatible server on
127.0.0.1), and the DuckDB feature store on the index worker's volume. Then the Dagster
daemon, with the shipped run queue, runs a backfill of every partition started from Dagster's
CLI, and carries an inventory run after an edit on to that document's partition alone and
the merge."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import psycopg2
import pytest
import yaml

from lorehouse.inventory import document_id
from lorehouse.settings import REPO_ROOT
from lorehouse.stores.conversations import CONVERSATIONS, ConversationStore
from lorehouse.stores.lance_index import ChunkIndex
from lorehouse.stores.partitions import bucket_of, partition_keys
from lorehouse.wiring import lance_storage_options
from tests.dagster.conftest import _free_port, s3_bucket

# A build with a process per step, then the runs the daemon launches, each a process of its
# own: beside the parallel tests the swarm takes the cores from both workers, so it runs
# alone, after them.
pytestmark = [pytest.mark.serial, pytest.mark.timeout(600)]

BIN = Path(sys.executable).parent
EDITED = "hr/parental-leave-faq.md"
PARTITIONS = 2


@dataclass(frozen=True)
class Postgres:
    port: int
    user: str = "lorehouse"

    def connect(self, db_name: str = "postgres") -> psycopg2.extensions.connection:
        return psycopg2.connect(host="127.0.0.1", port=self.port, user=self.user, dbname=db_name)


def _pg_binary(name: str) -> str:
    """Debian keeps PostgreSQL's server programs under /usr/lib/postgresql/<major>/bin."""
    found = shutil.which(name) or next(
        (str(p) for p in sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))), None
    )
    if found is None:
        pytest.fail(f"{name} not found: `make install` installs Debian's postgresql")
    return found


def _as_server_user(args: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root; as root the server runs as the `postgres` user."""
    return ["runuser", "-u", "postgres", "--", *args] if os.geteuid() == 0 else args


@pytest.fixture
def postgres() -> Iterator[Postgres]:
    # Not under pytest's tmp_path: its parents are private to the test user, and the server
    # may run as another user.
    root = Path(tempfile.mkdtemp(prefix="lorehouse-pg-"))
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    data = root / "data"
    server = Postgres(port=_free_port())
    subprocess.run(
        _as_server_user(
            [_pg_binary("initdb"), "-D", str(data), "-U", server.user, "-A", "trust", "--no-sync"]
        ),
        check=True,
        capture_output=True,
    )
    options = f"-p {server.port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off"
    pg_ctl = _pg_binary("pg_ctl")
    subprocess.run(
        _as_server_user(
            [pg_ctl, "-D", str(data), "-o", options, "-l", str(root / "log"), "-w", "start"]
        ),
        check=True,
        capture_output=True,
    )
    try:
        with closing(server.connect()) as connection:
            connection.autocommit = True  # CREATE DATABASE runs outside a transaction
            connection.cursor().execute("CREATE DATABASE dagster")
        yield server
    finally:
        subprocess.run(
            _as_server_user([pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop"]),
            check=False,
            capture_output=True,
        )
        shutil.rmtree(root, ignore_errors=True)


def _instance_home(path: Path, server: Postgres) -> Path:
    """DAGSTER_HOME with the project's instance settings and PostgreSQL storage."""
    config = yaml.safe_load((REPO_ROOT / "pipelines" / "dagster.yaml").read_text())
    config["storage"] = {
        "postgres": {
            "postgres_db": {
                "hostname": "127.0.0.1",
                "port": server.port,
                "username": server.user,
                "password": "",
                "db_name": "dagster",
                # SQLAlchemy 2.1 defaults to psycopg 3; dagster-postgres installs psycopg2
                "scheme": "postgresql+psycopg2",
            }
        }
    }
    # The daemon looks at the run queue every second instead of five: the limits are the
    # shipped ones, only the waits between a run's end and the next one's start shrink.
    config["run_queue"] = {"dequeue_interval_seconds": 1}
    path.mkdir(parents=True)
    (path / "dagster.yaml").write_text(yaml.safe_dump(config))
    return path


def _index_run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """index_job as the run launcher would start it: Dagster's CLI against the instance."""
    return _dagster(["job", "execute", "-j", "index_job"], env)


def _latest(instance: dg.DagsterInstance, asset: str) -> dict[str, object]:
    event = instance.get_latest_materialization_event(dg.AssetKey(asset))
    assert event is not None and event.asset_materialization is not None, asset
    return {k: v.value for k, v in event.asset_materialization.metadata.items()}


def test_postgres_instance_s3_stores_daemon_backfill_and_one_edited_partition(
    postgres: Postgres,
    s3_endpoint: str,
    sample_corpus: Path,
    tmp_path: Path,
) -> None:
    client = s3_bucket(s3_endpoint, "docs")
    s3_bucket(s3_endpoint, "index")
    for path in sorted(p for p in sample_corpus.rglob("*") if p.is_file()):
        key = f"corpus/{path.relative_to(sample_corpus).as_posix()}"
        client.put_object(Bucket="docs", Key=key, Body=path.read_bytes())
    home = _instance_home(tmp_path / "dagster_home", postgres)
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "LOREHOUSE_DATA_DIR": str(tmp_path / "worker-volume"),
        "LOREHOUSE_SOURCE_URI": "s3://docs/corpus",
        "LOREHOUSE_LANCEDB_URI": "s3://index/lancedb",
        # The partitions' files in the bucket too, as pods that share no volume keep them:
        # each step process pulls its partition's store and pushes it back.
        "LOREHOUSE_PARTITIONS_URI": "s3://index/partitions",
        "LOREHOUSE_S3_ENDPOINT_URL": s3_endpoint,
        "LOREHOUSE_S3_REGION": "eu-west-1",
        "LOREHOUSE_DAGSTER_EXECUTOR": "multiprocess",
        "LOREHOUSE_WORKERS": "2",
        # Two partitions: each partition step is a process of its own here, and two show
        # the backfill and the one-partition rerun as well as sixteen would.
        "LOREHOUSE_INDEX_PARTITIONS": str(PARTITIONS),
        # The eval assets still run, each a step process of its own, but find this golden
        # set's file is not indexed and skip scoring: scoring is tested elsewhere, and here it
        # is only minutes of work beside the runs this test is about.
        "LOREHOUSE_EVAL_GOLDEN_SET": str(_elsewhere_golden_set(tmp_path)),
    }

    first = _index_run(env)
    log = first.stdout + first.stderr
    assert first.returncode == 0, log[-4000:]
    assert 'Launching subprocess for "chunk_embeddings"' in log

    with dg.DagsterInstance.from_config(str(home)) as instance:
        # The run and its events are in PostgreSQL, where the webserver and daemon of every
        # other machine read them.
        (run,) = instance.get_runs()
        assert run.status == dg.DagsterRunStatus.SUCCESS and run.job_name == "index_job"
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
        from pipelines.definitions import defs

        graph = defs.resolve_asset_graph()
        for key in graph.get_all_asset_keys():
            assert instance.get_latest_materialization_event(key) is not None, key
        built = _latest(instance, "chunk_embeddings")
    assert built["documents_embedded"] == built["documents"] > 5
    with closing(postgres.connect("dagster")) as connection:
        cursor = connection.cursor()
        cursor.execute("SELECT count(*) FROM runs")
        assert cursor.fetchone() == (1,)
    listed = client.list_objects_v2(Bucket="index", Prefix="lancedb/")
    assert listed["KeyCount"] > 0
    assert not (tmp_path / "worker-volume" / "lancedb").exists()
    published = client.list_objects_v2(Bucket="index", Prefix="partitions/", Delimiter="/")
    assert {item["Key"] for item in published.get("Contents", [])} == {
        f"partitions/{key}.duckdb" for key in partition_keys(PARTITIONS)
    }
    assert {item["Prefix"] for item in published["CommonPrefixes"]} == {
        "partitions/inventory/",
        *(f"partitions/{key}.lancedb/" for key in partition_keys(PARTITIONS)),
    }
    assert not list((tmp_path / "worker-volume" / "partitions").glob("*.lancedb"))

    # The daemon: it takes queued runs off the run queue (QueuedRunCoordinator, the shipped
    # tag limits) and launches each in a process of its own, and it evaluates the sensors.
    daemon_env = {**env, "LOREHOUSE_DAGSTER_EXECUTOR": "in_process"}
    daemon_env["LOREHOUSE_SOURCE_POLL_SECONDS"] = "5"
    daemon_log = tmp_path / "daemon.log"
    with daemon_log.open("wb") as out:
        daemon = subprocess.Popen(
            [str(BIN / "dagster-daemon"), "run", "-m", "pipelines.definitions"],
            cwd=REPO_ROOT,
            env=daemon_env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        # A backfill of every partition through Dagster's CLI: one queued run per partition.
        backfill = _dagster(
            ["job", "backfill", "-j", "partitions_job", "--all", "all", "--noprompt"], daemon_env
        )
        assert backfill.returncode == 0, (backfill.stdout + backfill.stderr)[-4000:]
        runs = _runs_when(
            home, lambda runs: _succeeded(runs, "partitions_job") == PARTITIONS, daemon_log
        )
        keys = sorted(
            run.tags["dagster/partition"] for run in runs if "dagster/backfill" in run.tags
        )
        assert keys == partition_keys(PARTITIONS)

        text = (sample_corpus / EDITED).read_text()
        edited = (
            text + "\n\n## Adoption\n\nAdoptive parents get the same 20 weeks from placement.\n"
        )
        client.put_object(Bucket="docs", Key=f"corpus/{EDITED}", Body=edited.encode())
        # What the nightly schedule launches; changed_partitions_sensor carries it on.
        launched = _dagster(["job", "launch", "-j", "inventory_job"], daemon_env)
        assert launched.returncode == 0, (launched.stdout + launched.stderr)[-4000:]
        runs = _runs_when(home, lambda runs: _succeeded(runs, "merge_job") == 1, daemon_log)
    finally:
        daemon.terminate()
        daemon.wait(timeout=60)
        # Then whatever is left of its session: the daemon's code server is a process of its
        # own, which outlived the daemon and its heartbeat by hours, holding about 470 MB.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(daemon.pid, signal.SIGKILL)

    chained = [run for run in runs if run.tags.get("lorehouse/trigger") == "changed_partitions"]
    # Only the edited document's partition ran again; its pod shares no volume with the shared
    # stores, so it published in a publish_job run on the writer's; then the checks.
    assert sorted((run.job_name, run.tags.get("dagster/partition")) for run in chained) == [
        ("merge_job", None),
        ("partitions_job", _partition_of(EDITED)),
        ("publish_job", _partition_of(EDITED)),
    ]
    with dg.DagsterInstance.from_config(str(home)) as instance:
        rerun = _latest(instance, "chunk_embeddings")
    index = ChunkIndex(
        "s3://index/lancedb",
        storage_options=lance_storage_options("s3://index/lancedb", s3_endpoint, "eu-west-1"),
    )
    edited_chunks = [
        row for row in index.table().to_arrow().to_pylist() if row["rel_path"] == EDITED
    ]
    # Only chunks of the edited document are embedded and written again; no other row moves.
    assert 0 < rerun["embedded"] <= rerun["rows_written"] <= len(edited_chunks)
    assert any("Adoptive parents" in row["text_chat"] for row in edited_chunks)


def _elsewhere_golden_set(folder: Path) -> Path:
    """A golden set whose one question cites a file no corpus here holds."""
    case = {
        "id": "elsewhere-1",
        "question": "What does the archived memo say?",
        "evidence": [{"file": "archive/memo.md", "excerpt": "The archived memo."}],
        "answer": "Nothing indexed here.",
        "type": "lookup",
    }
    path = folder / "elsewhere.jsonl"
    path.write_text(json.dumps(case) + "\n")
    return path


def _dagster(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Dagster's own CLI against the instance, as an operator would run it."""
    return subprocess.run(
        [str(BIN / "dagster"), *args, "-m", "pipelines.definitions"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def _succeeded(runs: list[dg.DagsterRun], job: str) -> int:
    return sum(run.job_name == job and run.status == dg.DagsterRunStatus.SUCCESS for run in runs)


def _runs_when(
    home: Path, done: Callable[[list[dg.DagsterRun]], bool], daemon_log: Path
) -> list[dg.DagsterRun]:
    """The instance's runs once `done` holds; fails on a failed run or after 5 minutes."""
    deadline = time.monotonic() + 300
    while True:
        with dg.DagsterInstance.from_config(str(home)) as instance:
            runs = list(instance.get_runs())
        failed = [run.job_name for run in runs if run.status == dg.DagsterRunStatus.FAILURE]
        assert not failed, (failed, daemon_log.read_text()[-4000:])
        if done(runs):
            return runs
        assert time.monotonic() < deadline, (
            [(run.job_name, run.status.value) for run in runs],
            daemon_log.read_text()[-4000:],
        )
        time.sleep(2)


def _partition_of(rel_path: str) -> str:
    return partition_keys(PARTITIONS)[bucket_of(document_id(rel_path), PARTITIONS)]


def test_saved_conversations_live_in_the_shared_postgres(postgres: Postgres) -> None:
    """Two pods' stores over one PostgreSQL database see the same conversations, each only
    its owner's, and a delete or purge on one is gone for the other."""
    with closing(postgres.connect()) as connection:
        connection.autocommit = True
        connection.cursor().execute("CREATE DATABASE conversations")
    url = f"postgresql+psycopg2://{postgres.user}@127.0.0.1:{postgres.port}/conversations"
    one, other = (ConversationStore(url, retention_days=30) for _ in range(2))
    try:
        started = one.create("reader", "")
        assert (
            one.add_turn("reader", started.conversation_id, "How long?", {"answer": "20 weeks"})
            == 0
        )
        assert other.add_turn("reader", started.conversation_id, "And after?", {"answer": "6"}) == 1
        total, listed = other.conversations("reader", 10, 0)
        assert total == 1 and listed[0].title == "How long?" and listed[0].turns == 2
        found = one.conversation("reader", started.conversation_id)
        assert found is not None and [t.question for t in found[1]] == ["How long?", "And after?"]
        assert other.conversation("someone-else", started.conversation_id) is None
        assert not other.delete("someone-else", started.conversation_id)
        assert other.delete("reader", started.conversation_id)
        assert one.conversation("reader", started.conversation_id) is None
        aged = one.create("reader", "Old")
        with one._begin() as connection:
            connection.execute(
                CONVERSATIONS.update()
                .where(CONVERSATIONS.c.conversation_id == aged.conversation_id)
                .values(updated_at=datetime.now(UTC) - timedelta(days=31))
            )
        assert other.purge() == 1 and one.conversations("reader", 10, 0) == (0, [])
    finally:
        one.dispose()
        other.dispose()
