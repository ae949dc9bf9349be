"""`cudaperf rank train|score|eval`: the offline pairwise ranker, feature or neural (issue 8)."""

from __future__ import annotations

import math
import os
import shlex
from pathlib import Path

import typer

from cudaperf.cli.common import (
    DATASET_DEFAULT,
    SAMPLE_DEFAULT,
    check_model_spec,
    check_out_dir,
    check_out_file,
    console,
    emit_json,
    fail,
    load_task_set,
    measured_dataset,
    read_source,
    read_text,
    select_task,
    stdout,
)
from cudaperf.models import ModelUnavailable

__all__ = ["rank_app"]

rank_app = typer.Typer(
    help="Train, evaluate and apply the pairwise ranker (feature or neural).", no_args_is_help=True
)

TasksOpt = typer.Option(
    None, "--tasks", help=f"Task file or folder with measurements (default: {DATASET_DEFAULT})."
)
ScoreTasksOpt = typer.Option(
    None, "--tasks", help=f"Task file or folder (default: {SAMPLE_DEFAULT})."
)
SplitsOpt = typer.Option(
    None,
    "--splits",
    help="splits.json (family → split); default: splits.json next to --tasks, "
    "else a stable hash of the family name.",
)
ModelOpt = typer.Option(
    None,
    "--model",
    help="A ranker: feature JSON, or a folder from `rank train --out` "
    "(feature or neural). Default: the packaged feature weights.",
)
WorkersOpt = typer.Option(
    os.cpu_count() or 1, "--workers", min=1, help="Processes computing analyzer features."
)


def min_ratio_option(default: float, what: str):
    """--min-ratio, validated the same way by every rank command (a time ratio is >= 1)."""
    return typer.Option(default, "--min-ratio", min=1.0, help=f"{what}: slower/faster >= this.")


CacheOpt = typer.Option(
    Path.home() / ".cache" / "cudaperf" / "rank-features",
    "--cache-dir",
    help="On-disk feature cache (keyed by code hash, analyzer settings and feature code).",
)


def _splits_path(tasks_path: Path | None, splits: Path | None) -> Path | None:
    if splits is None and tasks_path is not None:
        near = (tasks_path if tasks_path.is_dir() else tasks_path.parent) / "splits.json"
        splits = near if near.is_file() else None
    return splits


def _splits(tasks_path: Path | None, splits: Path | None) -> dict[str, str] | None:
    from cudaperf.tasks.splits import read_splits

    path = _splits_path(tasks_path, splits)
    if path is None:
        return None
    try:
        return read_splits(path)
    except ValueError as e:
        fail(f"--splits {e}" if splits is not None else str(e))


def _ranker(path: Path | None):
    from cudaperf.rank.formats import ModelNotTrainedError
    from cudaperf.rank.ranker import load_ranker

    try:
        return load_ranker(path)
    except (ModelNotTrainedError, ImportError) as e:  # their messages name the fix
        fail(f"--model {e}" if path is not None else str(e))
    except ValueError as e:  # a file that is no ranker: its reader says only what is wrong
        if path is None:  # the packaged ranker
            fail(str(e))
        fail(
            f"--model {e}; give a ranker `cudaperf rank train --out DIR` wrote (DIR or its "
            "feature_ranker.json), or leave --model out for the packaged one"
        )


def _progress(what: str):
    from rich.progress import Progress

    bar = Progress(console=console, transient=True)
    state: dict = {}

    def update(done: int, total: int, *_: float) -> None:
        if "id" not in state:
            bar.start()
            state["id"] = bar.add_task(what, total=total)
        bar.update(state["id"], completed=done)
        if done >= total:
            bar.stop()

    return update


