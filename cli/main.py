"""The `lorehouse` command line: materialize the asset graph and inspect what it produced.

Everything printed that a document, a reader, a model or the command line supplied (paths,
titles, chunk text, questions, answers, comments, error messages) goes through `shown`, so
it is printed as text: never read as Rich markup, never obeyed as a terminal control.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import traceback
import warnings
from collections import Counter
from contextvars import ContextVar
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from typer.core import TyperGroup

from lorehouse.display import pages_label, shown
from lorehouse.models import MAX_QUESTION_CHARS, READABLE_FILE_TYPES, SearchMode
from lorehouse.settings import Settings, get_settings, unknown_variables
from lorehouse.stages.progress import ProgressCallback
from lorehouse.wiring import Lorehouse

if TYPE_CHECKING:
    from collections.abc import Callable

    from dagster import DagsterInstance
    from rich.progress import Progress

    from evals.explain import EvidenceMiss
    from lorehouse.agents.ask import Citation
    from lorehouse.search.retriever import Retriever
    from lorehouse.search.tables import ChunkTable
    from lorehouse.stores import DuckDBStore

#: Characters of a chunk id `search` shows; `show` takes them back.
SHORT_ID = 10


class LorehouseGroup(TyperGroup):
    """The command group: an error no command expected is one line naming it, not a
    traceback, unless --debug asks for the stack."""

    def invoke(self, ctx: typer.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, typer.TyperException):  # exits and usage errors
            raise
        except Exception as error:
            if ctx.params.get("debug"):
                raise
            console.print(
                f"[red]{shown(type(error).__name__)}: {shown(error)}[/red] "
                "(`lorehouse --debug ...` prints where it happened)",
                highlight=False,
                soft_wrap=True,
            )
            raise typer.Exit(1) from error


app = typer.Typer(
    cls=LorehouseGroup,
    help=(
        "Lorehouse: document question answering over your own files.\n\n"
        "The data folder is LOREHOUSE_DATA_DIR, else the nearest `.lorehouse` folder in the "
        "working directory or above it, else ~/.local/share/lorehouse."
    ),
    # Plain help: flags read as flags ("--trace  Show each step"), not "<bool>".
    rich_markup_mode=None,
)
# No emoji codes: a comment or a title saying ":warning:" is printed as written.
console = Console(stderr=True, emoji=False)
out = Console(emoji=False)
#: Piped output's width (CI logs, `| less`) when COLUMNS does not say: rich's 80-column
#: default would wrap tables and passages a reader then pieces together.
PIPED_WIDTH = 160
#: Whether this command was given --debug: set before every command, as the width is.
DEBUG: ContextVar[bool] = ContextVar("debug", default=False)


@app.callback()
def _before_every_command(
    debug: Annotated[
        bool,
        typer.Option(
            "--debug", help="Print the stack of an error, and Dagster's whole log of a run"
        ),
    ] = False,
) -> None:
    """Before every command: the terminal's width, COLUMNS when set, else PIPED_WIDTH. Decided
    per command rather than at import, so a process running several commands (a test, a
    notebook) prints each at the width of its own moment. Then the settings, so a bad
    LOREHOUSE_* value stops the command before it starts anything."""
    out.width = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else PIPED_WIDTH
    DEBUG.set(debug)
    _settings_or_exit()


def _debug() -> bool:
    """Whether the command line asked for stacks (`lorehouse --debug ...`)."""
    return DEBUG.get()


def _refuse(message: str, error: BaseException | None = None, exit_code: int = 2) -> NoReturn:
    """`message` in red on one line (a mistake to fix, so its cause and the fix), the stack
    of `error` too with --debug, then the exit: 2 for a usage or configuration mistake."""
    console.print(f"[red]{shown(message)}[/red]", highlight=False, soft_wrap=True)
    if error is not None and _debug():
        traceback.print_exception(error)
    raise typer.Exit(exit_code) from error


def _settings_or_exit() -> None:
    """The settings, or one line per bad value naming its variable, what it was and what it
    must be: the model's own error names fields rather than variables, and adds a line for
    each setting whose default is derived from a bad one. First any LOREHOUSE_* variable
    that is no setting, which the settings would pass over."""
    from pydantic import ValidationError

    unknown = unknown_variables(os.environ, Path(".env"))
    for name, closest in unknown:
        where = "" if name in os.environ else " (in .env)"
        fix = f"did you mean {closest}?" if closest else "docs/configuration.md lists the settings"
        console.print(f"[red]{shown(name)}{where} is not a setting; {fix}[/red]", highlight=False)
    if unknown:
        raise typer.Exit(2)
    try:
        get_settings()
    except ValidationError as error:
        for item in error.errors():
            if item["type"] == "default_factory_not_called":
                continue
            name = "LOREHOUSE_" + "_".join(str(part) for part in item["loc"]).upper()
            given = shown(repr(item["input"]))[:80] if "input" in item else "(unset)"
            console.print(f"[red]{name}={given}: {shown(item['msg'])}[/red]", highlight=False)
        raise typer.Exit(2) from error


@app.command()
def materialize(
    select: Annotated[
        str, typer.Option("--select", help="Dagster asset selection, e.g. 'parsed_documents'")
    ] = "*",
    partitions: Annotated[
        str | None,
        typer.Option(
            "--partitions",
            help="Only the per-partition stages of these index partitions: p07, or p00...p07 "
            "(a run of its own, as a backfill runs a partition; run without it to merge)",
        ),
    ] = None,
) -> None:
    """Build the index: parse, chunk and embed the documents.

    Runs the asset graph in this process, with progress, then prints what the store holds.
    """
    import dagster as dg

    from assets.policies import SHARED_STORES_POOL
    from cli.run_log import failure_lines, terminal_logger
    from lorehouse.stores.partitions import partition_keys
    from pipelines.jobs import INDEX_JOB, TRIGGER_TAG
    from pipelines.local_runs import (
        free_slots_of_dead_runs,
        local_run_tags,
        runs_with_workspace_origin,
    )

    with warnings.catch_warnings():
        # The assets take beta parameters on purpose; the warning is for their authors.
        warnings.simplefilter("ignore", dg.BetaWarning)
        from pipelines.definitions import defs

    settings = get_settings()
    graph = defs.resolve_asset_graph()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.BetaWarning)
        try:
            keys = dg.AssetSelection.from_string(select).resolve(graph)
        except Exception as error:
            console.print(f"[red]Invalid selection {shown(repr(select))}: {shown(error)}[/red]")
            raise typer.Exit(2) from error
    tags = {TRIGGER_TAG: "cli"}
    if partitions is not None:
        first, dots, last = partitions.partition("...")
        last = last if dots else first
        known = partition_keys(settings.index_partitions)
        # A range reads first to last ("p03...p01" would run nothing and report success).
        if first not in known or last not in known or known.index(first) > known.index(last):
            console.print(
                f"[red]{shown(repr(partitions))} names no partition range of the "
                f"{len(known)} index partitions ({known[0]} to {known[-1]}).[/red]"
            )
            raise typer.Exit(2)
        keys = {key for key in keys if graph.get(key).partitions_def is not None}
        tags |= {
            "dagster/asset_partition_range_start": first,
            "dagster/asset_partition_range_end": last,
        }
    if not keys:
        console.print(f"[red]Selection {shown(repr(select))} matches no asset.[/red]")
        raise typer.Exit(2)
    if keys & {dg.AssetKey("raw_documents"), dg.AssetKey("parsed_documents")}:
        _source_or_exit(settings)
    console.print(
        f"[bold]Materializing[/bold] {', '.join(sorted(k.to_user_string() for k in keys))} "
        f"from {shown(settings.source_uri)} into {shown(settings.data_dir.resolve())}"
    )
    # index_job, as the schedule and the sensor run it: the run says it came from the CLI, so
    # the UI lists it like theirs, and which process runs it. With the workspace's origin, the
    # Overview timeline draws it in index_job's row too. Its shared-store steps claim the
    # deployment's pool slot like every run's.
    # The instance once the arguments are known to be good: a bad one is refused even where
    # DAGSTER_HOME names a folder not made yet.
    instance = (
        dg.DagsterInstance.get()
        if os.environ.get("DAGSTER_HOME")
        else dg.DagsterInstance.ephemeral()
    )
    tags |= local_run_tags()
    for run_id in free_slots_of_dead_runs(instance, [SHARED_STORES_POOL]):
        console.print(
            f"[yellow]Run {run_id} of this machine was killed holding the shared stores' "
            "pool slot: marked failed and its slot freed.[/yellow]"
        )
    job = defs.resolve_job_def(INDEX_JOB)
    if not _debug():
        job = job.with_logger_defs({"console": terminal_logger})
    with runs_with_workspace_origin(instance, INDEX_JOB):
        result = job.execute_in_process(
            instance=instance,
            asset_selection=sorted(keys),
            raise_on_error=False,
            run_config={"loggers": {"console": {"config": {"log_level": "INFO"}}}},
            tags=tags,
        )
    console.print(f"Dagster run {result.run_id} ({INDEX_JOB})", highlight=False)
    for evaluation in result.get_asset_check_evaluations():
        mark = "[green]passed[/green]" if evaluation.passed else "[red]FAILED[/red]"
        console.print(
            f"check {evaluation.asset_key.to_user_string()}.{evaluation.check_name}: {mark}"
        )
    if not result.success:
        for line in failure_lines(result, instance):
            console.print(f"[red]{shown(line)}[/red]", highlight=False, soft_wrap=True)
        console.print(
            "The run failed; see the log above."
            if _debug()
            else "The run failed. `lorehouse --debug materialize ...` prints Dagster's whole "
            "log, each stack included.",
            soft_wrap=True,
        )
        raise typer.Exit(1)
    if _listed_nothing(result):
        _refuse(
            f"The source {settings.source_uri} has no documents, so nothing was indexed: put "
            "documents there, or set LOREHOUSE_SOURCE_URI to the folder (or s3://, "
            "gdrive://, ... source) that holds them."
        )
    if partitions is not None:
        console.print(
            f"Partitions {shown(partitions)} are built and published: search reads them now."
            if dg.AssetKey("published_partition") in keys
            else f"Partitions {shown(partitions)} are built; materializing published_partition "
            "for them makes them searchable."
        )
        return
    _print_summary(Lorehouse(settings).feature_store())


def _source_or_exit(settings: Settings) -> None:
    """The configured source can be opened (its folder exists, its address reads as one),
    or one line saying why and what to set, before a run that would fail on it starts."""
    from lorehouse.errors import SourceError

    try:
        Lorehouse(settings).document_source()
    except SourceError as error:
        _refuse(
            f"LOREHOUSE_SOURCE_URI={settings.source_uri!r}: {error}. Set it to the folder "
            "of your documents, or an s3://, gdrive://, confluence+https://, sharepoint:// "
            "or web site address (docs/connectors.md).",
            error,
        )


def _listed_nothing(result: Any) -> bool:
    """Whether the run's inventory (when it ran) found no document in the source."""
    for event in result.get_asset_materialization_events():
        materialization = event.materialization
        if materialization.asset_key.to_user_string() == "raw_documents":
            rows = materialization.metadata.get("dagster/row_count")
            return rows is not None and rows.value == 0
    return False


