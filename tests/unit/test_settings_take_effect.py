"""Every setting the configuration page offers must change what Lorehouse does, or go.

A setting that is documented but no longer passed on is worse than none: a deployment sets
it, nothing changes, and nothing says so. Each test here sets one setting the way a
deployment does, as a `LOREHOUSE_<NAME>` variable, and finds its effect in what the
project's entry points build: the composition root (`lorehouse.wiring.Lorehouse`), the
Dagster resources and definitions, the API app, `lorehouse serve`, and the connectors, each
talking to a local stand-in of its service. Each test also looks at the same thing built
without the variable and checks that the effect differs, so it fails when the value stops
arriving.

Nothing here builds an index or runs a Dagster job. Where the effect shows only during a
build (the ANN index threshold, how long old table versions are kept, a parse worker's
memory ceiling), the test reads it from the object that build would use. No test reaches a
model provider (litellm is replaced by a recorder) or reads a `.env` file (each test runs
in its own empty folder).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import parse_qs

import dagster as dg
import pytest
import uvicorn
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from api.main import create_app
from assets.resources import build_resources, wiring_for
from cli.main import app as cli
from lorehouse import llm
from lorehouse.errors import SourceError
from lorehouse.llm import LLMClient, Prompt
from lorehouse.search.tables import SentenceTable
from lorehouse.settings import Settings, get_settings
from lorehouse.sources import DocumentSource
from lorehouse.stores.duckdb_store import DuckDBStore
from lorehouse.wiring import Lorehouse
from pipelines.definitions import build_definitions
from tests.drive_server import Drive
from tests.local_http import local_server, send_json
from tests.web_site import Site, html, serve

# -- the deployment under test --------------------------------------------------------------


class Deployment:
    """The LOREHOUSE_* variables of one deployment, and the Settings read from them."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
        self.monkeypatch = monkeypatch
        self.data_dir = folder / "data"

    def clear(self) -> None:
        """No LOREHOUSE_* variable left (the developer's own, conftest's), as a Dagster run
        started elsewhere may have none: what it uses must come from its config."""
        for name in list(os.environ):
            if name.startswith("LOREHOUSE_"):
                self.monkeypatch.delenv(name)

    def settings(self, **variables: str) -> Settings:
        """The Settings of exactly these variables (by setting name) and a data folder."""
        self.clear()
        self.monkeypatch.setenv("LOREHOUSE_DATA_DIR", str(self.data_dir))
        for name, value in variables.items():
            self.monkeypatch.setenv(f"LOREHOUSE_{name.upper()}", value)
        return Settings(_env_file=None)

    def dagster_wiring(self, settings: Settings, keys: tuple[str, ...]) -> Lorehouse:
        """The composition root an asset holding resources `keys` builds in its run: the
        resources as `build_resources` configures them (EnvVar secrets resolved), with no
        LOREHOUSE_* variable left to fall back on."""
        with dg.build_resources(build_resources(settings)) as initialized:
            chosen = [getattr(initialized, key) for key in keys]
        self.clear()
        return wiring_for(*chosen)


@pytest.fixture
def deployment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Deployment]:
    # Code that reads the process settings itself (`get_settings()`) finds no `.env` here.
    monkeypatch.chdir(tmp_path)
    get_settings.cache_clear()
    yield Deployment(monkeypatch, tmp_path)
    get_settings.cache_clear()