def read_exclusions(path: Path) -> list[str]:
    """Task ids a ranker must not train on, from `--exclude`: a JSON list of ids, or an SFT
    run's holdout.json, whose `unseen_tasks` are the tasks that run held out for evaluation
    (the ablation's primary subset: a ranker in the reward must not have seen them)."""
    import json

    try:
        doc = json.loads(read_text(path, "--exclude"))
    except json.JSONDecodeError as e:
        fail(
            f"--exclude {path}: not JSON ({e}); give a list of task ids or an SFT run's "
            "holdout.json"
        )
    ids = doc.get("unseen_tasks") if isinstance(doc, dict) else doc
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids) or not ids:
        fail(
            f"--exclude {path}: expected a non-empty JSON list of task ids, or an object with "
            "one under 'unseen_tasks' (an SFT run's holdout.json)"
        )
    return sorted(set(ids))


def without_tasks(tasks: list, ids: list[str], path: Path) -> tuple[list, dict]:
    """`tasks` without those `ids` name, and the record of it for the ranker's provenance; an
    id the task set lacks is an error (a stale or mistyped file would exclude nothing)."""
    import hashlib

    known = {t.id for t in tasks}
    missing = [i for i in ids if i not in known]
    if missing:
        fail(
            f"--exclude {path}: {len(missing)} of its {len(ids)} task ids are not in the task "
            f"set (first: {missing[0]}); was it written for another dataset?"
        )
    drop = set(ids)
    record = {
        "file": str(path),
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "tasks": len(drop),
    }
    return [t for t in tasks if t.id not in drop], record


def _train_feature(
    tasks, splits, out, l2, min_ratio, no_resources, arch, workers, cache, src, objective
):
    from cudaperf.rank.ranker import TrainConfig, train_feature_ranker

    cfg = TrainConfig(
        l2=l2,
        min_ratio=min_ratio,
        resources=not no_resources,
        arch=arch,
        workers=workers,
        cache_dir=str(cache) if cache else None,
        objective=objective,
    )
    model = train_feature_ranker(tasks, splits, cfg, source=src, progress=_progress("features"))
    return model, model.save(out / "feature_ranker.json")