@app.command()
def docs(
    status: Annotated[
        str | None, typer.Option(help="Only documents with this status: parsed, failed, pending")
    ] = None,
) -> None:
    """List the documents and whether each was parsed.

    Each document's format, status (parsed, failed or pending), why it failed, who may read
    it, and its title.
    """
    status = _one_of(status.lower() if status else None, DOCUMENT_STATUSES, "--status")
    settings = get_settings()
    if not settings.duckdb_path.exists():
        console.print(
            f"No store at {shown(settings.duckdb_path)}; run `lorehouse materialize` first."
        )
        raise typer.Exit(1)
    rows = Lorehouse(settings).feature_store().document_statuses(status=status)
    if not rows:
        which = f"{shown(status)} " if status else ""
        console.print(f"No {which}documents in {shown(settings.data_dir.resolve())}.")
        return
    table = Table("document", "type", "status", "reason", "access", "title / detail")
    for row in rows:
        colour = {"parsed": "green", "failed": "red"}.get(row.status, "yellow")
        table.add_row(
            shown(row.rel_path),
            shown(row.file_type),
            f"[{colour}]{shown(row.status)}[/{colour}]",
            shown(row.reason or ""),
            shown(",".join(row.acl_groups) or "public"),
            shown((row.detail or row.title or "")[:80]),
        )
    out.print(table)


