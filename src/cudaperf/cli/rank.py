"""`cudaperf rank train|score|eval`: the offline feature ranker (issue 8)."""

from __future__ import annotations

from pathlib import Path

import typer

from cudaperf.cli.common import console, emit_json, fail, load_task_set, select_tasks

__all__ = ["rank_app"]

rank_app = typer.Typer(help="Train, evaluate and apply the pairwise feature ranker.",
                       no_args_is_help=True)  # fmt: skip

TasksOpt = typer.Option(None, "--tasks", help="Task file or folder (default: the sample set).")
SplitsOpt = typer.Option(
    None, "--splits", help="splits.json (family → split); default: splits.json next to --tasks, "
    "else a stable hash of the family name."
)  # fmt: skip
ModelOpt = typer.Option(None, "--model", help="Ranker JSON (default: the packaged weights).")


def _splits(tasks_path: Path | None, splits: Path | None) -> dict[str, str] | None:
    from cudaperf.rank.pairs import read_splits

    if splits is None and tasks_path is not None:
        near = (tasks_path if tasks_path.is_dir() else tasks_path.parent) / "splits.json"
        splits = near if near.is_file() else None
    if splits is None:
        return None
    try:
        return read_splits(splits)
    except ValueError as e:
        fail(str(e))


def _model(path: Path | None):
    from cudaperf.rank.bt import ModelNotTrainedError, load_default, load_model

    try:
        return load_model(path) if path is not None else load_default()
    except (ModelNotTrainedError, ValueError) as e:
        fail(str(e))


@rank_app.command("train")
def train(
    tasks_path: Path | None = TasksOpt,
    out: Path = typer.Option(Path("ranker"), "--out", help="Folder for feature_ranker.json."),
    splits: Path | None = SplitsOpt,
    l2: float = typer.Option(1e-2, "--l2", help="L2 strength on standardised coefficients."),
    min_ratio: float = typer.Option(
        1.0, "--min-ratio", help="Training pairs: slower/faster >= this."
    ),
    no_resources: bool = typer.Option(
        False, "--no-resources", help="Skip ptxas (no registers/occupancy features; faster)."
    ),
    arch: str = typer.Option("sm_90", "--arch", help="Target architecture for ptxas/occupancy."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document to stdout."),
) -> None:
    """Fit the Bradley–Terry feature ranker on measured pairs of the training families."""
    from cudaperf.rank.ranker import NoPairsError, TrainConfig, train_feature_ranker

    tasks = load_task_set(tasks_path, False)
    try:
        cfg = TrainConfig(l2=l2, min_ratio=min_ratio, resources=not no_resources, arch=arch)
        model = train_feature_ranker(tasks, _splits(tasks_path, splits), cfg,
                                     source=str(tasks_path or "sample set"))  # fmt: skip
    except (NoPairsError, ValueError) as e:
        fail(str(e))
    path = model.save(out / "feature_ranker.json")
    report = {"model": model.id, "path": str(path), "features": len(model.names),
              **model.training}  # fmt: skip
    if as_json:
        emit_json(report)
    else:
        console.print(report)


@rank_app.command("score")
def score_cmd(
    task_id: str = typer.Argument(..., help="The task id (or its last path component)."),
    candidate: Path = typer.Argument(..., help="The candidate source file (.cu or .py)."),
    model_path: Path | None = ModelOpt,
    tasks_path: Path | None = TasksOpt,
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document to stdout."),
) -> None:
    """P(candidate faster), averaged over the task's known implementations."""
    from cudaperf.rank.ranker import score

    model = _model(model_path)
    if not candidate.is_file():
        fail(f"{candidate} does not exist or is not a file; pass the candidate's source file")
    try:
        code = candidate.read_text()
    except (OSError, UnicodeDecodeError) as e:
        fail(f"cannot read {candidate}: {e}; pass a UTF-8 text file")
    chosen = select_tasks(load_task_set(tasks_path, False), [task_id])
    if len(chosen) > 1:
        fail(f"{task_id!r} matches {len(chosen)} tasks; give the full task id")
    rs = score(chosen[0], code, model)
    if as_json:
        emit_json({"task_id": chosen[0].id, **rs.model_dump()})
    else:
        console.print(f"{chosen[0].id}: score {rs.score:.3f} over {rs.compared} "
                      f"implementations ({rs.model})")  # fmt: skip


@rank_app.command("eval")
def eval_cmd(
    tasks_path: Path | None = TasksOpt,
    model_path: Path | None = ModelOpt,
    splits: Path | None = SplitsOpt,
    split: str = typer.Option(
        "heldout", "--split", help="heldout (validation+test), validation, test or train."
    ),
    min_ratio: float = typer.Option(
        1.2, "--min-ratio", help="Evaluated pairs: slower/faster >= this."
    ),
    plot: Path | None = typer.Option(None, "--plot", help="Write a calibration PNG here."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document to stdout."),
) -> None:
    """Pairwise accuracy, Kendall tau, top-1 and baselines on held-out families."""
    from cudaperf.rank.metrics import evaluate
    from cudaperf.rank.ranker import NoPairsError

    model = _model(model_path)
    tasks = load_task_set(tasks_path, False)
    try:
        report = evaluate(tasks, model, _splits(tasks_path, splits), split, min_ratio, plot)
    except (NoPairsError, ValueError) as e:
        fail(str(e))
    if as_json:
        emit_json(report)
        return
    for k, v in report.items():
        console.print(f"{k}: {v:.3f}" if isinstance(v, float) else f"{k}: {v}", highlight=False)
