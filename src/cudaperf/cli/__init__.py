"""The `cudaperf` command line: one sub-command per stage, mirroring the Python API.

Errors: a command calls `common.fail(...)` (or raises `common.UserError`); the root group
(`group.CliGroup`) prints one line and exits non-zero, for every command and sub-app
registered below.
"""

from __future__ import annotations

import logging

import typer

from cudaperf import __version__
from cudaperf.cli.analyze import analyze_command
from cudaperf.cli.bench import bench_app
from cudaperf.cli.common import console, stdout
from cudaperf.cli.data import data_app
from cudaperf.cli.eval import eval_command
from cudaperf.cli.group import CliGroup, set_debug
from cudaperf.cli.rank import rank_app
from cudaperf.cli.refine import refine_command
from cudaperf.cli.report import report_command
from cudaperf.cli.reward import reward_command
from cudaperf.cli.tasks import tasks_app
from cudaperf.cli.train import train_app

app = typer.Typer(
    name="cudaperf",
    help="Teach language models to write fast, correct CUDA.",
    cls=CliGroup,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(tasks_app, name="tasks")
app.add_typer(data_app, name="data")
app.add_typer(rank_app, name="rank")
app.add_typer(train_app, name="train")
app.command("analyze")(analyze_command)
app.command("eval")(eval_command)
app.command("report")(report_command)
app.command("reward")(reward_command)
app.command("refine")(refine_command)
app.add_typer(bench_app, name="bench")

_PIPE_WIDTH = 4000  # output into a file or pipe: rows stay whole instead of wrapping at 80


def _version(value: bool) -> None:
    if value:
        typer.echo(f"cudaperf {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log debug messages to stderr."),
    debug: bool = typer.Option(
        False, "--debug", help="Show the Python traceback of an error instead of one line."
    ),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True),
) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    set_debug(debug)
    for c in (stdout, console):
        c.width = _PIPE_WIDTH if not c.is_terminal else None  # type: ignore[assignment]


def main() -> None:
    app()