#: How each partition state reads in the table.
STATE_COLOURS = {
    "published": "green",
    "running": "cyan",
    "queued": "yellow",
    "failed": "red",
    "stalled": "bold red",
    "never built": "dim",
}


@app.command()
def partitions(
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object per partition instead")
    ] = False,
) -> None:
    """Show where each index partition's build stands.

    Reads the Dagster instance at DAGSTER_HOME, where the schedule, the sensors, the UI and
    `lorehouse materialize` record their runs: for each partition its state and since when,
    the run, and why it failed, what it waits behind, or why it counts as stalled (no event
    for LOREHOUSE_PARTITION_STALL_SECONDS).
    """
    import dagster as dg

    from lorehouse.stores.partitions import partition_keys
    from pipelines.partition_state import SHORT_RUN_ID, partition_states

    settings = get_settings()
    instance = _dagster_instance_or_exit(settings)
    with instance:
        states = partition_states(
            instance, partition_keys(settings.index_partitions), settings.partition_stall_seconds
        )
        recorded = bool(instance.get_run_records(dg.RunsFilter(), limit=1))
    if as_json:
        print(json.dumps([state.as_json() for state in states], indent=2))
        return
    table = Table("partition", "state", "since", "run", "detail")
    for state in states:
        colour = STATE_COLOURS[state.state]
        table.add_row(
            state.partition,
            f"[{colour}]{state.state}[/{colour}]",
            _when(state.since),
            (state.run_id or "")[:SHORT_RUN_ID],
            shown(state.detail),
        )
    out.print(table)
    counts = Counter(state.state for state in states)
    console.print(
        f"{len(states)} partitions: "
        + ", ".join(f"{n} {name}" for name, n in counts.most_common())
        + "."
    )
    if not recorded:
        console.print(
            f"The Dagster instance at {shown(os.environ['DAGSTER_HOME'])} holds no run: "
            "`lorehouse materialize` records its runs there only while DAGSTER_HOME is set.",
            soft_wrap=True,
        )
    elif counts["failed"] or counts["stalled"]:
        console.print(
            "Retry a partition alone from its run in the Dagster UI, or with "
            "`lorehouse materialize --partitions KEY`.",
            soft_wrap=True,
        )


def _dagster_instance_or_exit(settings: Settings) -> DagsterInstance:
    """The Dagster instance at DAGSTER_HOME, or a line saying how to point at one: without
    it no run is recorded anywhere this process can read."""
    import dagster as dg

    home = os.environ.get("DAGSTER_HOME")
    if not home:
        found = settings.data_dir / "dagster_home"
        hint = (
            f"`export DAGSTER_HOME={shown(found)}` (the instance `make dev` uses)"
            if found.is_dir()
            else "`export DAGSTER_HOME=...` (the folder of the Dagster instance the UI and "
            "daemon use; `make dev` makes one in the data folder)"
        )
        console.print(
            f"No Dagster instance: DAGSTER_HOME is not set, so there are no runs to read. "
            f"Set it, e.g. {hint}, then run `lorehouse partitions` again.",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(1)
    if not Path(home).is_dir():
        console.print(
            f"DAGSTER_HOME={shown(home)} is not a folder: set it to the folder of the Dagster "
            "instance the UI and daemon use (it holds their dagster.yaml).",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(1)
    return dg.DagsterInstance.get()


def _when(timestamp: float | None) -> str:
    """`14:05 (12 min ago)` in local time, the date before it on another day; empty when
    there is no time."""
    if timestamp is None:
        return ""
    import time
    from datetime import datetime

    from pipelines.partition_state import duration_text

    local = datetime.fromtimestamp(timestamp)
    shape = "%H:%M" if local.date() == datetime.now().date() else "%Y-%m-%d %H:%M"
    return f"{local.strftime(shape)} ({duration_text(time.time() - timestamp)} ago)"


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="What to look for")],
    mode: Annotated[SearchMode, typer.Option(help="How to rank")] = SearchMode.HYBRID,
    top_k: Annotated[int, typer.Option("--top-k", min=1, max=100)] = 8,
    rerank: Annotated[str | None, typer.Option(help="none or a litellm rerank model")] = None,
    passage_words: Annotated[
        int | None,
        typer.Option(
            "--passage-words",
            min=0,
            max=5000,
            help="Each hit as the passage of consecutive chunks holding it, up to N words",
        ),
    ] = None,
    group: Annotated[
        list[str] | None,
        typer.Option("--group", "-g", help="Access group to search as (repeatable)"),
    ] = None,
    doc_id: Annotated[list[str] | None, typer.Option("--doc-id", help="Only this document")] = None,
    file_type: Annotated[list[str] | None, typer.Option("--file-type", help="pdf, docx...")] = None,
    explain: Annotated[
        bool, typer.Option("--explain", help="Also each retriever's rank and score")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON")] = False,
) -> None:
    """Search the index and print the best passages.

    It searches as the API does: without --group only public documents are seen. Each hit
    is its title, section, page and short chunk id, then its passage around the lines that
    match (the rest marked "…"); `lorehouse show ID` prints the chunk in full.
    """
    from lorehouse.search.filters import SearchFilters

    _question_text(query, "query")
    file_types = [
        _one_of(kind.lower(), READABLE_FILE_TYPES, "--file-type") for kind in file_type or []
    ]
    settings = get_settings()
    retriever = _retriever(settings)
    filters = SearchFilters(doc_ids=doc_id or None, file_types=file_types or None)
    result = _or_exit(
        lambda: retriever.search(
            query,
            top_k=top_k,
            mode=mode,
            filters=filters,
            caller_groups=group or [],
            rerank=rerank,
            passage_words=passage_words,
        )
    )
    if as_json:
        print(result.model_dump_json(indent=2))
        return
    from cli.hits import PASSAGE_WORDS, Matcher, hit_block

    matcher = Matcher(query)
    stages = sorted({stage for hit in result.hits for stage in hit.scores}) if explain else []
    words = max(PASSAGE_WORDS, passage_words or 0)
    for number, hit in enumerate(result.hits):
        if number:
            out.print()
        out.print(hit_block(hit, matcher, out.width, SHORT_ID, words, stages), highlight=False)
    if not result.hits:
        console.print(
            "No passage matches."
            if group
            else "No public passage matches; --group searches as a member of a group too."
        )
    if result.asks:
        asks = "; ".join(f"'{shown(ask)}'" for ask in result.asks)
        console.print(f"Searched whole and per ask ({asks}); the hits take turns.")
    for warning in result.warnings:
        console.print(f"[yellow]{shown(warning)}[/yellow]")


