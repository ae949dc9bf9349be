"""`cudaperf tasks ...`: inspect, validate and convert task sets."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.syntax import Syntax
from rich.table import Table

from cudaperf.cli.common import (
    DATASET_DEFAULT,
    SAMPLE_DEFAULT,
    check_not_replacing,
    check_out_dir,
    check_out_file,
    console,
    emit_json,
    fail,
    in_package,
    load_task_set,
    read_eval_results,
    read_tasks,
    select_task,
    stdout,
)
from cudaperf.tasks.io import (
    TaskFileError,
    dataset_path,
    sample_path,
    save_tasks,
    to_hf_dataset,
)
from cudaperf.tasks.splits import splits_task_ids
from cudaperf.tasks.stats import task_stats

tasks_app = typer.Typer(help="Inspect, validate and convert task sets.", no_args_is_help=True)

PathArg = typer.Argument(
    None,
    help=f"A .jsonl/.parquet file or task folder (default: {SAMPLE_DEFAULT}).",
    show_default=False,
)
StatsPathArg = typer.Argument(
    None,
    help=f"A .jsonl/.parquet file or task folder (default: {DATASET_DEFAULT}, else the "
    "sample set).",
    show_default=False,
)
SampleOpt = typer.Option(False, "--sample", help="Use the bundled sample set.")
JsonOpt = typer.Option(False, "--json", help="Print one JSON document to stdout, nothing else.")


@tasks_app.command("list")
def list_tasks(path: Path | None = PathArg, sample: bool = SampleOpt, json: bool = JsonOpt) -> None:
    """One line per task: id, kind, family, configs, implementations."""
    tasks = load_task_set(path, sample)
    rows = [
        {
            "id": t.id,
            "kind": t.kind.value,
            "family": t.family,
            "configs": len(t.configs),
            "held_out": sum(c.held_out for c in t.configs),
            "implementations": [i.id for i in t.implementations],
        }
        for t in tasks
    ]
    if json:
        emit_json(rows)
        return
    table = Table("id", "kind", "family", "configs", "held out", "implementations")
    for r in rows:
        impls = ", ".join(r["implementations"])
        table.add_row(r["id"], r["kind"], r["family"], str(r["configs"]), str(r["held_out"]), impls)
    stdout.print(table)


@tasks_app.command("show")
def show_task(
    task_id: str = typer.Argument(..., help="Task id (or its last path component)."),
    path: Path | None = PathArg,
    sample: bool = SampleOpt,
    json: bool = JsonOpt,
) -> None:
    """Everything about one task: source, signature, configs, implementations."""
    t = select_task(load_task_set(path, sample), task_id)
    if json:
        emit_json(t.model_dump(mode="json"))
        return
    stdout.print(f"[bold]{t.id}[/]  kind={t.kind.value} family={t.family} entry={t.entry}")
    if t.description:
        stdout.print(t.description, markup=False, highlight=False, width=min(stdout.width, 100))
    lang = "c" if t.kind.value == "c2cuda" else "python"
    width = max(map(len, t.source.splitlines() or [""])) + 1  # not padded to the console
    stdout.print(Syntax(t.source, lang, line_numbers=True, code_width=width))
    if t.signature:
        stdout.print(f"candidate prototype: {t.c_prototype()}")
    table = Table("config", "held out", "sizes", "seed")
    for c in t.configs:
        table.add_row(c.name, "yes" if c.held_out else "", str(c.sizes), str(c.seed))
    stdout.print(table)
    impls = Table("implementation", "strategies", "lines", "measurements")
    for i in t.implementations:
        impls.add_row(
            i.id, ", ".join(i.strategies), str(i.code.count("\n") + 1), str(len(i.measurements))
        )
    stdout.print(impls)


@tasks_app.command("stats")
def stats(path: Path | None = StatsPathArg, sample: bool = SampleOpt, json: bool = JsonOpt) -> None:
    """Counts and coverage of a task set (kinds, families, configs, implementations).

    With no PATH: the measured dataset (data/tasks.jsonl.gz, or $CUDAPERF_DATASET) when this
    checkout has it, else the bundled sample set (as with --sample)."""
    if path is None and not sample:
        path = dataset_path()
        if path is None:
            console.print("no dataset found (data/tasks.jsonl.gz): reporting on the sample set")
    report = task_stats(load_task_set(path, sample))
    if json:
        emit_json(report)
        return
    table = Table("statistic", "value")
    for key, value in report.items():
        table.add_row(key, str(value))
    stdout.print(table)


@tasks_app.command("validate")
def validate(
    path: Path = typer.Argument(..., help="The .jsonl/.parquet file or task folder to check."),
    json: bool = JsonOpt,
) -> None:
    """Check a task file; exit non-zero naming the file, line, field and what is expected."""
    try:
        tasks = read_tasks(path)
    except TaskFileError as e:
        if json:
            emit_json({"valid": False, "error": str(e)})
            raise typer.Exit(1) from None
        fail(str(e), code=1)
    if json:
        emit_json({"valid": True, "tasks": len(tasks)})
    else:
        console.print(f"[green]ok[/]: {path} holds {len(tasks)} valid task(s)")


ForceOpt = typer.Option(
    False, "--force", help="Replace an --out that already exists (a file, or a folder with files)."
)


@tasks_app.command("export")
def export(
    out: Path = typer.Option(..., "--out", help="Output: .jsonl, .parquet, or a folder for --hf."),
    path: Path | None = PathArg,
    sample: bool = SampleOpt,
    hf: bool = typer.Option(False, "--hf", help="Write a Hugging Face `datasets` folder."),
    force: bool = ForceOpt,
    json: bool = JsonOpt,
) -> None:
    """Convert a task set to JSONL, Parquet or a Hugging Face dataset folder."""
    if hf:
        if out.name.endswith((".jsonl", ".jsonl.gz", ".parquet", ".json")):
            fail(
                f"--out {out}: --hf writes a folder (a Hugging Face `datasets` dataset), not "
                "a file; give a folder name, or drop --hf to write that file"
            )
        check_out_dir(out, "--out")
    else:
        check_out_file(out, "--out", (".jsonl", ".jsonl.gz", ".parquet"))
    check_not_replacing(out, "--out", force)
    tasks = load_task_set(path, sample)
    if hf:
        try:
            to_hf_dataset(tasks).save_to_disk(str(out))
        except ImportError as e:
            fail(str(e))
    else:
        save_tasks(tasks, out)
    if json:
        emit_json({"written": len(tasks), "out": str(out)})
    else:
        console.print(f"wrote {len(tasks)} task(s) to {out}")


@tasks_app.command("import")
def import_suite(
    suite: str = typer.Argument(
        ..., help="Suite name: kernelbench, babeltower, polybench-acc, pareval, cudal1."
    ),
    path: Path = typer.Argument(..., help="Your own checkout (or file) of the suite."),
    out: Path = typer.Option(..., "--out", help="Where to write the tasks (.jsonl or .parquet)."),
    levels: str = typer.Option("1,2,3", "--levels", help="KernelBench levels, e.g. 1,2,3."),
    no_validate: bool = typer.Option(
        False,
        "--no-validate",
        help="Skip the CPU checks (faster): KernelBench's derived configs, BabelTower's "
        "sanitizer run of every C reference on every config.",
    ),
    kernelbench: Path = typer.Option(
        None, "--kernelbench", help="cudal1: the KernelBench tasks file to attach kernels to."
    ),
    force: bool = ForceOpt,
    json: bool = JsonOpt,
) -> None:
    """Import a public benchmark suite from your checkout; every skip has a reason."""
    from cudaperf.tasks.importers import IMPORTERS

    if suite not in IMPORTERS:
        fail(f"unknown suite {suite!r}; available: {', '.join(sorted(IMPORTERS))}")
    check_out_file(out, "--out", (".jsonl", ".jsonl.gz", ".parquet"))
    check_not_replacing(out, "--out", force)
    if kernelbench is not None and suite != "cudal1":
        fail("--kernelbench is only for the cudal1 suite")
    try:
        lv = tuple(int(x) for x in levels.split(",") if x.strip())
    except ValueError:
        fail(f"--levels {levels!r}: give comma-separated level numbers such as 1,2,3")
    try:
        with console.status(f"importing {suite} from {path} ..."):
            opts = {"levels": lv, "validate": not no_validate}
            if kernelbench is not None:  # only cudal1 takes it
                opts["kernelbench"] = kernelbench
            report = IMPORTERS[suite](path, **opts)
    except UnicodeDecodeError as e:  # before ValueError, which it is: the message names no file
        fail(
            f"{path} (or a file in it) is not UTF-8 text ({e.reason} at byte {e.start}); "
            f"give your own checkout (or file) of {suite} as it was published"
        )
    except (FileNotFoundError, ImportError, ValueError) as e:
        fail(str(e))
    summary = report.summary()
    if not report.tasks:  # nothing to write: an empty file would only fail the next command
        reasons = "; ".join(f"{n}: {r}" for r, n in list(summary["reasons"].items())[:3])
        fail(
            f"nothing imported from {path} ({summary['skipped']} item(s) skipped"
            f"{': ' + reasons if reasons else ''}); give your checkout (or file) of {suite}, "
            f"nothing was written to {out}"
        )
    save_tasks(report.tasks, out)
    if json:
        emit_json(summary)
        return
    console.print(
        f"imported {summary['imported']} task(s) into {out}; skipped {summary['skipped']}"
    )
    for reason, n in summary["reasons"].items():
        console.print(f"  skipped {n}: {reason}", highlight=False)


@tasks_app.command("overlap")
def overlap(
    a: Path = typer.Argument(..., help="Task set A (e.g. training data)."),
    b: Path = typer.Argument(..., help="Task set B (e.g. an evaluation suite)."),
    n: int = typer.Option(8, "--ngram", min=2, help="Token n-gram length."),
    threshold: float = typer.Option(0.5, "--threshold", min=0.0, max=1.0),
    impls: bool = typer.Option(False, "--implementations", help="Include implementation code."),
    json: bool = JsonOpt,
) -> None:
    """N-gram overlap of each task of B with its closest task of A (decontamination)."""
    from cudaperf.tasks.overlap import task_overlap

    try:
        ta, tb = read_tasks(a), read_tasks(b)
    except TaskFileError as e:
        fail(str(e))
    report = task_overlap(ta, tb, n=n, threshold=threshold, with_impls=impls)
    if json:
        emit_json(report)
        return
    console.print(
        f"{report['overlapping']} of {report['b_tasks']} tasks of B share >= {threshold:.0%} of "
        f"their {n}-grams with a task of A (max {report['max_overlap']:.2f})"
    )
    if report["too_short"]:
        console.print(
            f"[yellow]{report['too_short']} task(s) of B have fewer than {n} tokens and were not "
            f"compared[/] (e.g. {report['too_short_ids'][0]}); give a smaller --ngram to compare "
            "them",
            highlight=False,
        )
    table = Table("task of B", "closest task of A", "overlap")
    for p in report["top_pairs"][:10]:
        table.add_row(p["b"], str(p["a"]), f"{p['overlap']:.2f}")
    stdout.print(table)


@tasks_app.command("attach")
def attach(
    results: Path = typer.Argument(
        ..., help="Results JSONL from `cudaperf eval --implementations`."
    ),
    path: Path | None = PathArg,
    out: Path | None = typer.Option(None, "--out", help="Write the tasks here (.jsonl/.parquet)."),
    date: str = typer.Option("", "--date", help="Measurement date (default: today)."),
    verified_only: bool = typer.Option(
        False,
        "--verified-only",
        help="Drop implementations without an `ok` result on every config, then tasks left "
        "with < --min-implementations implementations or < 2 distinct strategies.",
    ),
    min_implementations: int = typer.Option(3, "--min-implementations", min=1),
    force: bool = typer.Option(
        False,
        "--force",
        help="With no --out: update the installed sample set (no PATH, or a PATH inside it).",
    ),
    json: bool = JsonOpt,
) -> None:
    """Store the GPU timings of `ok` results as the implementations' measurements.

    A task folder PATH is updated in place; a .jsonl/.parquet PATH needs --out. With no PATH the
    sample set is read, and written only to --out (or in place with --force).
    Results that time no implementation of the set, or a --verified-only that keeps no task,
    write nothing (exit 1). With --verified-only, a splits.json beside --out (as `data build`
    writes it) keeps its family splits and loses the ids of the dropped tasks, unless it is
    not --out's: --out is a new file beside the input (the splits stay the input's), or the
    splits list tasks the input does not hold.
    """
    import datetime as dt

    from cudaperf.tasks.io import write_dir_measurements
    from cudaperf.tasks.measurements import (
        attach_measurements,
        keep_verified,
        measurements_from_results,
    )

    if path is None and out is None and not force:
        fail(
            "give the task set to update (PATH) or --out FILE; with neither, attach would "
            "rewrite the installed sample set (add --force if that is what you want)"
        )
    try:
        date = dt.date.fromisoformat(date).isoformat() if date else ""
    except ValueError:
        fail(
            f"--date {date!r}: give the measurement date as YYYY-MM-DD (e.g. 2026-12-03), or "
            "leave it out for today"
        )
    if path is not None and out is None and in_package(path) and not force:
        fail(
            f"{path} is inside the installed cudaperf package (the bundled sample set); give "
            "--out FILE, or add --force to update the installed sample set in place"
        )
    check_out_file(out, "--out", (".jsonl", ".jsonl.gz", ".parquet"))
    target = path if path is not None else sample_path()
    if out is None and not Path(target).is_dir():
        fail(f"{target} is a file; give --out to write the measured tasks somewhere")
    rows = read_eval_results(results, allow_empty=True)  # none: every task unmeasured
    tasks = load_task_set(path)
    try:
        found = measurements_from_results(rows, date or dt.date.today().isoformat())
    except (ValueError, KeyError, TypeError) as e:
        fail(
            f"RESULTS {results}: a result lacks its timings ({e}); give the JSONL that "
            "`cudaperf eval --implementations --out` wrote on a GPU"
        )
    updated, n = attach_measurements(tasks, found)
    if n == 0:  # writing the tasks back unchanged would look like a measurement
        gpu = sum(1 for r in rows if r.get("mode") == "full")
        fail(
            f"RESULTS {results}: no GPU-timed `ok` result of an implementation of {target} "
            f"({len(rows)} row(s), {gpu} from a GPU); nothing written: run `cudaperf eval "
            "--implementations` on a GPU over these tasks first",
            code=1,
        )
    before = task_stats(updated)
    dropped: dict[str, int] = {}
    if verified_only:
        updated, dropped = keep_verified(updated, found, min_implementations)
        if not updated:
            why = "; ".join(f"{k}: {v}" for k, v in dropped.items())
            fail(
                f"--verified-only keeps no task ({why}); nothing written: measure more "
                "implementations, or lower --min-implementations",
                code=1,
            )
    if out is not None:
        try:
            save_tasks(updated, out)
        except TaskFileError as e:
            fail(str(e))
    else:
        write_dir_measurements(target, updated)
    report = {
        "implementations_measured": n,
        "measured_fraction": task_stats(updated)["measured_fraction"],
    }
    if verified_only:
        after = task_stats(updated)
        report.update(
            measured_fraction_before_dropping=before["measured_fraction"],
            tasks_before=before["tasks"],
            tasks=after["tasks"],
            by_kind=after["by_kind"],
            dropped=dropped,
        )
        splits = out.with_name("splits.json") if out is not None else None
        if splits is not None and splits.is_file():
            if _splits_belong_to_out(out, path, splits, tasks):
                if _prune_splits(splits, updated):
                    report["splits"] = str(splits)
            else:
                report["splits"] = f"{splits} unchanged: another task set's (the input's)"
    if json:
        emit_json(report)
    else:
        console.print(f"measured {n} implementation(s); wrote {out or target}", highlight=False)
        _print_report(report)


def _print_report(report: dict) -> None:
    """A `statistic | value` table; nested counts as `key: n, ...` in one cell."""
    table = Table("statistic", "value")
    for key, value in report.items():
        if isinstance(value, dict):
            value = ", ".join(f"{k}: {v}" for k, v in value.items()) or "-"
        table.add_row(key, f"{value:.4f}" if isinstance(value, float) else str(value))
    stdout.print(table)


def _splits_belong_to_out(out: Path, path: Path | None, splits: Path, tasks: list) -> bool:
    """The splits file beside --out is --out's to prune: not when --out is a new file beside
    the input task file (the splits are the input's, which stays as it was), nor when they
    list a task the input does not hold (another task set's)."""
    src = Path(path) if path is not None else None
    if src is not None and src.is_file() and out.resolve() != src.resolve():
        if src.resolve().parent == out.resolve().parent:
            return False
    listed = splits_task_ids(splits)
    return listed is not None and listed <= {t.id for t in tasks}


def _prune_splits(path: Path, kept: list) -> bool:
    """Drop the ids of tasks not in `kept` from a splits file's task lists (its family
    splits stay as they are); True when the file was rewritten."""
    import json as jsonlib

    if not path.is_file():
        return False
    try:
        doc = jsonlib.loads(path.read_text())
    except (OSError, ValueError) as e:
        fail(f"{path}: cannot read the splits file ({e}); fix or remove it and run again")
    lists = doc.get("tasks") if isinstance(doc, dict) else None
    if not isinstance(lists, dict):
        return False
    ids = {t.id for t in kept}
    pruned = {k: [i for i in v if i in ids] for k, v in lists.items()}
    if pruned == lists:
        return False
    path.write_text(jsonlib.dumps({**doc, "tasks": pruned}, indent=1) + "\n")
    return True
