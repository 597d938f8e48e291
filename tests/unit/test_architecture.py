"""The shape of the code base: framework-free domain library, one composition root, a CLI
that does not need the HTTP API."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from lorehouse.settings import REPO_ROOT

FRAMEWORKS = {"dagster", "dagster_aws", "dagster_webserver", "fastapi", "starlette", "uvicorn"}
#: Stores, model clients and pipelines: built from settings in lorehouse/wiring.py alone, so
#: every entry point gets the same objects with the same options.
BUILT_BY_THE_WIRING = {
    "AskPipeline",
    "Chunker",
    "ChunkIndex",
    "ConversationStore",
    "DuckDBStore",
    "Enricher",
    "LLMClient",
    "LocalFolderSource",
    "Retriever",
    "S3PrefixSource",
    "embedder_for",
}
PRODUCT_PACKAGES = ["lorehouse", "api", "assets", "pipelines", "cli", "evals"]


def _modules(*packages: str) -> Iterator[tuple[Path, ast.Module]]:
    for package in packages:
        for path in sorted((REPO_ROOT / package).rglob("*.py")):
            yield path, ast.parse(path.read_text(), filename=str(path))


def _imported(tree: ast.Module) -> Iterator[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module


def test_lorehouse_imports_no_dagster_or_fastapi() -> None:
    offenders = [
        f"{path.name}: {name}"
        for path, tree in _modules("lorehouse")
        for name in _imported(tree)
        if name.split(".")[0] in FRAMEWORKS
    ]
    assert not offenders


def test_parsing_calls_no_model() -> None:
    """Parsing turns bytes into Markdown alone: no parser imports a model client, nor
    names one among the libraries the registry loads for it when it runs."""
    from lorehouse.models import FileType
    from lorehouse.parsing.registry import load_builtin_parsers, parser_for

    models = ("lorehouse.embedding", "lorehouse.llm", "litellm", "onnxruntime")
    assert not _importing("lorehouse/parsing", models)
    load_builtin_parsers()
    parsers = [parser for kind in FileType if (parser := parser_for(kind)) is not None]
    loaded = [library for parser in parsers for library in parser.libraries]
    assert loaded
    assert not [library for library in loaded if library.startswith(models)]


def test_the_cli_does_not_import_the_api() -> None:
    offenders = [
        f"{path.name}: {name}"
        for path, tree in _modules("cli")
        for name in _imported(tree)
        if name.split(".")[0] in {"api", "fastapi", "starlette"}
    ]
    assert not offenders


def test_only_the_wiring_builds_stores_clients_and_pipelines() -> None:
    wiring = REPO_ROOT / "lorehouse" / "wiring.py"
    offenders = []
    for path, tree in _modules(*PRODUCT_PACKAGES):
        if path == wiring:
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            if name in BUILT_BY_THE_WIRING:
                offenders.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno} {name}(...)")
    assert not offenders, "\n".join(offenders)


def _calls_outside_functions(tree: ast.Module, name: str) -> Iterator[int]:
    """Lines of module-level calls of `name` (run on import), skipping function bodies."""
    pending: list[ast.AST] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == name:
            yield node.lineno
        pending.extend(ast.iter_child_nodes(node))


def test_settings_are_read_when_the_definitions_are_built_not_on_import() -> None:
    """Importing an asset, job or sensor module reads no settings; the code location reads
    them once, where it builds its Definitions."""
    definitions = REPO_ROOT / "pipelines" / "definitions.py"
    offenders = [
        f"{path.relative_to(REPO_ROOT)}:{line}"
        for path, tree in _modules("assets", "pipelines", "lorehouse", "evals", "api", "cli")
        for line in _calls_outside_functions(tree, "get_settings")
    ]
    assert offenders == [f"{definitions.relative_to(REPO_ROOT)}:{_defs_line(definitions)}"]


def _defs_line(path: Path) -> int:
    return next(
        number
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if line.startswith("defs = ")
    )


#: The index side: stage runners and the store writers.
INDEX_SIDE = ("lorehouse.stages", "lorehouse.stores")


def _importing(package: str, forbidden: tuple[str, ...]) -> list[str]:
    return [
        f"{path.relative_to(REPO_ROOT)}: {name}"
        for path, tree in _modules(package)
        for name in _imported(tree)
        if name.startswith(forbidden)
    ]


def test_no_module_imports_another_modules_private_names() -> None:
    """A leading underscore says "only this module relies on it": a name another module
    needs is part of the interface and is named so."""
    offenders = [
        f"{path.relative_to(REPO_ROOT)}: {node.module}.{alias.name}"
        for path, tree in _modules(*PRODUCT_PACKAGES)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0
        if node.module.split(".")[0] in PRODUCT_PACKAGES
        for alias in node.names
        if alias.name.startswith("_")
    ]
    assert not offenders


#: Lines from which a module of lorehouse/ must say, in its opening docstring, why it is one
#: module ("Longer than most modules because ..."): past it a file usually holds several
#: concerns, and a reader should learn which it is before reading it.
LONG_MODULE_LINES = 500


def test_a_long_module_says_why_it_is_one() -> None:
    unexplained = [
        f"{path.relative_to(REPO_ROOT)} ({lines} lines)"
        for path, tree in _modules("lorehouse")
        if (lines := len(path.read_text().splitlines())) > LONG_MODULE_LINES
        and "longer than" not in (ast.get_docstring(tree) or "").lower()
    ]
    assert not unexplained


def test_search_reads_the_tables_without_the_index_side() -> None:
    """Search and the index side meet at the table readers (`lorehouse.search.tables`): the
    writers subclass them, and search never reaches a writer or a stage."""
    assert not _importing("lorehouse/search", INDEX_SIDE)


def test_the_api_serves_from_the_table_readers() -> None:
    """The HTTP API holds the chunk index as search reads it (`Lorehouse.chunk_reader`), not
    the writer the stages use: a route cannot write the index, and a server process opens
    no writer's state."""
    assert not _importing("api", ("lorehouse.stores.lance_index", "lorehouse.stages"))
    deps = (REPO_ROOT / "api" / "deps.py").read_text(encoding="utf-8")
    assert "chunk_index()" not in deps