@app.command()
def show(
    chunk: Annotated[str, typer.Argument(help="A chunk id, or its first characters")],
    group: Annotated[
        list[str] | None,
        typer.Option("--group", "-g", help="Access group to read as (repeatable)"),
    ] = None,
) -> None:
    """Print one chunk in full, by the id search shows.

    First its title, file and page, then its section and full id, then its text, tables
    drawn as tables.
    """
    from cli.hits import Indented, passage_view
    from lorehouse.search.tables import sql_string

    settings = get_settings()
    lorehouse = Lorehouse(settings)
    index = _require_index(settings, lorehouse)
    prefix = chunk.strip().lower()
    if not prefix.isalnum():
        console.print("[red]A chunk id is letters and digits.[/red]")
        raise typer.Exit(2)
    matches = index.rows(f"chunk_id LIKE {sql_string(prefix + '%')}", ["chunk_id"], 2)
    named = shown(repr(chunk if len(chunk) <= SHOWN_ID_CHARS else chunk[:SHOWN_ID_CHARS] + "…"))
    if len(matches) != 1:
        console.print(
            f"[red]{'No' if not matches else 'More than one'} chunk starts with {named}.[/red]"
        )
        raise typer.Exit(1)
    found = lorehouse.retriever().chunk_preview(matches[0]["chunk_id"], group or [], window=0)
    if found is None:
        console.print(f"[red]No chunk {named} you may read.[/red]")
        raise typer.Exit(1)
    row = found[0]
    where = " > ".join(row["heading_path"])
    page = pages_label(row["rel_path"], row["page_start"], row["page_end"])
    out.print(
        f"[bold]{shown(row['title'] or row['rel_path'])}[/bold]  {shown(row['rel_path'])}"
        + (f"  {page}" if page else "")
    )
    out.print(f"[dim]{shown(where) + '  ·  ' if where else ''}{shown(row['chunk_id'])}[/dim]\n")
    # The breadcrumb is the line above: the text without the one it starts with.
    out.print(
        Indented(passage_view(row["text_chat"], row["heading_path"], words=None, plain=False), 0)
    )


