"""`cudaperf report RESULTS.jsonl`: status counts, fast_p, geomean speedups, and a plot."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from cudaperf.cli.common import console, emit_json, fail, stdout

__all__ = ["report_command"]


def report_command(
    results: Path = typer.Argument(..., help="Results JSONL written by `cudaperf eval --out`."),
    plot: Path = typer.Option(None, "--plot", help="Write the speedup distributions to a PNG."),
    title: str = typer.Option("", "--title", help="Plot title."),
    json: bool = typer.Option(False, "--json", help="Print one JSON document to stdout."),
) -> None:
    """Summarise evaluation results: correctness, fast_p and speedup distributions."""
    from cudaperf.report import load_results, plot_speedups, summarise

    if not results.is_file():
        fail(f"{results}: no such file; give the JSONL that `cudaperf eval --out` wrote")
    try:
        rows = load_results(results)
    except ValueError as e:
        fail(str(e))
    summary = summarise(rows)
    if plot is not None:
        summary["plotted"] = plot_speedups(rows, plot, title)
        if not summary["plotted"]:
            console.print("no correct, timed result to plot (compile-only run?)")
    if json:
        emit_json(summary)
        return
    table = Table("metric", "value")
    for k, v in summary.items():
        table.add_row(k, f"{v:.3f}" if isinstance(v, float) else str(v))
    stdout.print(table)