@rank_app.command("train")
def train(
    ctx: typer.Context,
    tasks_path: Path | None = TasksOpt,
    kind: str = typer.Option(
        "feature",
        "--model",
        help="feature (analyzer features and code statistics) or neural (LoRA transformer).",
    ),
    objective: str = typer.Option(
        "ensemble",
        "--objective",
        help="Feature model: ensemble (mean of both), lambdarank (LightGBM trees, calibrated) "
        "or bt (Bradley–Terry).",
    ),
    out: Path = typer.Option(Path("ranker"), "--out", help="Output folder."),
    splits: Path | None = SplitsOpt,
    ship: bool = typer.Option(
        False,
        "--ship",
        help="Feature model: also write it, with its provenance and held-out metrics, into the "
        "package as the default (replacing the packaged ranker needs --force).",
    ),
    force: bool = typer.Option(
        False,
        "--force",
        help="Replace a ranker already in --out; with --ship, also the one in the package.",
    ),
    evaluate_after: bool = typer.Option(
        True,
        "--eval/--no-eval",
        help="Evaluate on held-out families after training (when they have pairs).",
    ),
    l2: float = typer.Option(1e-2, "--l2", help="bt objective: L2 on standardised coefficients."),
    min_ratio: float = min_ratio_option(1.0, "Training pairs"),
    resources: bool = typer.Option(
        False,
        "--resources/--no-resources",
        help="Feature model: ptxas register/occupancy "
        "features (~1.5 s per implementation, and per scored candidate: too slow for the reward).",
    ),
    arch: str = typer.Option("sm_90", "--arch", help="Target architecture for ptxas/occupancy."),
    workers: int = WorkersOpt,
    cache_dir: Path | None = CacheOpt,
    backbone: str = typer.Option(
        "smollm2",
        "--backbone",
        help="Neural: HF model name or path, a .gguf file, or smollm2 (the bundled SmolLM2-135M).",
    ),
    max_steps: int | None = typer.Option(
        None, "--max-steps", help="Neural: optimiser steps (default: --epochs)."
    ),
    epochs: float = typer.Option(1.0, "--epochs", help="Neural: passes over the training tasks."),
    batch_tasks: int = typer.Option(8, "--batch-tasks", help="Neural: tasks per step."),
    max_length: int = typer.Option(1024, "--max-length", help="Neural: tokens per text."),
    lr: float = typer.Option(2e-4, "--lr", help="Neural: peak learning rate."),
    lora_r: int = typer.Option(16, "--lora-r", help="Neural: LoRA rank."),
    device: str | None = typer.Option(None, "--device", help="Neural: cuda/cpu (default: auto)."),
    exclude: Path | None = typer.Option(
        None,
        "--exclude",
        help="JSON list of task ids not to train on, or an SFT run's holdout.json (its "
        "unseen_tasks): a ranker used in a reward must not have seen the evaluation's tasks.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document to stdout."),
) -> None:
    """Train a ranker on measured pairs of the training families; evaluate on held-out ones."""
    import dataclasses

    from cudaperf.rank import formats
    from cudaperf.rank.metrics import evaluate
    from cudaperf.rank.ranker import NoPairsError, provenance

    for flag, value in (("--l2", l2), ("--epochs", epochs), ("--lr", lr)):
        if not math.isfinite(value):  # --l2 nan trained a NaN ranker, then failed in a traceback
            fail(f"{flag} {value}: use a finite number")
    _check_train_options(kind, ship, force, out, cache_dir, backbone, arch, device)
    _check_model_only_options(ctx, kind)
    tasks_path = tasks_path or measured_dataset()
    excluded_ids = read_exclusions(exclude) if exclude is not None else None
    tasks = load_task_set(tasks_path)
    excluded = None
    if excluded_ids is not None:
        tasks, excluded = without_tasks(tasks, excluded_ids, exclude)
    split_map = _splits(tasks_path, splits)
    src = str(tasks_path)
    params = ctx.params
    cmd = "cudaperf rank train " + " ".join(
        f"--{k.replace('_', '-')}={shlex.quote(str(v))}" for k, v in params.items() if v is not None
    )
    prov = provenance(tasks_path, _splits_path(tasks_path, splits), cmd)
    if excluded is not None:
        prov["excluded_tasks"] = excluded
    try:
        if kind == "feature":
            model, path = _train_feature(
                tasks,
                split_map,
                out,
                l2,
                min_ratio,
                not resources,
                arch,
                workers,
                cache_dir,
                src,
                objective,
            )
        else:
            from cudaperf.rank.neural import NeuralConfig, train_neural_ranker

            ncfg = NeuralConfig(
                backbone=backbone,
                max_steps=max_steps,
                epochs=epochs,
                batch_tasks=batch_tasks,
                max_length=max_length,
                lr=lr,
                lora_r=lora_r,
                min_ratio=min_ratio,
                device=device,
            )
            model = train_neural_ranker(
                tasks, split_map, ncfg, out=out, source=src, progress=_progress("training")
            )
            path = out
    except (NoPairsError, ValueError, ImportError) as e:
        fail(str(e))
    except OSError as e:  # transformers: a backbone name that is neither a folder nor on the hub
        if kind != "neural":
            raise
        if isinstance(e, ModelUnavailable):  # its message names the fix
            fail(f"--backbone {backbone}: {e}")
        fail(
            f"--backbone {backbone}: cannot load it ({str(e).splitlines()[0]}); give a "
            "checkpoint folder, a .gguf file, a Hugging Face model name, or smollm2"
        )
    metrics = None
    if evaluate_after:
        try:
            metrics = evaluate(tasks, model, split_map, workers=workers, cache_dir=cache_dir)
        except NoPairsError:
            metrics = None
    report = {
        "model": model.id,
        "path": str(path),
        "kind": kind,
        **{k: v for k, v in model.training.items() if k != "losses"},
        "heldout": metrics,
    }
    if kind == "feature":
        report["features"] = len(model.names)
        report["top_weights"] = [
            {k: r[k] for k in ("feature", "coef")} for r in model.weights_table()[:10]
        ]
    if excluded is not None:
        report["excluded_tasks"] = excluded
    if kind == "feature":  # the file records where it came from, as the packaged one does
        model = dataclasses.replace(
            model, training={**model.training, **prov, "heldout_metrics": metrics}
        )
        model.save(path)
    if ship:
        report["shipped"] = str(model.save(formats.default_weights_path()))
    if as_json:
        emit_json(report)
    else:
        _print_train(report)