class RecordingProvider:
    """Stands in for litellm: records every completion request and answers "yes"."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    def supports_response_schema(self, model: str) -> bool:
        return False

    def completion(self, **request: Any) -> SimpleNamespace:
        self.requests.append(request)
        message = SimpleNamespace(content="yes")
        return SimpleNamespace(
            choices=[SimpleNamespace(message=message)],
            usage=None,
            _hidden_params={"response_cost": 0.0},
        )


@pytest.fixture(autouse=True)
def provider(monkeypatch: pytest.MonkeyPatch) -> RecordingProvider:
    """No test here reaches a model provider, or pays for importing litellm."""
    recorder = RecordingProvider()
    monkeypatch.setattr(llm, "litellm_module", lambda: recorder)
    return recorder


PROBE = Prompt(version="probe.v1", template="Answer yes.")


def max_tokens_sent(client: LLMClient | None) -> int | None:
    """The output limit a call of `client` asks the provider for."""
    if client is None:
        return None
    client.complete_text(PROBE, lambda reply: None)
    return llm.litellm_module().requests[-1]["max_tokens"]


# -- settings read into the objects the composition root builds ------------------------------


#: The resources the eval assets build their retriever, answer pipeline and judge from.
EVAL_RESOURCES = ("feature_store", "vector_index", "evaluation", "enrichment")
MODEL = {"llm_model": "openai/gpt-4o-mini"}
TEN_MB = 10 * 2**20


@dataclass(frozen=True)
class Effect:
    """A value of a setting other than its default, and what it shows as in what a
    `Lorehouse` builds."""

    setting: str
    value: str
    shows_as: object
    observe: Callable[[Lorehouse], object]
    #: Other settings the effect needs (a model to call, OCR turned on).
    needs: dict[str, str] = field(default_factory=dict)
    #: The Dagster resources an asset builds this from; empty when no resource carries it.
    resources: tuple[str, ...] = ()


EFFECTS = [
    # A 10 MB file may parse for the base 120 s plus 5 s per MB, not 60 s per MB.
    Effect(
        "parse_timeout_seconds_per_mb",
        "5",
        120.0 + 5 * 10,
        lambda house: house.parse_limits().timeout_for(TEN_MB),
    ),
    Effect(
        "parse_memory_mb",
        "512",
        512,
        lambda house: house.parse_limits().memory_mb,
        resources=("parsing",),
    ),
    # Part of the recorded parser version: scans are parsed again at the new resolution.
    Effect(
        "pdf_ocr_dpi",
        "150",
        "ocr-eng@150",
        lambda house: house.parse_options().fingerprint,
        needs={"pdf_ocr_languages": "eng"},
        resources=("parsing",),
    ),
    Effect(
        "answer_max_output_tokens",
        "123",
        123,
        lambda house: max_tokens_sent(house.ask_pipeline().client),
        needs=MODEL,
        resources=EVAL_RESOURCES,
    ),
    Effect(
        "enrichment_max_output_tokens",
        "77",
        77,
        lambda house: max_tokens_sent(house.enricher().client),
        needs=MODEL,
        resources=("enrichment",),
    ),
    Effect(
        "judge_max_output_tokens",
        "99",
        99,
        lambda house: max_tokens_sent(house.judge_llm()),
        needs={"judge_model": "openai/gpt-4o"},
        resources=EVAL_RESOURCES,
    ),
    # The chunks table and the tables beside it get their ANN index from this many rows,
    # and searches read it from as many, in the API's reader as in the writer.
    Effect(
        "ann_index_min_rows",
        "1000",
        (1000, 1000, 1000, 1000),
        lambda house: (
            house.chunk_index().ann_min_rows,
            house.chunk_index().sentences().ann_min_rows,
            house.chunk_reader().neighbours.min_rows,
            house.chunk_reader().sibling(SentenceTable).neighbours.min_rows,
        ),
        resources=("vector_index",),
    ),
    Effect(
        "search_ann_engine",
        "lancedb",
        ("lancedb", "lancedb"),
        lambda house: (
            house.chunk_reader().neighbours.engine,
            house.chunk_index().neighbours.engine,
        ),
    ),
    Effect(
        "search_ann_probes",
        "7",
        (7, 7),
        lambda house: (
            house.chunk_reader().neighbours.probes,
            house.chunk_index().documents().neighbours.probes,
        ),
    ),
    Effect(
        "citation_retention_hours",
        "48",
        timedelta(hours=48),
        lambda house: house.chunk_index().keep_versions,
    ),
    Effect(
        "search_candidates",
        "12",
        12,
        lambda house: house.retriever().candidates,
        resources=EVAL_RESOURCES,
    ),
    # 0 turns the query-vector cache off.
    Effect(
        "search_query_cache_size",
        "0",
        0,
        lambda house: house.retriever()._query_vector.cache_info().maxsize,
    ),
    Effect("search_split_asks", "false", False, lambda house: house.retriever().split_asks),
    Effect(
        "ask_context_chunks",
        "3",
        3,
        lambda house: house.ask_pipeline().options.context_chunks,
        resources=EVAL_RESOURCES,
    ),
    Effect(
        "answer_min_similarity",
        "0.7",
        0.7,
        lambda house: house.ask_pipeline().options.answer_min_similarity,
        resources=EVAL_RESOURCES,
    ),
    Effect(
        "answer_max_words",
        "40",
        40,
        lambda house: house.ask_pipeline().options.answer_max_words,
        resources=EVAL_RESOURCES,
    ),
    Effect(
        "answer_passages_min_similarity",
        "0.2",
        0.2,
        lambda house: house.ask_pipeline().options.answer_passages_min_similarity,
        resources=EVAL_RESOURCES,
    ),
    Effect(
        "answer_assert_threshold",
        "0.7",
        0.7,
        lambda house: house.ask_pipeline().options.answer_assert_threshold,
        resources=EVAL_RESOURCES,
    ),
    Effect(
        "answer_decline_unmentioned",
        "false",
        False,
        lambda house: house.ask_pipeline().options.decline_unmentioned,
        resources=EVAL_RESOURCES,
    ),
]


@pytest.mark.parametrize("effect", EFFECTS, ids=lambda effect: effect.setting)
def test_a_setting_reaches_what_the_composition_root_builds(
    effect: Effect, deployment: Deployment
) -> None:
    """The API, the CLI and the assets all take these objects from a `Lorehouse`."""
    default = effect.observe(Lorehouse(deployment.settings(**effect.needs)))
    set_to = {**effect.needs, effect.setting: effect.value}
    assert effect.observe(Lorehouse(deployment.settings(**set_to))) == effect.shows_as
    assert default != effect.shows_as


@pytest.mark.parametrize(
    "effect", [e for e in EFFECTS if e.resources], ids=lambda effect: effect.setting
)
def test_a_setting_reaches_a_dagster_run_through_its_resources(
    effect: Effect, deployment: Deployment
) -> None:
    """What the launchpad shows is what the run uses: the value travels in the resources'
    config, not only in the environment of the process that built them."""
    default = effect.observe(
        deployment.dagster_wiring(deployment.settings(**effect.needs), effect.resources)
    )
    settings = deployment.settings(**effect.needs, **{effect.setting: effect.value})
    assert effect.observe(deployment.dagster_wiring(settings, effect.resources)) == (
        effect.shows_as
    )
    assert default != effect.shows_as


def test_a_parse_memory_mb_of_0_lifts_the_ceiling(deployment: Deployment) -> None:
    assert Lorehouse(deployment.settings(parse_memory_mb="0")).parse_limits().memory_mb is None
    assert Lorehouse(deployment.settings()).parse_limits().memory_mb == 2048


# -- the bundled embedder, built from the deployment's settings -----------------------------


@contextmanager
def process_embedder(deployment: Deployment, **variables: str) -> Iterator[Any]:
    """The bundled embedder a deployment with these settings queries with: read from the
    Settings object, so nothing is left in the environment to fall back on."""
    from lorehouse.embedding.minilm import shared_embedder

    settings = deployment.settings(**variables)
    deployment.clear()
    # A deployment's process starts with no embedder: one an earlier test shared (same
    # configuration) would bring its sessions and cached queries.
    shared_embedder.cache_clear()
    yield Lorehouse(settings).embedder()


QUESTION = "How many vacation days do I get?"


def test_embed_query_threads_is_the_thread_count_a_query_runs_on(
    deployment: Deployment,
) -> None:
    def query_session_threads(**variables: str) -> set[int]:
        with process_embedder(deployment, **variables) as embedder:
            embedder.embed([QUESTION])
            return {
                session.get_session_options().intra_op_num_threads
                for session in embedder._sessions.values()
            }

    assert query_session_threads(embed_query_threads="3", embed_threads="2") == {3}
    assert query_session_threads(embed_threads="2") == {1}


def test_embed_query_cache_bytes_bounds_the_queries_the_embedder_keeps(
    deployment: Deployment,
) -> None:
    """A question's vectors take about 40 KB: under a 1,000-byte cap none is kept, so asking
    it again encodes it again."""

    def kept_after_asking_twice(**variables: str) -> int:
        with process_embedder(deployment, **variables) as embedder:
            embedder.embed([QUESTION])
            embedder.embed([QUESTION])
            return len(embedder._query_cache)

    assert kept_after_asking_twice(embed_query_cache_bytes="1000") == 0
    assert kept_after_asking_twice() == 1


# -- the connectors, against a local stand-in of their service -------------------------------


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: str


@contextmanager
def recording_service() -> Iterator[tuple[str, list[Request]]]:
    """A server recording every request: a POST (a token endpoint) gets a token, a GET a
    404, which ends a connector's listing with a SourceError once it has signed in."""
    requests: list[Request] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            return

        def _record(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length).decode()
            requests.append(Request(method, self.path, dict(self.headers), body))
            if method == "POST":
                token = {"access_token": "token-1", "token_type": "Bearer", "expires_in": 3599}
                send_json(self, 200, token)
            else:
                send_json(self, 404, {"error": {"code": 404, "message": "not here"}})

        def do_GET(self) -> None:
            self._record("GET")

        def do_POST(self) -> None:
            self._record("POST")

    with local_server(Handler) as base_url:
        yield base_url, requests