@app.command()
def ask(
    question: Annotated[str, typer.Argument(help="The question")],
    top_k: Annotated[int, typer.Option("--top-k", min=1, max=50)] = 8,
    group: Annotated[
        list[str] | None,
        typer.Option("--group", "-g", help="Access group to ask as (repeatable)"),
    ] = None,
    trace: Annotated[bool, typer.Option("--trace", help="Show each step")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the response as JSON")] = False,
) -> None:
    """Answer a question with numbered citations.

    Without an LLM the answer is extractive: sentences of the retrieved passages. Set
    LOREHOUSE_LLM_MODEL (any litellm model string, with its key) to have a model rewrite the
    question, choose sources and write the answer.
    """
    _question_text(question, "question")
    settings = get_settings()
    lorehouse = Lorehouse(settings)
    _require_index(settings, lorehouse)
    pipeline = lorehouse.ask_pipeline()
    response = _or_exit(lambda: pipeline.ask(question, top_k=top_k, caller_groups=group or []))
    if as_json:
        print(response.model_dump_json(indent=2))
        return
    label = response.mode + (
        " (degraded: " + response.degraded_reason + ")" if response.degraded else ""
    )
    made = f"[dim]({shown(label)})[/dim]"
    if response.answerable and not response.asserted:
        # Nothing is asserted: the first line says so, in place of an "A:" a reader would
        # take for the answer, and the passages below it are the answer.
        first = f"[yellow]Not stated directly; the closest passages:[/yellow] {made}"
    else:
        first = f"[bold]A[/bold] {made}: {shown(response.answer)}"
    out.print(f"[bold]Q:[/bold] {shown(question)}\n{first}\n", highlight=False)
    # The lead above; what each source says below it, apart, the supporting sentences bold.
    excerpts = {excerpt.number: excerpt for excerpt in response.excerpts}
    for citation in [*response.citations, *response.related]:
        label = f"[{citation.number}]" if citation.number else "related:"
        out.print(shown(f"  {label} {_where(citation)}"), highlight=False)
        if excerpt := excerpts.get(citation.number):
            said = " ".join(
                f"[bold]{shown(s.text)}[/bold]" if s.supports else shown(s.text)
                for s in excerpt.sentences
            )
            out.print(Padding(said, (0, 0, 0, 6)), highlight=False)
    if trace:
        table = Table("step", "status", "ms", "detail")
        for step in response.trace.steps:
            table.add_row(
                shown(step.step), shown(step.status), f"{step.ms:.0f}", shown(step.detail[:100])
            )
        out.print(table)
        out.print(shown(f"queries: {'; '.join(response.optimized_queries)}"))
        out.print(shown(f"sources: {_source_names(lorehouse, response.trace.sources)}"))
    if pipeline.client is None:
        console.print(
            "[dim]Extractive answer (no LLM). Set LOREHOUSE_LLM_MODEL to a litellm model "
            "(openai/gpt-4o-mini, anthropic/..., ollama/...) for written answers.[/dim]"
        )


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _where(citation: Citation) -> str:
    """A cited source as a reader finds it: title, path, section and pages."""
    section = (
        citation.heading_path[1:]
        if citation.heading_path[:1] == [citation.title]
        else citation.heading_path
    )
    page = pages_label(citation.rel_path, citation.page_start, citation.page_end)
    where = ", ".join(part for part in (" > ".join(section), page) if part)
    return f"{citation.title or citation.rel_path} ({citation.rel_path})" + (
        f" - {where}" if where else ""
    )


def _source_names(lorehouse: Lorehouse, sources: list[str] | str) -> str:
    """The documents the source identifier chose, by title and path (ids mean nothing)."""
    if sources == "all":
        return "all documents"
    names = lorehouse.feature_store().document_names(sources)
    return "; ".join(
        f"{names[doc_id][0]} ({names[doc_id][1]})" if doc_id in names else doc_id
        for doc_id in sources
    )


Answer = TypeVar("Answer")


def _or_exit(
    action: Callable[[], Answer],
    errors: type[Exception] | tuple[type[Exception], ...] = (ValueError, RuntimeError),
    exit_code: int = 1,
) -> Answer:
    """What `action` returns; one of `errors` (by default a bad query or an unusable index)
    is printed in red and exits with `exit_code`."""
    try:
        return action()
    except errors as error:
        console.print(f"[red]{shown(error)}[/red]")
        raise typer.Exit(exit_code) from error


#: Document statuses `lorehouse docs --status` lists.
DOCUMENT_STATUSES = ("parsed", "failed", "pending")
#: Characters of a chunk id an error message repeats (an id is 16 hex digits; more is a typo).
SHOWN_ID_CHARS = 40


def _one_of(value: str | None, allowed: tuple[str, ...], option: str) -> str | None:
    """`value` if it is one of `allowed` (or not given); otherwise a usage error naming them,
    rather than an empty listing that reads as "nothing there"."""
    if value is not None and value not in allowed:
        console.print(
            f"[red]{option} is one of: {', '.join(allowed)} (not {shown(repr(value))})[/red]"
        )
        raise typer.Exit(2)
    return value


def _question_text(text: str, what: str) -> None:
    """The API's bounds on a query or question, kept by the CLI too: not blank, at most
    MAX_QUESTION_CHARS characters."""
    if not text.strip():
        console.print(f"[red]The {what} is empty.[/red]")
        raise typer.Exit(2)
    if len(text) > MAX_QUESTION_CHARS:
        console.print(
            f"[red]The {what} is {len(text):,} characters; at most {MAX_QUESTION_CHARS:,}.[/red]"
        )
        raise typer.Exit(2)


def _retriever(settings: Settings) -> Retriever:
    """The retriever the API builds, or a clear exit when the index is not there."""
    lorehouse = Lorehouse(settings)
    _require_index(settings, lorehouse)
    return lorehouse.retriever()


def _require_index(settings: Settings, lorehouse: Lorehouse | None = None) -> ChunkTable:
    """The chunk index as search reads it (`lorehouse`'s, opened once for the command), or a
    clear exit telling the user to materialize first."""
    index = (lorehouse or Lorehouse(settings)).chunk_reader()
    if not index.exists():
        chosen = (
            "LOREHOUSE_DATA_DIR"
            if os.environ.get("LOREHOUSE_DATA_DIR")
            else "no LOREHOUSE_DATA_DIR, so the nearest .lorehouse folder here or above, "
            "else the user data folder"
        )
        console.print(
            f"No index in {shown(settings.data_dir.resolve())} ({chosen}). Run `lorehouse "
            "materialize` to build one there, or set LOREHOUSE_DATA_DIR to your data folder."
        )
        raise typer.Exit(1)
    return index


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Interface; default LOREHOUSE_API_HOST")] = None,
    port: Annotated[int | None, typer.Option(help="Port; default LOREHOUSE_API_PORT")] = None,
    workers: Annotated[
        int | None, typer.Option(min=1, help="Server processes; default LOREHOUSE_API_WORKERS")
    ] = None,
) -> None:
    """Serve the HTTP API.

    On 127.0.0.1:8000 unless configured otherwise. With LOREHOUSE_API_KEYS_FILE set, every
    request needs a key from that file (`lorehouse keys create`).
    """
    from cli.serving import serve_api

    settings = get_settings()
    _served_files_or_exit(settings)
    serve_api(
        "api.main:create_app",
        host=host or settings.api_host,
        port=port or settings.api_port,
        workers=workers or settings.api_workers,
        keep_alive_seconds=settings.api_keep_alive_seconds,
    )


@app.command()
def mcp() -> None:
    """Serve the MCP tools over stdio, for desktop clients.

    Claude Desktop, an IDE or any MCP client runs `lorehouse mcp` and talks to it over stdin
    and stdout: the same tools as the API's /mcp endpoint (search, ask, get_chunk,
    list_documents), from this machine's index. With LOREHOUSE_API_KEYS_FILE set, it answers
    as the key in LOREHOUSE_MCP_API_KEY, and only what that key may read.
    """
    from lorehouse.api_keys import KeyRing

    settings = get_settings()
    _served_files_or_exit(settings)
    if settings.api_keys_file is not None:
        key = settings.mcp_api_key
        if not key or KeyRing.load(settings.api_keys_file).identify(key) is None:
            _refuse(
                "LOREHOUSE_MCP_API_KEY must hold a key of LOREHOUSE_API_KEYS_FILE "
                "(`lorehouse keys create NAME`): the MCP tools answer as that key."
            )
    _require_index(settings)
    from cli.serving import serve_mcp_stdio

    serve_mcp_stdio()


def _served_files_or_exit(settings: Settings) -> None:
    """The files a server reads as it starts can be read, or one line naming the file, why
    and what to do: inside the server the same error is a traceback of its start-up."""
    from lorehouse.api_keys import KeyRing, KeysFileError
    from lorehouse.slack_access import SlackAccess, SlackAccessError

    if (path := settings.api_keys_file) is not None:
        try:
            KeyRing.load(path)
        except KeysFileError as error:
            fix = (
                "Create it with `lorehouse keys create NAME`"
                if not path.exists()
                else "Fix it (docs/security.md shows its form)"
            )
            _refuse(
                f"LOREHOUSE_API_KEYS_FILE: {error}. {fix}, or unset "
                "LOREHOUSE_API_KEYS_FILE to serve public documents without keys.",
                error,
            )
    if settings.slack_bot_token and settings.slack_signing_secret:
        try:
            SlackAccess.load(settings.slack_access_file)
        except SlackAccessError as error:
            _refuse(
                f"LOREHOUSE_SLACK_ACCESS_FILE: {error}. Fix it (docs/api.md, The Slack bot), "
                "or unset LOREHOUSE_SLACK_ACCESS_FILE to answer in Slack from public "
                "documents only.",
                error,
            )


