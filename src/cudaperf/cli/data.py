"""`cudaperf data ...`: generate the task set (`build`), check it without a GPU (`verify`),
measure it (`measure`), bring its tolerances up to the generator (`tolerances`)."""

from __future__ import annotations

import json as jsonlib
import math
from collections import Counter
from pathlib import Path

import typer
from rich.progress import Progress
from rich.table import Table

from cudaperf.cli.common import (
    DATASET_DEFAULT,
    check_arch,
    check_out_dir,
    check_out_file,
    check_results_out,
    console,
    emit_json,
    fail,
    stdout,
)
from cudaperf.cli.options import field_help, gpu_list, renamed
from cudaperf.execute.config import EvalConfig
from cudaperf.tasks.splits import splits_task_ids

data_app = typer.Typer(help="Generate and check the generated task set.", no_args_is_help=True)
JsonOpt = typer.Option(False, "--json", help="Print one JSON document to stdout, nothing else.")


@data_app.command("build")
def build(
    per_family: int = typer.Option(
        5,
        "--per-family",
        min=1,
        max=100_000,
        help="Tasks per family (kinds without a total below).",
    ),
    c_tasks: int = typer.Option(
        0,
        "--c-tasks",
        min=0,
        max=1_000_000,
        help="About this many C→CUDA tasks, spread evenly over families.",
    ),
    torch_tasks: int = typer.Option(
        0,
        "--torch-tasks",
        min=0,
        max=1_000_000,
        help="About this many PyTorch→CUDA tasks, likewise.",
    ),
    seed: int = typer.Option(0, "--seed", help="Build seed (same seed: identical output)."),
    out: Path = typer.Option(
        None,
        "--out",
        help="Output file: .jsonl, .jsonl.gz or .parquet (required: nothing is written to a "
        "default place, so the measured data/tasks.jsonl.gz is replaced only when named).",
        show_default=False,
    ),
    splits: Path = typer.Option(
        None, "--splits", help="Splits file (default: splits.json beside --out)."
    ),
    families: str = typer.Option("", "--families", help="Comma-separated subset of families."),
    max_share: float = typer.Option(0.10, "--max-family-share", help="Largest family share."),
    json: bool = JsonOpt,
) -> None:
    """Regenerate the tasks deterministically and print their statistics."""
    from cudaperf.datagen import BuildConfig, build_tasks, near_duplicate_rate, splits_document
    from cudaperf.datagen.build import plan
    from cudaperf.tasks.io import save_tasks
    from cudaperf.tasks.stats import task_stats

    if out is None:
        fail(
            "give --out FILE (.jsonl, .jsonl.gz or .parquet); data/tasks.jsonl.gz holds the "
            "measured dataset, so it is replaced only when you name it (its measurements are lost)"
        )
    check_out_file(out, "--out", (".jsonl", ".jsonl.gz", ".parquet"))
    check_out_file(splits or out.with_name("splits.json"), "--splits", (".json",))
    beside = out.with_name("splits.json")
    if splits is None and beside.exists() and not out.exists():  # a new set, another's splits
        fail(
            f"--splits {beside} (the default, beside --out) holds another task set's splits; "
            "give --splits NEW.json or an --out in another folder"
        )
    if not 0 < max_share <= 1:  # also nan; the generator's check named its field
        fail(f"--max-family-share {max_share}: use a share in (0, 1], e.g. 0.1")
    try:
        names = tuple(f.strip() for f in families.split(",") if f.strip())
        if families.strip() and not names:  # "" is every family; "," names none
            raise ValueError(f"--families {families!r} names no family; leave it out for all")
        dup = sorted({f for f in names if names.count(f) > 1})
        if dup:  # the tasks of a family twice have the same ids
            raise ValueError(f"--families names {dup} twice; give each family once")
        config = BuildConfig(per_family, seed, names, max_share, c_tasks, torch_tasks)
        total = sum(n for _, n in plan(config))
        with Progress(console=console, transient=True, disable=json) as bar:
            job = bar.add_task("generating", total=total)
            report = build_tasks(config, lambda fam: bar.update(job, advance=1, description=fam))
    except ValueError as e:
        fail(str(e))
    if splits is None and _foreign_splits(beside, {t.id for t in report.tasks}):
        fail(
            f"--splits {beside} (the default, beside --out) lists tasks this build does not "
            "make, so it belongs to another task set; give --splits NEW.json (nothing written)"
        )
    save_tasks(report.tasks, out)
    split_path = splits or out.with_name("splits.json")
    split_path.write_text(jsonlib.dumps(splits_document(report.tasks), indent=1) + "\n")
    stats = task_stats(report.tasks)
    stats["near_duplicate_rate"] = round(near_duplicate_rate(report.tasks), 4)
    stats["redraws"] = report.redraws
    stats["dropped"] = report.dropped
    if json:
        emit_json(stats | {"out": str(out), "splits": str(split_path)})
        return
    table = Table("statistic", "value")
    for key in (
        "tasks",
        "by_kind",
        "families",
        "max_family_share",
        "min_configs",
        "min_held_out_configs",
        "min_implementations",
        "min_distinct_strategies",
        "implementations",
        "measured_fraction",
        "duplicate_implementations",
        "near_duplicate_rate",
        "redraws",
    ):
        table.add_row(key, str(stats[key]))
    stdout.print(table)
    for line in report.dropped:
        if "were not drawn" in line:  # a family out of distinct tasks (build.EXHAUSTED_AFTER)
            console.print(f"[yellow]{line}[/]", highlight=False)
    console.print(f"wrote {len(report.tasks)} task(s) to {out} and the splits to {split_path}")


