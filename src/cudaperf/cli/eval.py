"""`cudaperf eval`: compile, check and time candidates (or the tasks' own implementations)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from cudaperf.cli.common import (
    SAMPLE_DEFAULT,
    check_arch,
    check_out_dir,
    check_out_file,
    check_results_out,
    check_results_settings,
    check_toolchain,
    console,
    emit_json,
    fail,
    jsonl_rows,
    load_task_set,
    select_task,
    select_tasks,
    stdout,
)
from cudaperf.cli.options import OLD_TIMING_BUDGET, TimingBudgetOpt, eval_config, renamed
from cudaperf.execute import Candidate, EvalConfig, ExecResult, Status, evaluate_batch
from cudaperf.execute.types import SPEEDUP_FIELDS, SPEEDUPS, geomean, protections_line
from cudaperf.tasks.model import Task

__all__ = ["eval_command"]

_HELP = EvalConfig.help()
# Baseline name (execute.types.SPEEDUPS) -> the table's column header.
_SPEED_COLUMNS = {
    "cpu": "vs CPU",
    "naive": "vs naive",
    "eager": "vs eager",
    "compile": "vs compile",
}


def _read_candidates(path: Path, tasks: list[Task]) -> list[tuple[Task, Candidate]]:
    """JSONL lines {"task_id": ..., "code": ..., "id": optional label}; at least one."""
    hint = 'write one JSON object per line: {"task_id": ..., "code": ..., "id": optional}'
    jobs, seen = [], {}
    for n, row in jsonl_rows(path, "--candidates", hint):
        if not isinstance(row, dict) or "task_id" not in row or "code" not in row:
            fail(
                f"--candidates {path}:{n}: not a JSON object with 'task_id' and 'code' "
                "(and optional 'id')"
            )
        for field in ("task_id", "code"):
            if not isinstance(row[field], str) or not row[field].strip():
                fail(
                    f"--candidates {path}:{n}: field '{field}' must be a non-empty string, "
                    f"got {type(row[field]).__name__}"
                )
        if not isinstance(row.get("id", ""), (str, int)):
            fail(f"--candidates {path}:{n}: field 'id' must be a string label")
        near = [k for k in ("name", "label", "candidate_id") if k in row]
        if near and "id" not in row:  # the label was lost: every result said "lineN"
            fail(
                f"--candidates {path}:{n}: field {near[0]!r} is not read; the label is 'id' "
                "(rename it)"
            )
        if "```" in row["code"]:  # compiled as it stands: the reply's prose fails in nvcc
            fail(
                f"--candidates {path}:{n}: 'code' holds a model reply with a ``` fence; put "
                "only the source there (`cudaperf reward TASK FILE` takes a whole reply)"
            )
        label = str(row.get("id", f"line{n}"))
        key = (row["task_id"], label)
        if key in seen:  # a task's results are told apart by it
            fail(
                f"--candidates {path}:{n}: id {label!r} of task {row['task_id']!r} is also on "
                f"line {seen[key]}; give each candidate of a task its own id"
            )
        seen[key] = n
        task = select_task(tasks, row["task_id"], option=f"{path}:{n} task_id")
        jobs.append((task, Candidate(code=row["code"], id=label)))
    if not jobs:
        fail(f"--candidates {path} holds no candidates; write one JSON object per line")
    return jobs


def _summary(results: list[ExecResult], skipped: list[dict]) -> dict:
    ok = [r for r in results if r.ok]
    return {
        "candidates": len(results),
        "mode": results[0].mode if results else "",
        "gpu": results[0].gpu if results else "",
        "statuses": dict(Counter(r.status.value for r in results)),
        "skipped": len(skipped),
        **{
            f"geomean_{f}": geomean([getattr(r, f) for r in ok if getattr(r, f)])
            for f in SPEEDUP_FIELDS
        },
    }


def _print_table(results: list[ExecResult], summary: dict, skipped: list[dict]) -> None:
    t = Table(
        title=f"cudaperf eval ({summary['mode']}{', ' + summary['gpu'] if summary['gpu'] else ''})"
    )
    speeds = [
        (_SPEED_COLUMNS[b], f)
        for b, (f, _) in SPEEDUPS.items()
        if any(getattr(r, f) for r in results)
    ]
    for col in ("task", "candidate", "status", *(n for n, _ in speeds), "feedback"):
        t.add_column(col, overflow="fold")
    quiet = (Status.OK, Status.COMPILED)
    for r in sorted(results, key=lambda r: (r.task_id, r.candidate_id)):
        fmt = lambda x: f"{x:.2f}x" if x else "-"  # noqa: E731
        fb = r.feedback[0] if r.feedback and r.status not in quiet else ""
        cells = [fmt(getattr(r, a)) for _, a in speeds]
        t.add_row(r.task_id, r.candidate_id, r.status.value, *cells, fb[:120])
    stdout.print(t)
    counts = ", ".join(f"{k}: {v}" for k, v in summary["statuses"].items())
    stdout.print(f"statuses: {counts}; skipped: {len(skipped)}")
    if line := protections_line(results):  # only when some protection did not apply
        stdout.print(line, markup=False, highlight=False)
    for s in skipped:
        stdout.print(f"skipped {s['task_id']}: {s['reason']}")
    for k in (f"geomean_{f}" for f in SPEEDUP_FIELDS):
        v = summary[k]
        stdout.print(f"{k.replace('_', ' ')}: {f'{v:.2f}x' if v else '-'}")
    if summary["mode"] == "compile-only":
        stdout.print("[bold yellow]compile-only[/]: no GPU, nothing was run, checked or timed")


def eval_command(
    tasks_path: Path = typer.Argument(
        None, metavar="[TASKS]", help=f"Task file or folder (default: {SAMPLE_DEFAULT})."
    ),
    task_ids: list[str] = typer.Option(None, "--task", "-t", help="Only these task ids."),
    candidates: Path = typer.Option(None, "--candidates", help="JSONL of {task_id, code, id}."),
    implementations: bool = typer.Option(
        False, "--implementations", help="Run the tasks' implementations."
    ),
    out: Path = typer.Option(None, "--out", help="Append results to this JSONL as they finish."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document to stdout."),
    compile_only: bool = typer.Option(None, "--compile-only/--full", help="Default: when no GPU."),
    trials: int = typer.Option(None, "--trials", min=1, help=_HELP["trials"]),
    timing_budget: float = TimingBudgetOpt,
    old_timing_budget: float = OLD_TIMING_BUDGET,
    cpu_time_budget_s: float = typer.Option(
        None, "--cpu-time-budget", help=_HELP["cpu_time_budget_s"]
    ),
    run_timeout_s: float = typer.Option(None, "--run-timeout", help=_HELP["run_timeout_s"]),
    arch: str = typer.Option(None, "--arch", help=_HELP["arch"]),
    compile_jobs: int = typer.Option(None, "--jobs", "-j", min=1, help=_HELP["compile_jobs"]),
    workers_per_gpu: int = typer.Option(
        None, "--workers-per-gpu", min=1, help=_HELP["workers_per_gpu"]
    ),
    cache_dir: Path = typer.Option(None, "--cache-dir", help=_HELP["cache_dir"]),
    no_cache: bool = typer.Option(False, "--no-cache", help="Do not reuse earlier results."),
    backend: str = typer.Option("local", "--backend", help="local (process pool) or ray."),
    address: str = typer.Option(None, "--address", help="Ray cluster address."),
    no_compile_baseline: bool = typer.Option(
        False, "--no-compile-baseline", help="PyTorch→CUDA: skip the torch.compile baseline."
    ),
    no_isolation: bool = typer.Option(
        False,
        "--no-isolation",
        help="Run candidate code without the mount-namespace sandbox "
        "(read-only host, private /tmp); only for machines where it breaks the GPU worker.",
    ),
) -> None:
    """Compile, check on every config (held-out too) and time C→CUDA and PyTorch→CUDA candidates."""
    if (candidates is None) == (not implementations):
        fail("give exactly one of --candidates PATH or --implementations")
    if backend not in ("local", "ray"):
        fail(f"--backend {backend!r} is unknown; use 'local' or 'ray'")
    if backend != "ray" and address is not None:  # was ignored without a word
        fail(f"--address {address} is the Ray cluster's; add --backend ray or drop --address")
    if backend == "ray" and (workers_per_gpu or 1) > 1:
        fail("--workers-per-gpu is for the local backend (a Ray actor has one worker per GPU)")
    timing_budget = renamed("--time-budget", old_timing_budget, "--timing-budget", timing_budget)
    cfg = eval_config(
        compile_only=compile_only,
        trials=trials,
        time_budget_s=timing_budget,
        cpu_time_budget_s=cpu_time_budget_s,
        run_timeout_s=run_timeout_s,
        arch=arch,
        compile_jobs=compile_jobs,
        workers_per_gpu=workers_per_gpu,
        cache_dir=cache_dir,
        use_result_cache=False if no_cache else None,
        compile_baseline=False if no_compile_baseline else None,
        isolate_files=False if no_isolation else None,
    )
    check_out_file(out, "--out", (".jsonl",))
    done = check_results_out(out)
    check_out_dir(cfg.cache_dir, "--cache-dir")
    tasks = select_tasks(load_task_set(tasks_path), task_ids)
    if candidates is not None:
        jobs = _read_candidates(candidates, tasks)
    else:
        jobs = [(t, Candidate(code=i.code, id=i.id)) for t in tasks for i in t.implementations]
    if backend == "local":  # Ray workers bring their own GPUs and nvcc
        check_toolchain(cfg.compile_only, cfg.nvcc)
        check_arch(cfg.arch, cfg.nvcc)
        check_results_settings(done, out, cfg.compile_only, cfg.arch)
    if no_cache and out is not None and out.is_file() and out.stat().st_size:
        console.print(
            f"--no-cache: results already in {out} are kept, not recomputed; give a "
            "new --out to evaluate them again",
            highlight=False,
        )
    skipped: list[dict] = []
    results = _run(jobs, cfg, out, backend, address, show=not as_json)
    summary = _summary(results, skipped)
    if as_json:
        emit_json(
            {
                "summary": summary,
                "skipped": skipped,
                "results": [r.model_dump(mode="json") for r in results],
            }
        )
    else:
        _print_table(results, summary, skipped)
    bad = summary["statuses"].get(Status.INFRA_ERROR.value, 0)
    raise typer.Exit(1 if bad else 0)


def check_ray_address(address: str, timeout_s: float = 5.0) -> None:
    """Fail at once when nothing listens at a `host:port` (or `ray://host:port`) cluster
    address: `ray.init` waited for it for minutes, printing only its own retries. `auto`,
    `local` and an address without a port are left to Ray."""
    import socket

    hostport = address.removeprefix("ray://").rstrip("/")
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        if address not in ("auto", "local"):
            fail(f"--address {address}: give the cluster's HOST:PORT (or ray://HOST:PORT, auto)")
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as e:
        fail(
            f"--address {address}: nothing answers at {host}:{port} ({e.strerror or e}); start "
            "the cluster (`ray start --head`) or fix the address",
            code=1,
        )


def _run(jobs, cfg: EvalConfig, out, backend: str, address, show: bool) -> list[ExecResult]:
    be = None
    if backend == "ray":
        try:  # the backend module imports ray only when used: check here, not in a traceback
            import ray  # noqa: F401

            from cudaperf.execute.ray_backend import RayBackend
        except ImportError:
            fail("--backend ray needs ray; install it with: pip install 'cudaperf[ray]'")
        if address is not None:
            check_ray_address(address)
        be = RayBackend(cfg, address=address)
    cols = (TextColumn("eval"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    results = []
    with Progress(*cols, console=console, disable=not show, transient=True) as bar:
        tid = bar.add_task("eval", total=len(jobs))
        try:
            for r in evaluate_batch(jobs, cfg, out=out, backend=be):
                results.append(r)
                bar.advance(tid)
        except KeyboardInterrupt:
            bar.stop()
            kept = f"they are in {out}" if out is not None else "give --out to keep them"
            msg = f"interrupted: {len(results)} of {len(jobs)} result(s) finished ({kept}); "
            console.print(msg + "run the same command again to resume", highlight=False)
            raise typer.Exit(130) from None
        finally:
            if be is not None:
                be.close()
    return results