eval_app = typer.Typer(
    help="Evaluate retrieval and answers against a golden set.", rich_markup_mode=None
)
app.add_typer(eval_app, name="eval")


#: The golden-set formats `evals.golden_files.load_golden` reads.
GOLDEN_HELP = "Golden set: Lorehouse JSONL, FinanceBench JSONL or Docugami's 10-Q CSV"


@eval_app.command("retrieval")
def eval_retrieval(
    golden: Annotated[Path, typer.Option("--golden", help=GOLDEN_HELP)],
    corpus_root: Annotated[
        Path | None,
        typer.Option("--corpus-root", help="Folder the evidence paths are relative to; checked"),
    ] = None,
    k_max: Annotated[int, typer.Option("--k-max", min=1, max=100)] = 20,
    no_agentic: Annotated[
        bool, typer.Option("--no-agentic", help="Skip /v1/ask retrieval")
    ] = False,
    no_naive: Annotated[bool, typer.Option("--no-naive", help="Skip the naive baseline")] = False,
    explain: Annotated[
        bool,
        typer.Option(
            "--explain",
            help=(
                "For each evidence excerpt missed at 8 (default retriever and agentic): not "
                "parsed, split across chunks, excluded by the source identifier, or ranked "
                "below 8 (with its rank in each retriever)"
            ),
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object")] = False,
) -> None:
    """Score every retriever's recall and MRR on a golden set.

    Recall@k (k = 1..K) and MRR of every retriever configuration.

    Why each miss was missed is always stored with the run (DuckDB eval_retrieval_misses);
    --explain prints it.
    """
    from evals.golden_set import GoldenSetError
    from evals.runner import run_for_settings

    settings = _settings_for_golden(golden)
    if corpus_root is not None:
        from evals.check_golden import check_golden

        problems = check_golden(golden, corpus_root)
        if problems:
            for problem in problems[:20]:
                console.print(f"[red]{shown(problem)}[/red]")
            raise typer.Exit(2)
    run = _or_exit(
        lambda: run_for_settings(
            settings, golden, k_max, include_agentic=not no_agentic, include_naive=not no_naive
        ),
        GoldenSetError,
        exit_code=2,
    )
    if as_json:
        summary = run.report.summary()
        if explain:
            summary["misses"] = [asdict(miss) for miss in run.misses]
        print(json.dumps(summary))
        return
    cutoffs = [k for k in (1, 3, 5, 8, 10, 20) if k <= k_max]
    table = Table("retriever", *(f"R@{k}" for k in cutoffs), "MRR", "seconds")
    for result in run.report.results:
        table.add_row(
            result.retriever,
            *(f"{result.recall_at[k]:.2f}" for k in cutoffs),
            f"{result.mrr:.3f}",
            f"{result.seconds:.1f}",
        )
    out.print(table)
    by_language = [r for r in run.report.results if r.by_language]
    if by_language:
        languages = sorted({language for r in by_language for language in r.by_language})
        per_language = Table("retriever", *(f"R@8 {language}" for language in languages))
        for result in by_language:
            per_language.add_row(
                result.retriever,
                *(
                    f"{result.by_language[language][min(8, k_max)]:.2f}"
                    if language in result.by_language
                    else "-"
                    for language in languages
                ),
            )
        out.print(per_language)
    if explain:
        _print_misses(run.misses)
    else:
        default = run.report.result(run.report.default_retriever)
        for missed in default.misses(min(8, k_max))[:15]:
            out.print(shown(f"  miss@8 [{missed.case_type}] {missed.case_id}: {missed.question}"))


def _and_languages(summary: dict) -> dict:
    """A summary's rows by case type, then by question language (`in de`) where named."""
    languages = {f"in {k}": v for k, v in summary.get("by_language", {}).items()}
    return {**summary["by_type"], **languages}


def _print_misses(misses: list[EvidenceMiss]) -> None:
    """Counts per reason, then one line per missed excerpt."""
    from evals.explain import MISS_REASONS, miss_counts

    counts = Table("retriever", *MISS_REASONS)
    for retriever, per_reason in miss_counts(misses).items():
        counts.add_row(retriever, *(str(per_reason[reason]) for reason in MISS_REASONS))
    out.print(counts)
    table = Table("retriever", "case", "type", "file", "reason", "detail")
    for miss in misses:
        cells = (miss.retriever, miss.case_id, miss.case_type, miss.file, miss.reason, miss.detail)
        table.add_row(*map(shown, cells))
    out.print(table)


@eval_app.command("answers")
def eval_answers(
    golden: Annotated[Path, typer.Option("--golden", help=GOLDEN_HELP)],
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, help="Only the first N cases")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object")] = False,
) -> None:
    """Ask every golden question and score each answer.

    Each question is asked as /v1/ask does. Always: the share of the reference answer's key
    facts (numbers, named terms) the answer states, and whether unanswerable questions are
    declined. With LOREHOUSE_JUDGE_MODEL set, the judge model also grades each answer 0-5.
    """
    from rich.progress import Progress

    from evals.answer_eval import NO_JUDGE
    from evals.golden_set import GoldenSetError
    from evals.runner import run_answer_eval_for_settings

    settings = _settings_for_golden(golden)
    with Progress(console=console, transient=True) as progress:
        answered = _progress_task(progress, "answering")
        report = _or_exit(
            lambda: run_answer_eval_for_settings(settings, golden, limit, answered),
            GoldenSetError,
            exit_code=2,
        )
    if as_json:
        print(json.dumps(report.summary()))
        return
    summary = report.summary()
    facts = summary["key_facts"]
    table = Table("type", "answers", "key facts stated (mean share)", "every key fact stated")
    for case_type, shares in {"all": facts, **_and_languages(facts)}.items():
        if shares.get("answers"):
            table.add_row(
                shown(case_type),
                str(shares["answers"]),
                f"{shares['mean_share']:.2f}",
                f"{shares['all_stated']:.2f}",
            )
    out.print(table)
    out.print(
        f"unanswerable questions declined: {facts['unanswerable_declined']}/{facts['unanswerable']}"
    )
    lead = summary["lead"]
    leads = Table(
        "type",
        "answers",
        "lead states a key fact",
        "lead from the evidence",
        "key facts in lead + excerpts",
        "median lead words",
        "wrongly declined",
        "asserted",
        "asserted leads right",
        title="The lead",
    )
    for case_type, measures in {"all": lead, **_and_languages(lead)}.items():
        if measures.get("answers"):
            leads.add_row(
                shown(case_type),
                str(measures["answers"]),
                _rate(measures["lead_states_fact"]),
                _rate(measures["lead_from_evidence"]),
                _rate(measures["shown_key_facts"]),
                str(measures["median_lead_words"]),
                _rate(measures["wrongly_declined"]),
                _rate(measures["coverage"]),
                _rate(measures["asserted_precision"]),
            )
    out.print(leads)
    out.print(f"unanswerable questions declined (share): {_rate(lead['unanswerable_declined'])}")
    out.print(f"unanswerable questions asserted (share): {_rate(lead['near_misses_asserted'])}")
    if report.judge_model == NO_JUDGE:
        console.print(
            "[yellow]No judge model: set LOREHOUSE_JUDGE_MODEL to a litellm model to have "
            "each answer graded 0-5 as well.[/yellow]"
        )
        return
    judged = f"{summary['n_judged']}/{summary['n_cases']} cases judged"
    out.print(f"judge {shown(report.judge_model)}: {judged}, mean score {summary['mean_score']}")
    labels = Table("label", "cases")
    for label, count in summary["labels"].items():
        labels.add_row(shown(label), str(count))
    out.print(labels)
    worst = Table("case", "type", "score", "label", "reasoning", title="Worst cases")
    for outcome in report.worst(10):
        worst.add_row(
            shown(outcome.case_id),
            shown(outcome.case_type),
            str(outcome.score),
            shown(outcome.label or ""),
            shown(outcome.reasoning or ""),
        )
    out.print(worst)
    for failure in (o for o in report.outcomes if o.judge_error):
        out.print(shown(f"  not judged: {failure.case_id}: {failure.judge_error}"))


@eval_app.command("feedback")
def eval_feedback(
    destination: Annotated[
        Path, typer.Option("--out", help="Golden-set candidates to write (JSONL)")
    ],
    rating: Annotated[
        str | None, typer.Option("--rating", help="Only 'up' or only 'down' verdicts")
    ] = None,
) -> None:
    """Export readers' verdicts as golden-set candidates.

    Each thumbs up or down becomes a candidate to review. Each candidate names the files its
    answer cited with an empty excerpt: copy the evidence from the file, set the type, then
    check it with evals/check_golden.py.
    """
    from evals.feedback import feedback_candidates

    if rating not in (None, "up", "down"):
        console.print("[red]--rating is 'up' or 'down'[/red]")
        raise typer.Exit(2)
    if not destination.parent.is_dir():
        console.print(f"[red]No folder {shown(destination.parent)} to write --out into.[/red]")
        raise typer.Exit(2)
    feedback = Lorehouse(get_settings()).feature_store().feedback()
    if rating is not None:
        feedback = feedback[feedback["rating"] == rating]
    cases = feedback_candidates(feedback)
    _or_exit(
        lambda: destination.write_text(
            "".join(json.dumps(case) + "\n" for case in cases), encoding="utf-8"
        ),
        OSError,
        exit_code=2,
    )
    # Who sent each verdict (the key's name), so the reviewer knows whose proposal it is.
    table = Table("case", "sent by", "rating", "comment", "question", "cited files")
    for case, row in zip(cases, feedback.itertuples(index=False), strict=True):
        table.add_row(
            shown(case["id"]),
            shown(row.caller),
            shown(row.rating),
            shown(row.comment or ""),
            shown(case["question"]),
            shown(", ".join(item["file"] for item in case["evidence"])),
        )
    if cases:
        out.print(table)
    console.print(
        f"{len(cases)} candidates written to {shown(destination)}; fill in each excerpt and "
        "the type."
    )


@eval_app.command("beir")
def eval_beir(
    directory: Annotated[Path, typer.Argument(help="BEIR dataset folder (corpus, queries, qrels)")],
    split: Annotated[str, typer.Option("--split", help="qrels/<split>.tsv to score")] = "test",
    store: Annotated[
        Path | None,
        typer.Option("--store", help="Where to keep its index; default <data_dir>/beir/<name>"),
    ] = None,
    max_queries: Annotated[
        int | None, typer.Option("--max-queries", min=1, help="Score only the first N queries")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object")] = False,
) -> None:
    """Score every retrieval mode on a BEIR dataset.

    nDCG@10, recall@10, recall@100 and MRR@10 of each mode, and its time per query.
    """
    from rich.progress import Progress

    from evals.beir import BeirFormatError
    from evals.runner import run_beir_for_settings

    settings = get_settings()
    with Progress(console=console, transient=True) as progress:
        embedded = _progress_task(progress, "embedding documents")
        queried = _progress_task(progress, "querying")
        report = _or_exit(
            lambda: run_beir_for_settings(
                settings, directory, split, store, max_queries, embedded, queried
            ),
            BeirFormatError,
            exit_code=2,
        )
    if as_json:
        print(json.dumps(report.summary()))
        return
    table = Table(
        "retriever",
        "nDCG@10",
        "R@10",
        "R@100",
        "MRR@10",
        "ms/query",
        title=f"{shown(report.dataset)} ({shown(report.split)}): {report.n_queries} queries, "
        f"{report.n_documents} documents",
    )
    for result in report.results:
        scores = result.scores
        table.add_row(
            result.retriever,
            f"{scores['ndcg@10']:.3f}",
            f"{scores['recall@10']:.3f}",
            f"{scores['recall@100']:.3f}",
            f"{scores['mrr@10']:.3f}",
            f"{result.query_ms_median:.0f}",
        )
    out.print(table)
    console.print(
        f"indexed in {report.index_seconds:.0f} s ({report.documents_embedded} documents embedded)"
    )


def _settings_for_golden(golden: Path) -> Settings:
    """The settings of an eval over a golden set, once the index and the file exist."""
    settings = get_settings()
    _require_index(settings)
    if not golden.is_file():
        console.print(f"[red]No golden set at {shown(golden)}[/red]")
        raise typer.Exit(2)
    return settings


def _progress_task(progress: Progress, description: str) -> ProgressCallback:
    """A done/total callback that drives one bar of a rich Progress."""
    task = progress.add_task(description, total=None)

    def update(done: int, total: int) -> None:
        progress.update(task, completed=done, total=total)

    return update


keys_app = typer.Typer(
    help="API keys and their groups: create, list, revoke (hashed).",
    rich_markup_mode=None,
)
app.add_typer(keys_app, name="keys")

KeysFileOption = Annotated[
    Path | None, typer.Option("--file", help="Keys file; default LOREHOUSE_API_KEYS_FILE")
]


def _keys_file(keys_file: Path | None) -> Path:
    """The keys file a command was given, else the configured one, else a usage error."""
    path = keys_file or get_settings().api_keys_file
    if path is None:
        _refuse("Give --file or set LOREHOUSE_API_KEYS_FILE.")
    return path


@keys_app.command("create")
def create_key(
    name: Annotated[str, typer.Argument(help="Who the key is for")],
    group: Annotated[
        list[str] | None, typer.Option("--group", "-g", help="Access group (repeatable)")
    ] = None,
    keys_file: KeysFileOption = None,
) -> None:
    """Create an API key and print it once.

    Only the key's SHA-256 digest is stored, in the keys file; `lorehouse serve` accepts the
    key when LOREHOUSE_API_KEYS_FILE names that file.
    """
    from lorehouse.api_keys import KeysFileError, add_key

    configured = get_settings().api_keys_file
    path = _keys_file(keys_file)
    try:
        key = add_key(path, name, group or [])
    except KeysFileError as error:
        _refuse(str(error), error, exit_code=1)
    groups = ", ".join(group or []) or "public only"
    console.print(f"Key for {shown(repr(name))} (groups: {shown(groups)}):")
    print(key, flush=True)
    written = path.resolve()
    console.print(
        f"Only its digest is stored, in {shown(written)}; the key is not shown again.",
        highlight=False,
    )
    if configured is not None and configured.resolve() == written:
        console.print(
            "`lorehouse serve` reads this file (LOREHOUSE_API_KEYS_FILE) again when it "
            "changes: a running server accepts the key within a second.",
            highlight=False,
        )
    else:
        console.print(
            "`lorehouse serve` accepts the key when LOREHOUSE_API_KEYS_FILE names this file:\n"
            f"  export LOREHOUSE_API_KEYS_FILE={shown(shlex.quote(str(written)))}",
            highlight=False,
            soft_wrap=True,
        )


@keys_app.command("list")
def list_keys(keys_file: KeysFileOption = None) -> None:
    """List the keys: name, groups and date made, never the key.

    The keys file holds only the keys' digests, so a key that was lost cannot be shown
    again: revoke it and create another.
    """
    from lorehouse.api_keys import KeyRing, KeysFileError

    path = _keys_file(keys_file)
    if not path.exists():
        _refuse(f"No keys file at {path}; `lorehouse keys create NAME` makes one.", exit_code=1)
    try:
        entries = KeyRing.load(path).entries
    except KeysFileError as error:
        _refuse(str(error), error, exit_code=1)
    table = Table("name", "groups", "created", title=shown(str(path.resolve())))
    for entry in entries:
        created = entry.created.strftime("%Y-%m-%d %H:%M UTC") if entry.created else "-"
        table.add_row(shown(entry.name), shown(", ".join(entry.groups) or "public only"), created)
    out.print(table)
    if not entries:
        console.print("No keys; `lorehouse keys create NAME` makes one.")


@keys_app.command("revoke")
def revoke(
    name: Annotated[str, typer.Argument(help="The key's name, as `lorehouse keys list` shows")],
    keys_file: KeysFileOption = None,
) -> None:
    """Revoke a key: remove it from the keys file.

    A running `lorehouse serve` reads the file again within a second of the change and
    refuses the key from then on (401), without a restart.
    """
    from lorehouse.api_keys import KeysFileError, revoke_key

    path = _keys_file(keys_file)
    if not path.exists():
        _refuse(f"No keys file at {path}: there is no key to revoke.", exit_code=1)
    try:
        revoke_key(path, name)
    except KeysFileError as error:
        _refuse(str(error), error, exit_code=1)
    console.print(
        f"Key {shown(repr(name))} revoked in {shown(path.resolve())}; a server reading this "
        "file refuses it within a second.",
        highlight=False,
        soft_wrap=True,
    )


#: Failed documents a run's summary names; `lorehouse docs --status failed` lists them all.
FAILURES_SHOWN = 50


def _print_summary(store: DuckDBStore) -> None:
    counts: Counter[tuple[str, str]] = Counter(store.status_counts())
    types = sorted({file_type for file_type, _ in counts})
    table = Table("format", "documents", "parsed", "failed", title="Lorehouse corpus")
    for file_type in types:
        total = sum(v for (t, _), v in counts.items() if t == file_type)
        table.add_row(
            file_type,
            str(total),
            str(counts[(file_type, "parsed")]),
            str(counts[(file_type, "failed")]),
        )
    totals = store.status_totals()
    failed = totals["failed"]
    table.add_row("[bold]all[/bold]", str(sum(totals.values())), str(totals["parsed"]), str(failed))
    out.print(table)
    for failure in store.document_statuses(status="failed", limit=FAILURES_SHOWN):
        out.print(shown(f"  failed: {failure.rel_path}: {failure.reason} ({failure.detail})"))
    if failed > FAILURES_SHOWN:
        out.print(
            f"  ... and {failed - FAILURES_SHOWN} more failed: lorehouse docs --status failed"
        )
