"""`cudaperf report RESULTS.jsonl`: status counts, fast_p, geomean speedups, and a plot."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from cudaperf.cli.common import (
    check_out_file,
    console,
    emit_json,
    read_eval_results,
    stdout,
)

__all__ = ["report_command"]

# Metrics that only a run on a GPU measures; a compile-only result leaves them unmeasured.
_MEASURED = ("correct_fraction", "geomean_", "fast_")


def report_command(
    results: Path = typer.Argument(
        ..., help="Results JSONL (or .jsonl.gz) written by `cudaperf eval --out`."
    ),
    plot: Path = typer.Option(None, "--plot", help="Write the speedup distributions to a PNG."),
    title: str = typer.Option("", "--title", help="Plot title."),
    json: bool = typer.Option(False, "--json", help="Print one JSON document to stdout."),
) -> None:
    """Summarise evaluation results: correctness, fast_p and speedup distributions.

    Results of compile-only runs (no GPU) were never run: correctness and speed show as not
    measured (null in --json), not as 0."""
    from cudaperf.report import plot_speedups, summarise

    check_out_file(plot, "--plot", (".png",))
    rows = read_eval_results(results)  # a .jsonl.gz too (cli.common.jsonl_rows)
    summary = summarise(rows)
    full = [r for r in rows if r.get("mode") != "compile-only"]
    summary["measured_results"] = len(full)
    if not full:
        summary.update({k: None for k in summary if k.startswith(_MEASURED)})
    if plot is not None:
        summary["plotted"] = plot_speedups(rows, plot, title)
        if not summary["plotted"]:
            console.print("no correct, timed result to plot (compile-only run?)")
    if json:
        emit_json(summary)
        return
    table = Table("metric", "value")
    for k, v in summary.items():
        shown = "not measured (compile-only)" if v is None and k.startswith(_MEASURED) else v
        if isinstance(shown, dict):
            shown = ", ".join(f"{s}: {n}" for s, n in shown.items())
        table.add_row(k, f"{shown:.3f}" if isinstance(shown, float) else str(shown))
    stdout.print(table)
    if not full:
        stdout.print("compile-only results: nothing was run, checked or timed (no GPU)")
