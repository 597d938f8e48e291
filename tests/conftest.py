"""Shared fixtures: paths to the bundled sample corpus and the public test corpus."""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from evals.parsed_files import raw_document_for as evals_raw_document_for
from lorehouse.embedding.minilm import OnnxMiniLMEmbedder
from lorehouse.models import DocumentFailure, ParsedDocument, RawDocument
from lorehouse.parsing.registry import ParseOptions
from lorehouse.parsing.runner import parse_document
from lorehouse.settings import BUNDLED_SAMPLE_CORPUS, REPO_ROOT
from lorehouse.stores.duckdb_store import DuckDBStore
from lorehouse.wiring import Lorehouse

if TYPE_CHECKING:
    from tests.dagster_daemon import UploadDeployment

SHARED_CORPUS = REPO_ROOT.parent / "shared" / "corpus"
DOCS_CORPUS = SHARED_CORPUS / "docs"
#: A folder that outlives one pytest run, for the sample corpus's build: set by `make test`
#: to a fresh folder per invocation, so nothing built by older code is ever read.
SAMPLE_STORE_DIR_VARIABLE = "TEST_SAMPLE_STORE_DIR"
#: Index partitions in every test build (and the CLI processes tests start): four spread the
#: ten-document sample over several partitions, as sixteen spread a real corpus, while
#: sixteen would leave most of them one document each and pay each run's per-partition
#: overhead (a store to open, a parser pool) many times over. The tests that are about
#: partitions set their own count.
os.environ.setdefault("LOREHOUSE_INDEX_PARTITIONS", "4")
#: The local stand-ins of web sites and services listen on 127.0.0.1, which a crawl refuses
#: unless a setting names it, as an intranet's network is named in a deployment. The tests
#: of that refusal set their own.
os.environ.setdefault("LOREHOUSE_WEB_ALLOWED_NETWORKS", "127.0.0.1")
#: Under `make test` two workers share the machine's two cores: the bundled embedder's
#: default of two threads per process would put four on them, and onnxruntime's threads spin
#: while they wait for each other. One thread each keeps two builds from competing
#: (docs/experiments/2026-11-29-suite-time.md); the tests about threads set their own.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("LOREHOUSE_EMBED_THREADS", "1")


def pytest_configure(config: pytest.Config) -> None:
    """Imports all of anyio on the main thread before any test server starts.

    anyio imports its API on first use, and pytest rewrites anyio's modules as they are
    imported (anyio registers a pytest plugin). A test's uvicorn thread that touched a part
    first (a static file of /docs: `anyio.open_file`) compiled it while the main thread
    compiled a test module, and CPython 3.11's AST constructor is not safe across threads:
    "SystemError: AST constructor recursion depth mismatch" and a /docs page without its
    script. Deployed servers import from bytecode and never compile this way.
    """
    import anyio

    for name in dir(anyio):
        getattr(anyio, name)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that read the public corpus say so, and skip loudly where it is absent.

    Slow test files run first: parallel workers take files in this order, so the long ones
    start at once and the short ones fill the gaps, instead of one long file running alone
    at the end.
    """
    for item in items:
        if "corpus" in item.keywords and not DOCS_CORPUS.is_dir():
            item.add_marker(pytest.mark.skip(reason=f"public corpus not found at {DOCS_CORPUS}"))
    items.sort(key=lambda item: "slow" not in item.keywords)


@pytest.fixture(scope="session")
def sample_corpus() -> Path:
    return BUNDLED_SAMPLE_CORPUS


def raw_document_for(path: Path, root: Path | None = None) -> RawDocument:
    """The inventory record of one file, as the raw_documents stage would write it."""
    rel_path = path.relative_to(root).as_posix() if root else path.name
    return evals_raw_document_for(path, rel_path)


def parse_path(path: Path, options: ParseOptions | None = None) -> ParsedDocument | DocumentFailure:
    """Parses one file in this process, exactly as a pool worker would."""
    return parse_document(path.read_bytes(), raw_document_for(path, path.parent), options)


def parsed_markdown(path: Path, options: ParseOptions | None = None) -> ParsedDocument:
    outcome = parse_path(path, options)
    assert isinstance(outcome, ParsedDocument), f"{path.name} failed: {outcome}"
    return outcome


def materialize_everything(
    source: Path,
    data_dir: Path,
    raise_on_error: bool = True,
    with_evals: bool = True,
    **settings: object,
) -> object:
    """Runs every asset and check of the code location into `data_dir`, as `index_job` does.

    `with_evals=False` leaves out the eval assets, which score the sample corpus's golden
    set and only cost time on any other corpus.
    """
    import dagster as dg

    from assets import chunks, documents, embeddings, evals, features
    from assets.checks import checks_of
    from assets.partitioning import all_partitions_tags, with_index_partitions
    from assets.resources import build_resources
    from lorehouse.settings import Settings

    modules = [documents, chunks, features, embeddings, *([evals] if with_evals else [])]
    config = Settings(source_uri=str(source), data_dir=data_dir, workers=2, **settings)
    return dg.materialize(
        [
            *with_index_partitions(dg.load_assets_from_modules(modules), config.index_partitions),
            *checks_of(modules),
        ],
        resources=build_resources(config),
        instance=dg.DagsterInstance.ephemeral(),
        raise_on_error=raise_on_error,
        tags=all_partitions_tags(config.index_partitions),
    )


def _materialize_sample(data_dir: Path) -> None:
    result = materialize_everything(BUNDLED_SAMPLE_CORPUS, data_dir)
    assert result.success  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def materialized_sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory holding every store built from the bundled sample corpus (read-only).

    Built once and copied: under pytest-xdist the workers of one run take turns on a lock in
    the run's shared temporary folder, and each reads its own copy (opening one DuckDB file
    from two processes would make them wait on each other's write lock). `make test` names
    one fresh folder for both of its runs (SAMPLE_STORE_DIR_VARIABLE), so the serial run
    after the parallel one copies the build instead of repeating it.
    """
    own_copy = tmp_path_factory.mktemp("materialized") / "data"
    if configured := os.environ.get(SAMPLE_STORE_DIR_VARIABLE):
        shared = Path(configured) / "materialized-sample"
    elif os.environ.get("PYTEST_XDIST_WORKER"):
        shared = tmp_path_factory.getbasetemp().parent / "materialized-sample"
    else:
        _materialize_sample(own_copy)
        return own_copy
    shared.mkdir(parents=True, exist_ok=True)
    with (shared / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (shared / "built").exists():
            _materialize_sample(shared / "data")
            (shared / "built").touch()
    shutil.copytree(shared / "data", own_copy)
    return own_copy


@pytest.fixture(scope="module")
def upload_deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UploadDeployment]:
    """A deployment that takes uploads, indexed once for the module's tests."""
    from tests.dagster_daemon import upload_deployment as build_upload_deployment

    with build_upload_deployment(tmp_path_factory.mktemp("uploads")) as built:
        yield built