def _within(name: str, package: str) -> bool:
    """Whether the imported `name` is `package` or one of its modules."""
    return name == package or name.startswith(package + ".")


def test_lower_layers_receive_their_defaults_from_the_wiring() -> None:
    """Only the composition root reads the deployment's settings: every other module of the
    core is handed its values (a table's thresholds, the answer options, the query cache), so
    a default is written once, in its group's module of `lorehouse/settings/`, and a Settings
    built in code is obeyed everywhere."""
    readers = {"wiring.py", "settings_docs.py"}
    offenders = [
        f"{path.relative_to(REPO_ROOT)}: {name}"
        for path, tree in _modules("lorehouse")
        if not (path.parent.name == "lorehouse" and path.name in readers)
        and path.parent != REPO_ROOT / "lorehouse" / "settings"
        for name in _imported(tree)
        if _within(name, "lorehouse.settings") or _within(name, "lorehouse.wiring")
    ]
    assert not offenders


def test_search_ranks_by_one_profile() -> None:
    """Every number search ranks by is in `lorehouse.search.ranking`, so a change of the
    ranking is a change of that one module."""
    # No other module of search holds a ranking constant of its own.
    names = {"RRF_K", "MAXSIM_DEPTH", "MAXSIM_WEIGHT", "CROSS_LINGUAL_SHARE"}
    offenders = [
        f"{path.relative_to(REPO_ROOT)}: {target.id}"
        for path, tree in _modules("lorehouse/search")
        if path.name != "ranking.py"
        for node in tree.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
        and (target.id in names or target.id.endswith(("_WEIGHT", "_RRF_K")))
    ]
    assert not offenders


def test_answering_never_touches_the_index_side() -> None:
    assert not _importing("lorehouse/agents", INDEX_SIDE)


def test_answering_reads_hits_not_chunker_or_parser_internals() -> None:
    """Text is read one way everywhere (`lorehouse.text`); answering needs no chunker or
    parser to read a hit."""
    assert not _importing("lorehouse/agents", ("lorehouse.chunking", "lorehouse.parsing"))


#: The shared records and contracts every layer reads, and the package's own import.
KERNEL = (
    "__init__.py",
    "models.py",
    "schemas.py",
    "errors.py",
    "display.py",
    "api_keys.py",
    "slack_access.py",
    "offline.py",
)


def test_the_records_know_nothing_of_how_they_are_built() -> None:
    """The kernel imports neither the settings nor the composition root: a record or a
    contract reads the same whatever the deployment, and importing the package configures
    nothing but the offline switches."""
    offenders = [
        f"{path.relative_to(REPO_ROOT)}: {name}"
        for path, tree in _modules("lorehouse")
        if path.parent == REPO_ROOT / "lorehouse" and path.name in KERNEL
        for name in _imported(tree)
        if _within(name, "lorehouse.settings") or _within(name, "lorehouse.wiring")
    ]
    assert not offenders
    assert all((REPO_ROOT / "lorehouse" / name).exists() for name in KERNEL)


def test_assets_do_not_import_the_code_location() -> None:
    """The assets and the resources they hold are one layer, the jobs, sensors and
    Definitions that gather them the next: `pipelines` imports `assets`, never the reverse."""
    assert not _importing("assets", ("pipelines",))