def _foreign_splits(path: Path, ids: set[str]) -> bool:
    """`path` is a splits file that lists a task not in `ids` (or is not a splits file)."""
    if not path.exists():
        return False
    listed = splits_task_ids(path)
    return listed is None or not listed <= ids


@data_app.command("verify")
def verify(
    path: Path = typer.Argument(
        None, help=f"Generated task file (default: {DATASET_DEFAULT}).", show_default=False
    ),
    jobs: int = typer.Option(2, "--jobs", min=1, help="Parallel nvcc processes."),
    no_nvcc: bool = typer.Option(False, "--no-nvcc", help="Skip compiling the CUDA code."),
    reference_timeout: float = typer.Option(
        60.0,
        "--reference-timeout",
        min=0.1,
        max=3600,
        help="Seconds a C reference may run on its smallest config before its task fails.",
    ),
    json: bool = JsonOpt,
) -> None:
    """C references: gcc + run on the smallest config; CUDA: nvcc -cubin (no GPU needed)."""
    from cudaperf.cli.common import load_task_set
    from cudaperf.datagen.verify import check_reference, cuda_units, nvcc_compile

    tasks = load_task_set(path, default="dataset")
    c_tasks = [t for t in tasks if t.kind.value == "c2cuda"]
    with console.status("checking C references ..."):
        refs = [check_reference(t, timeout_s=reference_timeout) for t in c_tasks]
    units = [u for t in tasks for u in cuda_units(t)]
    cuda = []
    if not no_nvcc:
        try:
            with console.status(f"compiling {len(units)} CUDA units with nvcc ..."):
                cuda = nvcc_compile(units, jobs=jobs)
        except FileNotFoundError as e:
            fail(str(e))
    failures = [r for r in refs + cuda if not r.ok]
    summary = {
        "references_ok": sum(r.ok for r in refs),
        "references": len(refs),
        "cuda_ok": sum(r.ok for r in cuda),
        "cuda_units": len(cuda),
        "failures": [{"name": r.name, "message": r.message[:500]} for r in failures],
    }
    if json:
        emit_json(summary)
    else:
        console.print(
            f"C references: {summary['references_ok']}/{len(refs)} compile and run; "
            f"CUDA: {summary['cuda_ok']}/{len(cuda)} compile"
        )
        for r in failures[:10]:
            console.print(f"[red]FAIL[/] {r.name}: {r.message[:300]}", highlight=False)
    if failures:
        raise typer.Exit(1)