def _check_train_options(
    kind, ship, force, out, cache_dir, backbone, arch="sm_90", device=None
) -> None:
    """Everything `rank train` can refuse before loading a task (nothing is trained first)."""
    from pydantic import ValidationError

    from cudaperf.analyze import AnalyzeConfig
    from cudaperf.rank import formats

    try:  # the analyzer checks it (its message names --arch), after minutes of features
        AnalyzeConfig(arch=arch)
    except ValidationError as e:
        fail(e.errors()[0]["msg"].removeprefix("Value error, "))

    if kind not in ("feature", "neural"):
        fail(f"--model must be feature or neural, got {kind!r}")
    if ship and kind != "feature":
        fail("--ship packages the feature ranker only; the neural one stays in --out")
    if ship and formats.default_weights_path().is_file() and not force:
        fail(
            f"--ship would replace the packaged ranker {formats.default_weights_path()}; add "
            "--force to replace it (compare held-out metrics with `cudaperf rank eval` first)"
        )
    check_out_dir(out, "--out")
    from cudaperf.rank.neural import META_FILE

    made = out / ("feature_ranker.json" if kind == "feature" else META_FILE)
    if made.is_file() and not force:  # a rerun with the default --out replaced it silently
        fail(
            f"--out {out} already holds a trained ranker ({made.name}); give another --out, "
            "or add --force to replace it"
        )
    check_out_dir(cache_dir, "--cache-dir")
    if kind == "neural":
        check_model_spec(backbone, "--backbone")
        _check_device(device)


# Options one ranker model reads and the other ignores (each was once taken and dropped
# silently: `--model feature --lr 1e-3` trained the feature ranker as if it were not given).
_NEURAL_ONLY = (
    "backbone",
    "max_steps",
    "epochs",
    "batch_tasks",
    "max_length",
    "lr",
    "lora_r",
    "device",
)
_FEATURE_ONLY = ("objective", "l2", "resources")


def _check_model_only_options(ctx: typer.Context, kind: str) -> None:
    """Refuse an option given on the command line that the chosen --model does not read."""
    ignored = _FEATURE_ONLY if kind == "neural" else _NEURAL_ONLY
    given = [
        f"--{name.replace('_', '-')}"
        for name in ignored
        # by name: typer ships its own copy of click, whose ParameterSource is another enum
        if getattr(ctx.get_parameter_source(name), "name", None) == "COMMANDLINE"
    ]
    if given:
        other = "feature" if kind == "neural" else "neural"
        fail(f"{', '.join(given)} only apply to --model {other}; drop them or pass --model {other}")


def _check_device(device: str | None) -> None:
    """--device: cpu, cuda or cuda:N, and cuda only where torch sees a GPU (torch would
    refuse it only after the backbone is loaded)."""
    import re

    if device is None or device == "cpu":
        return
    if not re.fullmatch(r"cuda(:\d+)?", device):
        fail(
            f"--device {device!r}: use cpu, cuda or cuda:N (or leave it out: cuda when there "
            "is a GPU, else cpu)"
        )
    import torch

    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    index = int(device.partition(":")[2] or 0)
    if index >= n:
        have = f"{n} GPU(s)" if n else "no GPU"
        fail(
            f"--device {device}: torch sees {have} here; use --device cpu, or run on a GPU machine",
            code=1,
        )


def _print_train(report: dict) -> None:
    """The training report as aligned `key: value` lines and a table of the top weights."""
    from rich.table import Table

    for k, v in report.items():
        if k in ("top_weights", "heldout") or isinstance(v, (dict, list)):
            continue
        stdout.print(f"{k}: {v:.4g}" if isinstance(v, float) else f"{k}: {v}", highlight=False)
    held = report.get("heldout")
    if held:
        keys = ("pairs", "pairwise_accuracy", "kendall_tau", "top1_accuracy")
        shown = ", ".join(
            f"{k} {held[k]:.3f}" if isinstance(held[k], float) else f"{k} {held[k]}"
            for k in keys
            if k in held
        )
        stdout.print(f"held-out families: {shown}", highlight=False)
    else:
        stdout.print("held-out families: not evaluated (no measured pairs, or --no-eval)")
    if report.get("top_weights"):
        t = Table("feature", "coefficient", title="top weights")
        for r in report["top_weights"]:
            t.add_row(str(r["feature"]), f"{r['coef']:+.4f}")
        stdout.print(t)