ENTRIES = ["wiring", "dagster"]


def open_source(deployment: Deployment, entry: str, **variables: str) -> DocumentSource:
    """The document source the composition root builds, or the one the Dagster resource
    opens in a run (its config alone, no LOREHOUSE_* variable left)."""
    settings = deployment.settings(**variables)
    if entry == "wiring":
        return Lorehouse(settings).document_source()
    with dg.build_resources(build_resources(settings)) as initialized:
        resource = initialized.document_source
    deployment.clear()
    return resource.open()


def list_until_refused(source: DocumentSource) -> None:
    with pytest.raises(SourceError, match="404"):
        list(source.list_files())


@pytest.mark.parametrize("entry", ENTRIES)
def test_web_max_pages_bounds_what_a_crawl_lists(deployment: Deployment, entry: str) -> None:
    site = Site()
    pages = ["a.html", "b.html", "c.html"]
    site.page("/docs/", html("Handbook", "Start here.", pages))
    for page in pages:
        site.page(f"/docs/{page}", html(page, f"The text of {page}."))
    with serve(site):
        start, local = f"{site.base_url}/docs/", {"web_allowed_networks": "127.0.0.1"}
        bounded = open_source(deployment, entry, source_uri=start, web_max_pages="2", **local)
        assert len(list(bounded.list_files())) == 2
        unbounded = open_source(deployment, entry, source_uri=start, **local)
        assert len(list(unbounded.list_files())) == 4


