"""`cudaperf data ...`: generate the task set (`build`), check it without a GPU (`verify`)."""

from __future__ import annotations

import json as jsonlib
from pathlib import Path

import typer
from rich.progress import Progress
from rich.table import Table

from cudaperf.cli.common import console, emit_json, fail, stdout

data_app = typer.Typer(help="Generate and check the generated task set.", no_args_is_help=True)
JsonOpt = typer.Option(False, "--json", help="Print one JSON document to stdout, nothing else.")


@data_app.command("build")
def build(
    per_family: int = typer.Option(
        5, "--per-family", min=1, help="Tasks per family (kinds without a total below)."
    ),
    c_tasks: int = typer.Option(
        0, "--c-tasks", min=0, help="About this many C→CUDA tasks, spread evenly over families."
    ),
    torch_tasks: int = typer.Option(
        0, "--torch-tasks", min=0, help="About this many PyTorch→CUDA tasks, likewise."
    ),
    seed: int = typer.Option(0, "--seed", help="Build seed (same seed: identical output)."),
    out: Path = typer.Option(
        Path("data/tasks.jsonl"), "--out", help="Output file: .jsonl, .jsonl.gz or .parquet."
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

    if not (out.name.endswith((".jsonl", ".jsonl.gz", ".parquet"))):
        fail(f"--out {out}: use a .jsonl, .jsonl.gz or .parquet file name")
    try:
        names = tuple(f.strip() for f in families.split(",") if f.strip())
        config = BuildConfig(per_family, seed, names, max_share, c_tasks, torch_tasks)
        total = sum(n for _, n in plan(config))
        with Progress(console=console, transient=True, disable=json) as bar:
            job = bar.add_task("generating", total=total)
            report = build_tasks(config, lambda fam: bar.update(job, advance=1, description=fam))
    except ValueError as e:
        fail(str(e))
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
    console.print(f"wrote {len(report.tasks)} task(s) to {out} and the splits to {split_path}")


@data_app.command("verify")
def verify(
    path: Path = typer.Argument(Path("data/tasks.jsonl"), help="Generated task file."),
    jobs: int = typer.Option(2, "--jobs", min=1, help="Parallel nvcc processes."),
    no_nvcc: bool = typer.Option(False, "--no-nvcc", help="Skip compiling the CUDA code."),
    json: bool = JsonOpt,
) -> None:
    """C references: gcc + run on the smallest config; CUDA: nvcc -cubin (no GPU needed)."""
    from cudaperf.datagen.verify import check_reference, cuda_units, nvcc_compile
    from cudaperf.tasks.io import TaskFileError, load_tasks

    try:
        tasks = load_tasks(path)
    except TaskFileError as e:
        fail(str(e))
    c_tasks = [t for t in tasks if t.kind.value == "c2cuda"]
    with console.status("checking C references ..."):
        refs = [check_reference(t) for t in c_tasks]
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


@data_app.command("measure")
def measure() -> None:
    """Time every implementation on a GPU (not available yet: needs a GPU session)."""
    fail(
        "`data measure` needs an NVIDIA GPU and is not implemented yet; measure the generated "
        "implementations with `cudaperf eval data/tasks.jsonl --implementations` on a GPU "
        "machine",
        code=1,
    )