@rank_app.command("score")
def score_cmd(
    task_id: str = typer.Argument(..., help="The task id (or its last path component)."),
    candidate: Path = typer.Argument(..., help="The candidate source file (.cu or .py)."),
    model_path: Path | None = ModelOpt,
    tasks_path: Path | None = ScoreTasksOpt,
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document to stdout."),
) -> None:
    """P(candidate faster), averaged over the task's known implementations."""
    from cudaperf.rank.ranker import score

    code = read_source(candidate, "CANDIDATE")
    if "__global__" not in code:
        fail(
            f"CANDIDATE {candidate} defines no __global__ kernel, so there is nothing to "
            "rank; pass a .cu file or a PyTorch→CUDA candidate with its CUDA source"
        )
    model = _ranker(model_path)
    task = select_task(load_task_set(tasks_path), task_id)
    torch_task, torch_code = task.kind.value == "torch2cuda", "ModelNew" in code
    if torch_task != torch_code:  # the other track's candidate was scored as if it were one
        want = "a PyTorch→CUDA candidate (.py defining ModelNew)" if torch_task else "a .cu kernel"
        kind = "PyTorch→CUDA" if torch_task else "C→CUDA"
        fail(
            f"{task.id} is a {kind} task; CANDIDATE {candidate} is not one of its kind: give {want}"
        )
    if not task.implementations:
        fail(f"task {task.id} has no implementations to compare the candidate with")
    rs = score(task, code, model)
    if as_json:
        emit_json({"task_id": task.id, **rs.model_dump()})
    else:
        stdout.print(
            f"{task.id}: score {rs.score:.3f} over {rs.compared} implementations ({rs.model})"
        )


@rank_app.command("eval")
def eval_cmd(
    tasks_path: Path | None = TasksOpt,
    model_path: Path | None = ModelOpt,
    splits: Path | None = SplitsOpt,
    split: str = typer.Option(
        "heldout", "--split", help="heldout (validation+test), validation, test or train."
    ),
    min_ratio: float = min_ratio_option(1.2, "Evaluated pairs"),
    plot: Path | None = typer.Option(None, "--plot", help="Write a calibration PNG here."),
    workers: int = WorkersOpt,
    cache_dir: Path | None = CacheOpt,
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document to stdout."),
) -> None:
    """Pairwise accuracy, Kendall tau, top-1 and baselines on held-out families."""
    from cudaperf.rank.metrics import evaluate
    from cudaperf.rank.ranker import NoPairsError

    check_out_file(plot, "--plot", (".png",))
    check_out_dir(cache_dir, "--cache-dir")
    model = _ranker(model_path)
    tasks_path = tasks_path or measured_dataset()
    tasks = load_task_set(tasks_path)
    try:
        report = evaluate(
            tasks,
            model,
            _splits(tasks_path, splits),
            split,
            min_ratio,
            plot,
            workers=workers,
            cache_dir=cache_dir,
        )
    except (NoPairsError, ValueError) as e:
        fail(str(e))
    if as_json:
        emit_json(report)
        return
    _print_flat(report)


def _print_flat(report: dict, prefix: str = "") -> None:
    """`key: value` lines; nested blocks as `block.key: value` (no dict dumps)."""
    for k, v in report.items():
        if isinstance(v, dict):
            _print_flat(v, f"{prefix}{k}.")
        elif isinstance(v, list):
            stdout.print(f"{prefix}{k}: {', '.join(map(str, v)) or '-'}", highlight=False)
        else:
            shown = f"{v:.3f}" if isinstance(v, float) else str(v)
            stdout.print(f"{prefix}{k}: {shown}", highlight=False)