@pytest.mark.parametrize("entry", ENTRIES)
def test_web_allowed_networks_opens_a_crawl_to_the_networks_it_names(
    deployment: Deployment, entry: str
) -> None:
    site = Site()
    site.page("/docs/", html("Handbook", "Start here."))
    with serve(site):
        start = f"{site.base_url}/docs/"
        refused = open_source(deployment, entry, source_uri=start)
        with pytest.raises(SourceError, match="LOREHOUSE_WEB_ALLOWED_NETWORKS"):
            list(refused.list_files())
        named = open_source(deployment, entry, source_uri=start, web_allowed_networks="127.0.0.0/8")
        assert [f.rel_path for f in named.list_files()] == ["index.html"]


@pytest.mark.parametrize("entry", ENTRIES)
def test_web_page_seconds_gives_up_a_page_that_drips(deployment: Deployment, entry: str) -> None:
    site = Site(sitemap=False)
    site.page("/docs/", html("Handbook", "Start here.", ["slow.html"]))
    site.page("/docs/slow.html", "x" * 30)
    site.drip["/docs/slow.html"] = 0.05
    local = {"web_allowed_networks": "127.0.0.1"}
    with serve(site):
        start = f"{site.base_url}/docs/"
        hasty = open_source(deployment, entry, source_uri=start, web_page_seconds="0.2", **local)
        listed = {f.rel_path for f in hasty.list_files()}
        with pytest.raises(SourceError, match="deadline"):
            hasty.read_bytes(next(path for path in listed if path.startswith("slow")))
        patient = open_source(deployment, entry, source_uri=start, **local)
        listed = {f.rel_path for f in patient.list_files()}
        assert patient.read_bytes(next(path for path in listed if path.startswith("slow")))


