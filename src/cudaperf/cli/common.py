"""Helpers shared by the CLI commands: output, errors, loading the task set."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, NoReturn

import typer
from rich.console import Console

from cudaperf.tasks.io import TaskFileError, load_sample, load_tasks
from cudaperf.tasks.model import Task

# Human output and progress go to stderr so that `--json` leaves stdout to one JSON document.
console = Console(stderr=True)
stdout = Console()


def fail(message: str, code: int = 2) -> NoReturn:
    """Print a one-line error (what is wrong and how to fix it) and exit without a traceback."""
    console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def emit_json(obj: Any) -> None:
    """Print exactly one JSON document to stdout."""
    sys.stdout.write(json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n")
    sys.stdout.flush()


def load_task_set(path: Path | None, sample: bool) -> list[Task]:
    """The tasks at PATH; with no PATH (or --sample) the bundled sample set.

    Until the full dataset ships (data/), the bundled default data is the sample set.
    """
    try:
        if path is not None:
            if sample:
                fail("give either a PATH or --sample, not both")
            return load_tasks(path)
        return load_sample()
    except TaskFileError as e:
        fail(str(e))


def select_tasks(tasks: list[Task], ids: list[str] | None) -> list[Task]:
    """Tasks whose id equals, or ends with, one of `ids` (all when none are given)."""
    if not ids:
        return tasks
    chosen = [t for t in tasks if any(t.id == i or t.id.endswith("/" + i) for i in ids)]
    if not chosen:
        fail(f"no task matches {ids}; run `cudaperf tasks list` to see the ids")
    return chosen
