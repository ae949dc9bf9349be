"""`cudaperf analyze FILE`: a structural report per kernel of a `.cu` or PyTorch→CUDA candidate."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from cudaperf.cli.common import (
    SAMPLE_DEFAULT,
    console,
    emit_json,
    fail,
    read_source,
    read_tasks,
    select_task,
    stdout,
)

if TYPE_CHECKING:  # the analyzer (sympy, tree-sitter) loads only when this command runs
    from cudaperf.analyze import StructuralReport

__all__ = ["analyze_command"]

_COLUMNS = [
    ("score", "score", "{:.2f}"),
    ("coalesced_fraction", "coalesced", "{:.0%}"),
    ("shared_bank_conflict_degree_max", "bank", "{:g}-way"),
    ("syncthreads", "sync", "{:g}"),
    ("atomics", "atom", "{:g}"),
    ("warp_shuffles", "shfl", "{:g}"),
    ("vector_width_max", "vec B", "{:g}"),
    ("registers", "regs", "{:g}"),
    ("smem_bytes", "smem B", "{:g}"),
    ("spill_bytes", "spill B", "{:g}"),
    ("theoretical_occupancy", "occ", "{:.0%}"),
    ("arithmetic_intensity", "FLOP/B", "{:.2f}"),
]
_PROFILE_COLUMNS = [
    ("ncu_sectors_per_request_ld", "ld sec/req", "{:.1f}"),
    ("ncu_sectors_per_request_st", "st sec/req", "{:.1f}"),
    ("ncu_achieved_occupancy", "ach. occ", "{:.0%}"),
]


def analyze_command(
    file: Path = typer.Argument(..., help="A .cu file or a PyTorch→CUDA candidate (.py)."),
    arch: str = typer.Option("sm_90", "--arch", help="Target architecture, e.g. sm_80, sm_90."),
    block_size: int = typer.Option(
        256, "--block-size", help="Threads per block for occupancy when no launch is found."
    ),
    profile: bool = typer.Option(
        False,
        "--profile",
        help="Also run under Nsight Compute (needs a GPU): a .cu with main() as it is, a "
        "candidate on its --task's inputs.",
    ),
    task: str | None = typer.Option(
        None,
        "--task",
        help=f"The candidate's task for --profile: a task id (full, or a unique ending such as "
        f"saxpy) of {SAMPLE_DEFAULT}, or a task file/folder (with --task-id when it holds "
        "several tasks).",
    ),
    task_id: str | None = typer.Option(
        None, "--task-id", help="Which task of a --task file holds the candidate's task."
    ),
    input_config: str | None = typer.Option(
        None, "--config", help="Input config to profile on (default: the largest visible one)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document to stdout."),
) -> None:
    """Report coalescing, bank conflicts, barriers, resources, occupancy and a score per kernel."""
    from cudaperf.analyze import AnalyzeConfig, NoKernelsError, analyze
    from cudaperf.analyze.profile import ProfileError

    if not file.is_file():
        fail(f"{file} does not exist or is not a file; pass the path of a .cu or .py candidate")
    try:
        cfg = AnalyzeConfig(arch=arch, block_size=block_size)
    except ValidationError as e:
        fail(e.errors()[0]["msg"].removeprefix("Value error, "))
    source = read_source(file, "FILE")
    if task_id is not None and task is None:  # was ignored without a word
        fail(f"--task-id {task_id} picks a task of a --task file; add --task FILE or drop it")
    the_task = _load_task(task, task_id) if task else None
    names = [c.name for c in the_task.configs] if the_task is not None else []
    if input_config is not None and the_task is not None and input_config not in names:
        fail(
            f"--config {input_config!r}: task {the_task.id} has no such config; use one of "
            f"{', '.join(names)}"
        )
    if input_config is not None and not profile:  # it picks the profiled input: ignored
        fail(f"--config {input_config} picks the input --profile runs on; add --profile or drop it")
    if the_task is not None and not profile:
        console.print("[dim]--task is only used with --profile[/]")
    if profile:
        _check_profiler()
    syntax = _syntax_error(source, file)
    try:
        reports = analyze(
            source, config=cfg, profile=profile, task=the_task, input_config=input_config
        )
    except NoKernelsError:
        if syntax:
            fail(f"{syntax}; fix it so the kernels can be read")
        fail(
            f"no __global__ kernel found in {file}; pass CUDA source (or a Python candidate "
            "whose CUDA string defines one)"
        )
    except ProfileError as e:
        fail(f"profiling failed: {e}")
    if syntax:
        console.print(f"[yellow]warning:[/] {escape(syntax)}; features near it may be wrong")
    if as_json:
        emit_json({"kernels": [_kernel_json(r) for r in reports]})
        return
    _print_human(reports, profile)


def _check_profiler() -> None:
    """--profile runs the candidate under Nsight Compute: it needs a GPU and ncu."""
    import shutil

    from cudaperf.execute.build import detect_gpus

    if not detect_gpus():
        fail(
            "--profile runs the kernels under Nsight Compute and needs an NVIDIA GPU "
            "(nvidia-smi lists none); drop --profile for the static report",
            code=1,
        )
    if shutil.which("ncu") is None:
        fail(
            "--profile needs Nsight Compute's ncu on PATH; install it with the CUDA "
            "toolkit or drop --profile",
            code=1,
        )


def _syntax_error(source: str, file: Path) -> str | None:
    """Where the candidate stops being valid code: Python for a .py file, else CUDA."""
    import ast

    from cudaperf.analyze.parse import extract_cuda, parse

    if file.suffix == ".py":
        try:
            ast.parse(source)
        except SyntaxError as e:
            return f"{file}:{e.lineno}: Python syntax error ({e.msg})"
    text = extract_cuda(source)
    root = parse(text.code).root_node
    if not root.has_error:
        return None
    stack = [root]
    while stack:
        node = stack.pop()
        if node.is_error or node.is_missing:
            line = node.start_point[0] + 1
            where = f"{file}:{line}" if not text.from_python else f"{file} (CUDA line {line})"
            what = f"lacks {node.type!r}" if node.is_missing else "cannot be parsed"
            return f"{where}: CUDA syntax error (the code there {what})"
        stack.extend(reversed([c for c in node.children if c.has_error or c.is_missing]))
    return f"{file}: CUDA syntax error"


def _load_task(spec: str, task_id: str | None):
    """A task from a file/folder (`task_id` picks one of several) or the sample set by id."""
    from cudaperf.tasks.io import load_sample

    path = Path(spec)
    if path.exists():
        tasks = read_tasks(path)  # a TaskFileError names the file and the fix
        if task_id is None and len(tasks) == 1:
            return tasks[0]
        if task_id is None:
            fail(f"{path} holds {len(tasks)} tasks; pick one with --task-id")
        return select_task(tasks, task_id, option="--task-id")
    if task_id is not None:  # --task names a sample task: there is no file to pick from
        fail(
            f"--task {spec} is a task id (no such file or folder), so --task-id {task_id} has "
            "nothing to pick from; drop --task-id, or give --task a task file"
        )
    return select_task(load_sample(), spec, option="--task")


def _kernel_json(r: StructuralReport) -> dict:
    d = r.model_dump(mode="json")
    return {
        "name": d["name"],
        "line": d["line"],
        "features": d["features"],
        "findings": d["findings"],
        "score": d["score"],
    }


def _print_human(reports: list[StructuralReport], profile: bool) -> None:
    cols = _COLUMNS + (_PROFILE_COLUMNS if profile else [])
    out = Console(width=max(stdout.width, 160), highlight=False)
    table = Table(show_edge=False, pad_edge=False, box=None)
    table.add_column("kernel (line)", no_wrap=True)
    for _, title, _ in cols:
        table.add_column(title, justify="right", no_wrap=True)
    for r in reports:
        values = {"score": r.score, **r.features}
        cells = [_fmt(values.get(key), fmt) for key, _, fmt in cols]
        table.add_row(f"{r.name} ({r.line})", *cells)
    out.print(table)
    for r in reports:
        for f in r.findings:
            color = {"error": "red", "warning": "yellow"}.get(f.severity.value, "dim")
            where = escape(f"line {f.line} [{f.rule}] {r.name}: {f.message}")
            out.print(f"[{color}]{f.severity.value}[/] {where}", soft_wrap=True)
    if not any(r.findings for r in reports):
        console.print("no findings")


def _fmt(v: float | None, fmt: str) -> str:
    return "-" if v is None else fmt.format(v)