@pytest.mark.parametrize("entry", ENTRIES)
def test_sharepoint_signs_in_and_reads_where_the_msgraph_settings_say(
    deployment: Deployment, entry: str
) -> None:
    """msgraph_tenant_id, msgraph_client_id, msgraph_client_secret, msgraph_login_url and
    msgraph_api_url: the token request and the first Graph call."""
    app = {
        "msgraph_tenant_id": "contoso-tenant",
        "msgraph_client_id": "lorehouse-app",
        "msgraph_client_secret": "app-secret",
    }
    with recording_service() as (url, requests):
        source = open_source(
            deployment,
            entry,
            source_uri="sharepoint://site-1",
            msgraph_login_url=f"{url}/login",
            msgraph_api_url=f"{url}/graph",
            **app,
        )
        list_until_refused(source)
    token, first = requests
    assert (token.method, token.path) == ("POST", "/login/contoso-tenant/oauth2/v2.0/token")
    form = {name: values[0] for name, values in parse_qs(token.body).items()}
    assert (form["client_id"], form["client_secret"]) == ("lorehouse-app", "app-secret")
    assert (first.path, first.headers["Authorization"]) == (
        "/graph/v1.0/sites/site-1/drives",
        "Bearer token-1",
    )

    # Unset, the app cannot sign in, and Microsoft's own origins are the ones called.
    for missing in app:
        credentials = {k: v for k, v in app.items() if k != missing}
        with pytest.raises(SourceError, match="signs in as an app"):
            open_source(deployment, entry, source_uri="sharepoint://site-1", **credentials)
    source = open_source(deployment, entry, source_uri="sharepoint://site-1", **app)
    connector = source.connector  # type: ignore[attr-defined]
    assert connector.token_url.startswith("https://login.microsoftonline.com/contoso-tenant/")
    assert connector.api == "https://graph.microsoft.com/v1.0"


@pytest.mark.parametrize("entry", ENTRIES)
def test_confluence_cloud_signs_in_as_confluence_email(deployment: Deployment, entry: str) -> None:
    cloud = {"confluence_cloud": "true", "confluence_token": "api-token"}
    with recording_service() as (url, requests):
        source_uri = f"confluence+{url}/wiki?spaces=ENG"
        source = open_source(
            deployment,
            entry,
            source_uri=source_uri,
            confluence_email="indexer@example.com",
            **cloud,
        )
        list_until_refused(source)
        with pytest.raises(SourceError, match="e-mail"):
            open_source(deployment, entry, source_uri=source_uri, **cloud)
    expected = base64.b64encode(b"indexer@example.com:api-token").decode()
    assert [r.headers["Authorization"] for r in requests] == [f"Basic {expected}"]


@pytest.mark.parametrize("entry", ENTRIES)
def test_gdrive_subject_is_the_user_the_service_account_acts_as(
    deployment: Deployment, entry: str, tmp_path: Path
) -> None:
    """Domain-wide delegation: the signed token request names the user as its subject."""

    def subject_asked_for(**variables: str) -> str | None:
        with recording_service() as (url, requests):
            key = Drive(base_url=url).service_account(tmp_path / "key.json")
            source = open_source(
                deployment,
                entry,
                source_uri="gdrive://folder-1",
                gdrive_service_account_file=str(key),
                gdrive_api_url=url,
                **variables,
            )
            list_until_refused(source)
        (assertion,) = parse_qs(requests[0].body)["assertion"]
        claims = assertion.split(".")[1]
        return json.loads(base64.urlsafe_b64decode(claims + "=" * (-len(claims) % 4))).get("sub")

    assert subject_asked_for(gdrive_subject="alice@example.com") == "alice@example.com"
    assert subject_asked_for() is None


# -- the API ----------------------------------------------------------------------------------


def test_a_body_over_api_max_body_bytes_is_refused_with_413(deployment: Deployment) -> None:
    body = json.dumps({"query": "x" * 100_000})

    def status(**variables: str) -> int:
        with TestClient(create_app(deployment.settings(**variables))) as api:
            headers = {"Content-Type": "application/json"}
            return api.post("/v1/search", content=body, headers=headers).status_code

    assert status(api_max_body_bytes=str(64 * 1024)) == 413
    assert status() != 413  # read, and refused for what it says