@data_app.command("tolerances")
def tolerances(
    path: Path = typer.Argument(
        None, help=f"Measured task file (default: {DATASET_DEFAULT}).", show_default=False
    ),
    out: Path = typer.Option(
        None,
        "--out",
        help="Output file (.jsonl or .jsonl.gz; required: the measured data is replaced only "
        "when named).",
        show_default=False,
    ),
    seed: int = typer.Option(0, "--seed", help="The build seed of the file (data build --seed)."),
    json: bool = JsonOpt,
) -> None:
    """Give each task the tolerance the generator gives it now, keeping its measurements.

    Every other field must be what the generator writes (a tolerance changes no measured time;
    anything else would need `data build` and `data measure` again)."""
    from cudaperf.cli.common import load_task_set
    from cudaperf.datagen.build import refresh_tolerances
    from cudaperf.tasks.io import save_tasks

    if out is None:
        fail("give --out FILE (.jsonl or .jsonl.gz); name data/tasks.jsonl.gz to replace it")
    check_out_file(out, "--out", (".jsonl", ".jsonl.gz"))
    tasks = load_task_set(path, default="dataset")
    try:
        new, changed = refresh_tolerances(tasks, seed)
    except ValueError as e:
        if "not a task this generator draws" in str(e):  # a task set `data build` did not make
            fail(
                f"{e}: `data tolerances` refreshes a task file `cudaperf data build` wrote; "
                "give that file, with its build's --seed"
            )
        fail(str(e))
    save_tasks(new, out)
    family = {t.id: t.family for t in tasks}
    by_family = dict(Counter(family[tid] for tid in changed))
    if json:
        emit_json({"tasks": len(new), "changed": len(changed), "by_family": by_family})
        return
    console.print(
        f"{len(changed)} of {len(new)} tolerances changed "
        f"({', '.join(f'{k} {v}' for k, v in sorted(by_family.items())) or 'none'}); wrote {out}"
    )