GENERATED_DOCUMENTS = 12


@pytest.fixture
def stage_tables_store(tmp_path: Path) -> DuckDBStore:
    """A store whose stage tables hold 12 generated documents ('doc-0'...'doc-11') of 2
    chunks each ('doc-0-0', 'doc-0-1'...), every chunk with 3 keywords and a FAQ."""
    store = DuckDBStore(tmp_path / "lorehouse.duckdb")
    with store.connect() as connection:
        connection.execute(
            "INSERT INTO documents_raw SELECT 'doc-' || i, 'file:///corpus', 'p/' || i || '.md', "
            "'md', 100, sha256(i::VARCHAR), now(), ['public'], now() "
            f"FROM range({GENERATED_DOCUMENTS}) t(i)"
        )
        connection.execute(
            "INSERT INTO documents_parsed SELECT 'doc-' || i, sha256(i::VARCHAR), 'Policy ' || i, "
            "'# Policy', '[]', 1, 'markdown', '1', 1.0, [], now() "
            f"FROM range({GENERATED_DOCUMENTS}) t(i)"
        )
        connection.execute(
            "INSERT INTO chunks SELECT 'doc-' || i || '-' || j, 'doc-' || i, j, ['Rules'], "
            "'text', 'text', 1, 1, false, 5, ['public'], 'fp', now(), 'en' "
            f"FROM range({GENERATED_DOCUMENTS}) t(i), range(2) s(j)"
        )
        connection.execute(
            "INSERT INTO enriched_chunks SELECT chunk_id, doc_id, NULL, "
            "['What does ' || chunk_id || ' say?'], ['leave', 'pay', chunk_id], "
            "'extractive', 'bundled', 'v1', 'enriched', NULL FROM chunks"
        )
        connection.execute(
            "INSERT INTO document_enrichment (doc_id, summary, generated_title, "
            "enrichment_mode, model, status, error) SELECT 'doc-' || i, 'About leave.', NULL, "
            f"'extractive', 'bundled', 'enriched', NULL FROM range({GENERATED_DOCUMENTS}) t(i)"
        )
    return store


def default_embedder() -> OnnxMiniLMEmbedder:
    """The bundled model as the composition root builds it from the environment's settings
    (one per process and configuration)."""
    return Lorehouse().bundled_model()


def shown(answer: dict | object) -> str:
    """Everything a reader is shown of an answer (a response, or its JSON in whole or in
    part): the lead, then each excerpt under its number, as `lorehouse eval answers` reads it.
    A test about something other than the assertion checks the fact here: an answer that
    asserts no lead still shows it."""
    body = answer if isinstance(answer, dict) else answer.model_dump()  # type: ignore[attr-defined]
    excerpts = [
        f"[{excerpt['number']}] " + " ".join(sentence["text"] for sentence in excerpt["sentences"])
        for excerpt in body.get("excerpts", [])
    ]
    return "\n\n".join([body["answer"], *excerpts])
