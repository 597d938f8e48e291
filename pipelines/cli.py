"""The `lorehouse` command line: materialize the asset graph and inspect what it produced."""

from __future__ import annotations

import os
import sys
import warnings
from collections import Counter
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from lorehouse.settings import get_settings
from lorehouse.stores import DuckDBStore

app = typer.Typer(help="Lorehouse: document question answering over your own files.")
console = Console(stderr=True)
# Piped output (CI logs, `| less`) gets a wide table instead of rich's 80-column default.
out = Console(width=None if sys.stdout.isatty() else 160)


@app.command()
def materialize(
    select: Annotated[
        str, typer.Option("--select", help="Dagster asset selection, e.g. 'parsed_documents'")
    ] = "*",
) -> None:
    """Run the asset graph in this process, with progress, then print what it holds."""
    import dagster as dg

    from pipelines.definitions import defs

    settings = get_settings()
    instance = (
        dg.DagsterInstance.get()
        if os.environ.get("DAGSTER_HOME")
        else dg.DagsterInstance.ephemeral()
    )
    graph = defs.resolve_asset_graph()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.BetaWarning)
        try:
            keys = dg.AssetSelection.from_string(select).resolve(graph)
        except Exception as error:
            console.print(f"[red]Invalid selection {select!r}: {error}[/red]")
            raise typer.Exit(2) from error
    if not keys:
        console.print(f"[red]Selection {select!r} matches no asset.[/red]")
        raise typer.Exit(2)
    console.print(
        f"[bold]Materializing[/bold] {', '.join(sorted(k.to_user_string() for k in keys))} "
        f"from {settings.source_uri} into {settings.data_dir.resolve()}"
    )
    job = defs.resolve_implicit_global_asset_job_def()
    result = job.execute_in_process(
        instance=instance,
        asset_selection=sorted(keys),
        raise_on_error=False,
        run_config={"loggers": {"console": {"config": {"log_level": "INFO"}}}},
    )
    for evaluation in result.get_asset_check_evaluations():
        mark = "[green]passed[/green]" if evaluation.passed else "[red]FAILED[/red]"
        console.print(
            f"check {evaluation.asset_key.to_user_string()}.{evaluation.check_name}: {mark}"
        )
    if not result.success:
        console.print("[red]The run failed; see the log above.[/red]")
        raise typer.Exit(1)
    _print_summary(DuckDBStore(settings.duckdb_path))


@app.command()
def docs(
    status: Annotated[
        str | None, typer.Option(help="Only documents with this status: parsed, failed, pending")
    ] = None,
) -> None:
    """List documents with their status: parsed, or failed and why."""
    settings = get_settings()
    if not settings.duckdb_path.exists():
        console.print(f"No store at {settings.duckdb_path}; run `lorehouse materialize` first.")
        raise typer.Exit(1)
    rows = DuckDBStore(settings.duckdb_path).document_statuses()
    if status:
        rows = [r for r in rows if r.status == status]
    table = Table("document", "type", "status", "reason", "access", "title / detail")
    for row in rows:
        colour = {"parsed": "green", "failed": "red"}.get(row.status, "yellow")
        table.add_row(
            row.rel_path,
            row.file_type,
            f"[{colour}]{row.status}[/{colour}]",
            row.reason or "",
            ",".join(row.acl_groups) or "public",
            (row.detail or row.title or "")[:80],
        )
    out.print(table)


def _print_summary(store: DuckDBStore) -> None:
    statuses = store.document_statuses()
    counts: Counter[tuple[str, str]] = Counter((s.file_type, s.status) for s in statuses)
    types = sorted({s.file_type for s in statuses})
    table = Table("format", "documents", "parsed", "failed", title="Lorehouse corpus")
    for file_type in types:
        total = sum(v for (t, _), v in counts.items() if t == file_type)
        table.add_row(
            file_type,
            str(total),
            str(counts[(file_type, "parsed")]),
            str(counts[(file_type, "failed")]),
        )
    table.add_row(
        "[bold]all[/bold]",
        str(len(statuses)),
        str(sum(1 for s in statuses if s.status == "parsed")),
        str(sum(1 for s in statuses if s.status == "failed")),
    )
    out.print(table)
    failures = [s for s in statuses if s.status == "failed"]
    for failure in failures:
        out.print(f"  failed: {failure.rel_path}: {failure.reason} ({failure.detail})")