@data_app.command("measure")
def measure(
    path: Path = typer.Argument(
        None, help=f"Task set (default: {DATASET_DEFAULT}).", show_default=False
    ),
    out: Path = typer.Option(
        Path("measure_results.jsonl"), "--out", help="Results JSONL (appended; resumable)."
    ),
    batch_tasks: int = typer.Option(32, "--batch-tasks", min=1, help="Tasks per nvcc invocation."),
    jobs: int = typer.Option(
        None, "--jobs", min=1, help="CPU workers (nvcc, references); default: usable CPUs."
    ),
    gpus: str = typer.Option("all", "--gpus", help="GPU indices such as 0,1, or all."),
    trials: int = typer.Option(20, "--trials", min=1, help="Timed trials per config."),
    warmup: int = typer.Option(3, "--warmup", min=0, help="Untimed calls before the trials."),
    timing_budget: float = typer.Option(
        None,
        "--timing-budget",
        show_default="0.05, the bulk default",
        help=field_help(EvalConfig, "time_budget_s") + " (seconds).",
    ),
    budget_ms: float = typer.Option(None, "--budget-ms", hidden=True),  # old name, in ms
    shard: str = typer.Option("", "--shard", help="i/n: only tasks with index % n == i."),
    kinds: str = typer.Option("c2cuda,torch2cuda", "--kinds", help="Task kinds to measure."),
    limit: int = typer.Option(None, "--limit", min=1, help="Only the first N selected tasks."),
    compile_only: bool = typer.Option(
        False, "--compile-only", help="No GPU: only build the batch libraries (dry run)."
    ),
    arch: str = typer.Option(None, "--arch", help="nvcc -arch; default: the GPU's, or sm_90."),
    cache_dir: Path = typer.Option(Path("~/.cache/cudaperf"), "--cache-dir", help="Build cache."),
    scratch: Path = typer.Option(None, "--scratch", help="Folder for prepared inputs."),
    max_inflight_gb: float = typer.Option(16.0, "--max-inflight-gb", help="Prepared inputs held."),
    cpu_trials: int = typer.Option(0, "--cpu-trials", min=0, help="Time the C reference N times."),
    run_timeout: float = typer.Option(120.0, "--run-timeout", help="Seconds before a hang."),
    seed_salt: int = typer.Option(None, "--seed-salt", help="Fixed secret input salt."),
    summary: Path = typer.Option(None, "--summary", help="Write the run summary JSON here."),
    every: float = typer.Option(30.0, "--progress-every", help="Seconds between progress lines."),
    json: bool = JsonOpt,
) -> None:
    """Verify and time every implementation on the GPU(s), many per nvcc call and per process.

    Resumable: pairs already in --out are skipped. With --compile-only (no GPU needed) it only
    builds the batch libraries and writes `compiled` rows.
    """
    import sys
    import time

    from cudaperf.cli.common import load_task_set
    from cudaperf.execute.build import detect_gpus
    from cudaperf.execute.bulk import MeasureError, estimate_gpu_seconds, measure_tasks

    for flag, value in (
        ("--max-inflight-gb", max_inflight_gb),
        ("--run-timeout", run_timeout),
        ("--progress-every", every),
    ):  # named by the flag (the bulk config names its fields); --progress-every was not checked
        if not (math.isfinite(value) and value > 0):
            fail(f"{flag} {value}: use a number > 0")
    check_out_file(out, "--out", (".jsonl",))
    check_results_out(out)
    check_out_file(summary, "--summary", (".json",))
    check_out_dir(cache_dir, "--cache-dir")
    check_out_dir(scratch, "--scratch")
    check_arch(arch)
    if not compile_only and not detect_gpus():
        fail(
            "`data measure` needs an NVIDIA GPU (nvidia-smi lists none) to verify and time "
            "implementations; run it on a GPU machine, or pass --compile-only to only build "
            "them here",
            code=1,
        )
    timing_budget = renamed(
        "--budget-ms", budget_ms, "--timing-budget", timing_budget, lambda ms: ms / 1e3
    )
    gpu_ids = None if gpus.strip() == "all" else gpu_list(gpus, "--gpus", not compile_only)
    if compile_only and gpu_ids is not None:  # was accepted and ignored: nothing is timed
        fail("--gpus picks the GPUs that time implementations; drop it or drop --compile-only")
    try:
        config = measure_config(
            out=out,
            batch_tasks=batch_tasks,
            jobs=jobs,
            gpus=gpu_ids,
            trials=trials,
            warmup=warmup,
            timing_budget=timing_budget,
            compile_only=compile_only,
            arch=arch,
            cache_dir=cache_dir,
            scratch=scratch,
            seed_salt=seed_salt,
            run_timeout=run_timeout,
            max_inflight_gb=max_inflight_gb,
            cpu_trials=cpu_trials,
        )
        tasks = _select_for_measure(load_task_set(path, default="dataset"), kinds, shard, limit)
    except ValueError as e:
        fail(f"{e} (check --gpus, --shard, --kinds and the numeric options)")
    est = estimate_gpu_seconds(tasks, config)
    console.print(
        f"measuring {len(tasks)} task(s) -> {out} ({'compile-only' if compile_only else 'GPU'});"
        f" model estimate of GPU-runner time for the C->CUDA part: {est['seconds']:.0f} s "
        f"({est['ms_per_impl']:.1f} ms per implementation, {est['implementations']} impls)",
        highlight=False,
    )
    last = [0.0]
    latest: dict = {}

    def on_progress(snap: dict) -> None:
        latest.update(snap)
        now = time.monotonic()
        if now - last[0] < every and snap["impls_done"] < snap["impls_total"]:
            return
        last[0] = now
        eta = "?" if snap["eta_s"] is None else f"{snap['eta_s'] / 60:.1f} min"
        st = ", ".join(f"{k} {v}" for k, v in sorted(snap["statuses"].items()))
        console.print(
            f"[{time.strftime('%H:%M:%S')}] {snap['impls_done']}/{snap['impls_total']} impls, "
            f"{snap['tasks_done']}/{snap['tasks_total']} tasks, "
            f"{snap['impls_per_min']:.0f} impls/min, ETA {eta} ({st})",
            highlight=False,
        )

    try:
        result = measure_tasks(tasks, config, on_progress)
    except MeasureError as e:
        fail(str(e), code=1)
    except KeyboardInterrupt:
        if summary:  # what was done before Ctrl-C (the rows themselves are in --out)
            part = {
                "interrupted": True,
                "progress": latest,
                "command": " ".join(sys.argv),
                "estimate": est,
                "out": str(out),
            }
            summary.parent.mkdir(parents=True, exist_ok=True)
            summary.write_text(jsonlib.dumps(part, indent=1, default=str) + "\n")
        raise
    result["command"] = " ".join(sys.argv)
    result["estimate"] = est
    if summary:
        summary.parent.mkdir(parents=True, exist_ok=True)
        summary.write_text(jsonlib.dumps(result, indent=1, default=str) + "\n")
    if json:
        emit_json(result)
        return
    table = Table("kind", "status", "implementations")
    for kind, counts in sorted(result["statuses_in_file"].items()):
        for st, n in sorted(counts.items()):
            table.add_row(kind, st, str(n))
    stdout.print(table)
    rate = result["impls_per_min"]
    per = result.get("gpu_process_s_per_impl")
    console.print(
        f"{result['implementations_measured_this_run']} implementation(s) this run in "
        f"{result['wall_s']:.0f} s ({rate} impls/min); GPU-runner time per implementation: "
        f"{'n/a' if per is None else f'{per * 1e3:.1f} ms'}; nvcc calls: "
        f"{result.get('nvcc_calls', 0)} ({result.get('nvcc_seconds', 0):.0f} s of nvcc wall time)",
        highlight=False,
    )
    for note in result.get("notes", []):
        console.print(f"[yellow]note:[/] {note}", highlight=False)