BLAS_PROBE = """
import json, sys
from fastapi.testclient import TestClient
from threadpoolctl import threadpool_info
from api.main import create_app
from lorehouse.settings import Settings

def blas():
    return sorted({p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"})

before = blas()
with TestClient(create_app(Settings(_env_file=None, api_blas_threads=int(sys.argv[1])))):
    print(json.dumps([before, blas()]))
"""


def test_api_blas_threads_limits_the_server_process_blas(deployment: Deployment) -> None:
    """A server process's BLAS threads follow the setting. Each server is a process of its
    own here, as in production: BLAS pools are process-wide, set once as the server starts."""
    deployment.settings()

    def served(threads: int) -> tuple[list[int], list[int]]:
        probe = subprocess.run(
            [sys.executable, "-c", BLAS_PROBE, str(threads)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert probe.returncode == 0, probe.stderr[-2000:]
        before, after = json.loads(probe.stdout.strip().splitlines()[-1])
        return before, after

    before, after = served(1)
    if before in ([], [1]):
        pytest.skip("this machine's BLAS runs one thread whatever the setting")
    assert after == [1]
    assert served(2)[1] == [2]


def test_api_feedback_window_seconds_is_how_long_a_refused_key_waits(
    deployment: Deployment, tmp_path: Path
) -> None:
    verdict = {
        "rating": "down",
        "question": "How many weeks of parental leave do primary caregivers get?",
        "answer": "Twelve weeks.",
        "citations": [],
    }

    def retry_after(data_dir: Path, **variables: str) -> int:
        settings = deployment.settings(
            data_dir=str(data_dir), api_feedback_per_key="1", **variables
        )
        DuckDBStore(settings.duckdb_path)  # an empty feature store to keep verdicts in
        with TestClient(create_app(settings)) as api:
            first = api.post("/v1/feedback", json={**verdict, "answer_id": "a" * 32})
            assert first.status_code == 201, first.text
            refused = api.post("/v1/feedback", json={**verdict, "answer_id": "b" * 32})
        assert refused.status_code == 429, refused.text
        return int(refused.headers["Retry-After"])

    assert 7000 < retry_after(tmp_path / "set", api_feedback_window_seconds="7200") <= 7200
    assert retry_after(tmp_path / "default") <= 3600


# -- `lorehouse serve` ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("setting", "value", "option", "shows_as"),
    [
        ("api_host", "0.0.0.0", "host", "0.0.0.0"),
        ("api_port", "9123", "port", 9123),
        ("api_keep_alive_seconds", "5", "timeout_keep_alive", 5),
    ],
)
def test_serve_runs_uvicorn_as_the_settings_say(
    deployment: Deployment,
    monkeypatch: pytest.MonkeyPatch,
    setting: str,
    value: str,
    option: str,
    shows_as: object,
) -> None:
    runs: list[dict[str, Any]] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **config: runs.append(config))

    def served_with(**variables: str) -> object:
        deployment.settings(**variables)
        # `serve` tells the server processes their count through this variable.
        monkeypatch.setenv("LOREHOUSE_API_WORKERS", "1")
        get_settings.cache_clear()
        result = CliRunner().invoke(cli, ["serve"])
        assert result.exit_code == 0, result.output
        return runs[-1][option]

    assert served_with(**{setting: value}) == shows_as
    assert served_with() != shows_as


# -- the Dagster definitions --------------------------------------------------------------------


def test_index_max_age_hours_is_the_indexing_stages_freshness_window(
    deployment: Deployment,
) -> None:
    def windows(**variables: str) -> set[timedelta]:
        graph = build_definitions(deployment.settings(**variables)).resolve_asset_graph()
        policies = [graph.get(key).freshness_policy for key in graph.get_all_asset_keys()]
        return {policy.fail_window.to_timedelta() for policy in policies if policy is not None}

    assert windows(index_max_age_hours="5") == {timedelta(hours=5)}
    assert windows() == {timedelta(hours=26)}


def test_index_sentence_windows_reaches_the_embedding_run(deployment: Deployment) -> None:
    """The embedding asset reads it from its resource, as the launchpad shows it."""
    for value, expected in (("false", False), (None, True)):
        settings = deployment.settings(**({"index_sentence_windows": value} if value else {}))
        with dg.build_resources(build_resources(settings)) as initialized:
            assert initialized.vector_index.index_sentence_windows is expected
