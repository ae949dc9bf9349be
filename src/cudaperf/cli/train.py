"""`cudaperf train sft|grpo|report`: SFT warm start, multi-turn GRPO, training curves."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import NoReturn

import typer

from cudaperf.cli.common import (
    DATASET_DEFAULT,
    GenerationOpt,
    check_adapter,
    check_cache_dir,
    check_model_spec,
    check_out_dir,
    check_out_file,
    check_wall_budget,
    console,
    emit_json,
    fail,
    jsonl_rows,
    measured_dataset,
)
from cudaperf.cli.group import INTERRUPTED
from cudaperf.cli.options import (
    PresetOpt,
    RewardOpt,
    field_option,
    gpu_list,
    options_of,
    renamed,
    reward_config,
)
from cudaperf.train.grpo import GrpoOptions  # light: no torch or TRL until a run starts
from cudaperf.train.sft import SftOptions

__all__ = ["train_app"]

train_app = typer.Typer(
    help="Train a policy: SFT warm start, multi-turn GRPO, curves.", no_args_is_help=True
)

OutOpt = typer.Option(..., "--out", help="Run folder (checkpoints, steps.jsonl, final/).")
TasksOpt = typer.Option(
    None, "--tasks", help=f"Task file (train split used); default: {DATASET_DEFAULT}."
)
SplitsOpt = typer.Option(None, "--splits", help="splits.json (default: beside --tasks).")
KindsOpt = typer.Option(None, "--kind", help="Only this task kind (c2cuda, torch2cuda); repeat.")
# a run's wall clock (`--time-budget` before: eval and bench time each config within theirs)
GRPO = options_of(GrpoOptions, wall_budget_s="--wall-budget")  # GRPO.turns: `--turns`
SFT = options_of(SftOptions, time_budget_s="--wall-budget")  # SFT.epochs: `--epochs`
OLD_WALL_BUDGET = typer.Option(None, "--time-budget", hidden=True)


def _check_run_options(
    out: Path, model: str, pieces_mib: float | None, resume: bool, overwrite: bool
) -> None:
    """What both trainers can refuse before loading a model: a run folder that cannot be
    made, a model path that is no checkpoint, a --pieces-mib that is not a size, a --resume
    with no checkpoint to resume (else a silent new run over the old folder), a folder that
    holds a run without --resume or --overwrite (`train.layout.check_run_folder`)."""
    from cudaperf.train.layout import check_run_folder, last_checkpoint

    check_out_dir(out, "--out")
    check_model_spec(model, "--model")
    try:
        check_run_folder(out, resume, overwrite)
    except ValueError as e:
        fail(str(e))
    if resume:
        if last_checkpoint(out) is None:
            fail(
                f"--resume: {out} holds no checkpoint-N folder to continue from; leave "
                "--resume out to start a new run there, or give the --out of the run to "
                "continue"
            )
    if pieces_mib is not None and not pieces_mib > 0:
        fail(
            f"--pieces-mib {pieces_mib}: give a size in MiB > 0 (e.g. 15), or leave it out "
            "to save files whole"
        )


def _run(fn, opts_cls, **kw):
    """`fn(opts_cls(**kw))`, its refusals as one line each; the trainer itself removes the run
    that `--overwrite` replaces, once its inputs are loaded and checked."""
    try:
        opts = opts_cls(**kw)
    except ValueError as e:
        fail(str(e))
    try:
        from cudaperf.train.runlog import RunInterrupted  # transformers: fn loads it anyway

        with contextlib.redirect_stdout(sys.stderr):  # trainer progress prints; stdout = JSON
            return fn(opts)
    except ValueError as e:
        fail(str(e))
    except ImportError as e:
        fail(f"{e}; install the training extra: pip install 'cudaperf[train]'")
    except RunInterrupted as e:
        _interrupted(opts.out, e)


def _interrupted(out: Path, e) -> NoReturn:
    """Ctrl-C during training: one line saying what was kept and how to go on; exit 130."""
    if e.checkpoint:
        line = f"saved {e.checkpoint}; continue with the same command and --resume"
    elif e.step == 0:
        line = (
            f"nothing was trained yet; start again with --overwrite (or another --out than {out})"
        )
    else:
        line = f"no checkpoint saved (several processes); --resume continues from {out}'s newest"
    console.print(f"interrupted after step {e.step}: {line}", highlight=False)
    raise typer.Exit(INTERRUPTED)


@train_app.command("sft")
def sft_command(
    out: Path = OutOpt,
    model: str = SFT.model,
    tasks: Path | None = TasksOpt,
    splits: Path | None = SFT.splits,
    kind: list[str] | None = KindsOpt,
    targets: str = SFT.targets,
    lora_r: int = SFT.lora_r,
    epochs: float = SFT.epochs,
    lr: float = SFT.lr,
    batch_size: int = SFT.batch_size,
    grad_accum: int = SFT.grad_accum,
    max_length: int | None = SFT.max_length,
    val_families: int = SFT.val_families,
    holdout_share: float = SFT.holdout_share,
    limit: int | None = field_option(SftOptions, "limit", min=1),
    wall_budget: float | None = SFT.time_budget_s,
    old_wall_budget: float | None = OLD_WALL_BUDGET,
    pieces_mib: float | None = SFT.pieces_mib,
    resume: bool = SFT.resume,
    overwrite: bool = SFT.overwrite,
    seed: int = SFT.seed,
) -> None:
    """Supervised warm start on training-split tasks (refine's prompt → fastest kernel)."""
    from cudaperf.train.sft import run_sft

    wall_budget = renamed("--time-budget", old_wall_budget, "--wall-budget", wall_budget)
    # checked here: SftOptions would name the old flag (--time-budget)
    check_wall_budget(wall_budget)
    _check_run_options(out, model, pieces_mib, resume, overwrite)
    tasks = tasks or measured_dataset()
    console.print(f"SFT of {model} on {tasks} (training-split families only) → {out}")
    rep = _run(
        run_sft,
        SftOptions,
        out=out,
        model=model,
        tasks=tasks,
        splits=splits,
        kinds=tuple(kind or ()),
        targets=targets,
        lora_r=lora_r,
        epochs=epochs,
        lr=lr,
        batch_size=batch_size,
        grad_accum=grad_accum,
        max_length=max_length,
        val_families=val_families,
        holdout_share=holdout_share,
        limit=limit,
        seed=seed,
        time_budget_s=wall_budget,
        pieces_mib=pieces_mib,
        resume=resume,
        overwrite=overwrite,
    )
    if "final" not in rep:  # a non-main process under accelerate launch
        return
    console.print(
        f"{rep['rows_trained']} rows trained (cap {rep['max_length']} tokens, "
        f"{rep['dropped_share']:.1%} dropped as longer), {rep['steps']} steps, "
        f"best {rep['best_checkpoint']}; saved {rep['final']}"
    )
    emit_json(rep)


@train_app.command("grpo")
def grpo_command(
    out: Path = OutOpt,
    model: str = GRPO.model,
    adapter: Path | None = GRPO.adapter,
    tasks: Path | None = TasksOpt,
    splits: Path | None = SplitsOpt,
    kind: list[str] | None = KindsOpt,
    pool: int | None = GRPO.pool,
    pool_fits: bool = GRPO.pool_fits,
    preset: str = PresetOpt,
    reward: list[str] | None = RewardOpt,
    ranker: str = GRPO.ranker,
    turns: int = GRPO.turns,
    gamma: float = GRPO.gamma,
    num_generations: int = GRPO.num_generations,
    groups_per_step: int = GRPO.groups_per_step,
    max_steps: int = GRPO.max_steps,
    max_new_tokens: int = GRPO.max_new_tokens,
    temperature: float = GRPO.temperature,
    generation: str = GenerationOpt,
    generation_weights: str = GRPO.generation_weights,
    lr: float = GRPO.lr,
    beta: float = GRPO.beta,
    lora_r: int = GRPO.lora_r,
    gradient_checkpointing: bool = GRPO.gradient_checkpointing,
    save_steps: int = GRPO.save_steps,
    val_families: int = GRPO.val_families,
    holdout_share: float = GRPO.holdout_share,
    seed: int | None = GRPO.seed,
    split_seed: int = GRPO.split_seed,
    sampler: str = GRPO.sampler,
    eval_gpus: str | None = GRPO.eval_gpus,
    eval_workers_per_gpu: int = GRPO.eval_workers_per_gpu,
    canaries: int = GRPO.canaries,
    canary_every: int = GRPO.canary_every,
    compile_only: bool = GRPO.compile_only,
    wall_budget: float | None = GRPO.wall_budget_s,
    old_wall_budget: float | None = OLD_WALL_BUDGET,
    pieces_mib: float | None = GRPO.pieces_mib,
    resume: bool = GRPO.resume,
    overwrite: bool = GRPO.overwrite,
) -> None:
    """Multi-turn GRPO (TRL) with the unified reward and one persistent evaluator.

    GPUs: generation and training on the process's GPU; timing on --eval-gpus (nvidia-smi
    indices; default: every GPU with one process, each process's own GPU under accelerate
    launch). Timing on a training GPU runs after that step's generation, never beside it."""
    from cudaperf.train.grpo import run_grpo

    gpus = gpu_list(eval_gpus, "--eval-gpus")
    wall_budget = renamed("--time-budget", old_wall_budget, "--wall-budget", wall_budget)
    _check_run_options(out, model, pieces_mib, resume, overwrite)
    check_adapter(adapter, model)
    check_cache_dir(None)  # the evaluator's builds and results
    reward_cfg = reward_config(preset, reward)
    if ranker not in ("default", "none"):  # else a file that cannot be read only warns
        from cudaperf.cli.reward import load_ranker_option

        load_ranker_option(ranker)
    tasks = tasks or measured_dataset()
    console.print(f"GRPO of {model} on up to {pool or 'all'} training tasks → {out}")
    rep = _run(
        run_grpo,
        GrpoOptions,
        out=out,
        model=model,
        adapter=adapter,
        tasks=tasks,
        splits=splits,
        kinds=tuple(kind or ("c2cuda",)),
        pool=pool or None,
        pool_fits=pool_fits,
        reward=reward_cfg,
        ranker=ranker,
        turns=turns,
        gamma=gamma,
        num_generations=num_generations,
        groups_per_step=groups_per_step,
        max_steps=max_steps,
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        generation=generation,
        generation_weights=generation_weights,
        lr=lr,
        beta=beta,
        lora_r=lora_r,
        gradient_checkpointing=gradient_checkpointing,
        save_steps=save_steps,
        val_families=val_families,
        holdout_share=holdout_share,
        seed=seed,
        split_seed=split_seed,
        sampler=sampler,
        eval_gpus=gpus,
        eval_workers_per_gpu=eval_workers_per_gpu,
        canaries=canaries,
        canary_every=canary_every,
        compile_only=compile_only,
        wall_budget_s=wall_budget,
        pieces_mib=pieces_mib,
        resume=resume,
        overwrite=overwrite,
    )
    if "final" not in rep:  # a non-main process under accelerate launch
        return
    console.print(f"{rep['steps']} steps in {rep['seconds']} s; saved {rep['final']}")
    emit_json(rep)


@train_app.command("report")
def report_command(
    runs: list[Path] = typer.Argument(..., help="Run folders (or their steps.jsonl)."),
    plot: Path | None = typer.Option(None, "--plot", help="Write the curves to this PNG."),
) -> None:
    """Per-run summary of GRPO steps and the mean step-time breakdown; with --plot, the
    reward, status and step-time curves."""
    from cudaperf.train.curves import plot_runs, summary

    check_out_file(plot, "--plot", (".png",))
    for run in runs:
        _check_steps(run)
    try:
        rep = summary(list(runs))
        if plot is not None:
            console.print(f"plot: {plot_runs(list(runs), plot)}")
    except ValueError as e:
        fail(str(e))
    _breakdown_table(rep)
    _phases_table(rep)
    emit_json(rep)


STEP_KINDS = ("layout", "prepare", "rollout", "step", "trainer")  # train.runlog's records


def _check_steps(run: Path) -> None:
    """A run's steps.jsonl holds JSON objects, and those of a step carry its number; else one
    line naming the file and the line (the reader would fail with a bare parse error)."""
    path = run / "steps.jsonl" if run.is_dir() else run
    if not path.is_file():
        return  # the reader says so, naming the run
    hint = "give a run folder of `cudaperf train` (or its steps.jsonl)"
    known, grpo, sft = 0, False, False
    for n, row in jsonl_rows(path, "RUNS", hint, cut_ok=True):  # train.curves skips a cut line
        if not isinstance(row, dict):
            fail(f"RUNS {path}:{n}: not a JSON object; {hint}")
        if row.get("kind") in ("rollout", "step", "trainer") and not isinstance(
            row.get("step"), int
        ):
            fail(f"RUNS {path}:{n}: a {row['kind']} record without an integer 'step'; {hint}")
        known += row.get("kind") in STEP_KINDS
        grpo = grpo or row.get("kind") == "rollout" or row.get("run") == "grpo"
        sft = sft or row.get("run") == "sft"
    if not known:  # a task, results or other JSONL file once reported "steps: 0", exit 0
        fail(f"RUNS {path}: no record of a training run ({', '.join(STEP_KINDS)}) in it; {hint}")
    if sft and not grpo:  # an SFT run once showed an empty GRPO table
        fail(
            f"RUNS {path} is an SFT run (no GRPO rollout in it); `train report` reads GRPO "
            f"runs: its summary is {path.parent / 'report.json'}"
        )


def _phases_table(rep: dict) -> None:
    """The evaluator's mean seconds per step by phase (`ExecResult.phases`, summed over the
    step's candidates), one row per run that logged them (to stderr, as the breakdown)."""
    from rich.table import Table

    runs = {run: r["eval_phases_s_mean"] for run, r in rep.items() if r.get("eval_phases_s_mean")}
    if not runs:
        return
    names = sorted({k for p in runs.values() for k in p})
    table = Table(title="evaluator seconds per GRPO step, by phase (summed over candidates)")
    for col in ("run", *names):
        table.add_column(col)
    for run, p in runs.items():
        table.add_row(run, *(f"{p[k]:g}" if k in p else "-" for k in names))
    console.print(table)


def _breakdown_table(rep: dict) -> None:
    """Mean seconds per step by part, one row per run (to stderr; stdout stays JSON)."""
    from rich.table import Table

    parts = (
        "generate",
        "analyse",
        "eval",
        "evaluator",
        "eval_wait",
        "canary",
        "update",
        "optimizer",
        "step",
    )
    table = Table(title="mean seconds per GRPO step")
    for col in ("run", "steps", "procs", *parts, "candidates"):
        table.add_column(col)
    for run, r in rep.items():
        cells = [r.get(f"{p}_s_mean") for p in parts] + [r.get("candidates_per_step")]
        table.add_row(
            run,
            str(r.get("steps", 0)),
            str(r.get("processes", "")),
            *("-" if v is None else f"{v:g}" for v in cells),
        )
    console.print(table)