def measure_config(
    *,
    out: Path,
    batch_tasks: int,
    jobs: int | None,
    gpus,
    trials: int,
    warmup: int,
    timing_budget: float | None,
    compile_only: bool,
    arch: str | None,
    cache_dir: Path,
    scratch: Path | None,
    seed_salt: int | None,
    run_timeout: float,
    max_inflight_gb: float,
    cpu_trials: int,
):
    """`data measure`'s flags as a `BulkConfig`: the settings the evaluator shares go into its
    `EvalConfig` (--trials, --warmup, --timing-budget as time_budget_s, --compile-only,
    --arch, --cache-dir, --seed-salt, --gpus), the rest into the bulk's own fields
    (--run-timeout is `silence_timeout_s`); --timing-budget None: the bulk default. Raises
    ValueError naming a bad value."""
    from cudaperf.execute.bulk import BulkConfig, bulk_eval_config

    budget = {}
    if timing_budget is not None:
        if not timing_budget > 0:  # named by its flag: EvalConfig would name time_budget_s
            raise ValueError(f"--timing-budget {timing_budget}: must be > 0 seconds, e.g. 0.05")
        budget["time_budget_s"] = timing_budget
    ev = bulk_eval_config(
        trials=trials,
        warmup=warmup,
        compile_only=compile_only,
        arch=arch,
        cache_dir=cache_dir,
        seed_salt=seed_salt,
        gpus=gpus,
        **budget,
    )
    return BulkConfig(
        out=out,
        eval=ev,
        batch_tasks=batch_tasks,
        jobs=jobs,
        scratch=scratch,
        silence_timeout_s=run_timeout,
        max_inflight_gb=max_inflight_gb,
        cpu_trials=cpu_trials,
    )


def _select_for_measure(tasks: list, kinds: str, shard: str, limit: int | None) -> list:
    """Tasks of the given kinds, then this shard (i/n, by position), then the first `limit`."""
    want = {k.strip() for k in kinds.split(",") if k.strip()}
    if not want:  # once measured nothing and exited 0
        raise ValueError(f"--kinds {kinds!r} names no kind; use c2cuda, torch2cuda or both")
    unknown = want - {"c2cuda", "torch2cuda"}
    if unknown:
        raise ValueError(f"--kinds: unknown kind(s) {sorted(unknown)}; use c2cuda,torch2cuda")
    tasks = [t for t in tasks if t.kind.value in want]
    if shard:
        try:
            i, n = (int(x) for x in shard.split("/"))
        except ValueError:
            raise ValueError(f"--shard {shard!r}: write it as i/n, e.g. 0/4") from None
        if not 0 <= i < n:
            raise ValueError(f"--shard {shard!r}: need 0 <= i < n")
        tasks = tasks[i::n]
    return tasks[:limit] if limit is not None else tasks
