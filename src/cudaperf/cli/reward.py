"""`cudaperf reward`: explain the reward of one candidate, component by component."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from cudaperf.cli.common import (
    SAMPLE_DEFAULT,
    check_cache_dir,
    check_toolchain,
    emit_json,
    fail,
    load_task_set,
    read_source,
    select_task,
    stdout,
)
from cudaperf.cli.options import PresetOpt, RewardOpt, eval_config, reward_config
from cudaperf.execute.config import EvalConfig
from cudaperf.refine.feedback import render_feedback
from cudaperf.reward import RewardConfig, extract_candidate
from cudaperf.reward.scorer import RewardScorer, build_scorer, ranker_from_spec

__all__ = ["RankerOpt", "command_scorer", "load_ranker_option", "reward_command", "scorer_for"]

_CACHE_HELP = EvalConfig.help()["cache_dir"]


def command_scorer(tasks, reward: RewardConfig, ev: EvalConfig, ranker: str = "default"):
    """The scorer of a command (`bench run`, `refine`, `reward`): `build_scorer` over one
    `EvalSession(ev)` for the whole command (its workers, salt and baselines made once; close
    it with `scorer.close()`), and the ranker --ranker names, loaded only when the
    reward weighs it (a file that cannot be read is one error line)."""
    from cudaperf.execute.session import EvalSession

    rk = load_ranker_option(ranker) if reward.ranker_weight > 0 else None
    return build_scorer(tasks, reward, EvalSession(ev), rk)


def scorer_for(
    task,
    preset: str | RewardConfig,
    compile_only: bool | None,
    cache_dir: Path | None,
    ranker: str = "default",
) -> RewardScorer:
    """`command_scorer` for one task: `preset` (a preset name or a `RewardConfig`), the
    evaluator's defaults but for --compile-only/--full and --cache-dir; exits with one line on
    bad values or a missing toolchain.

    ranker: "default" (the packaged feature ranker), "none", or a ranker file/folder."""
    check_cache_dir(cache_dir)
    cfg = preset if isinstance(preset, RewardConfig) else reward_config(preset)
    ev = eval_config(compile_only=compile_only, cache_dir=cache_dir)
    check_toolchain(ev.compile_only, ev.nvcc)
    return command_scorer([task], cfg, ev, ranker)


def load_ranker_option(spec: str):
    """The ranker --ranker names (default, none, or a file or folder), or a one-line error
    saying why a file or folder cannot be used."""
    if spec in ("default", "none"):
        return ranker_from_spec(spec)
    from cudaperf.rank.formats import ModelNotTrainedError
    from cudaperf.rank.ranker import load_ranker, make_ranker

    try:
        return make_ranker(load_ranker(Path(spec)))
    except (ModelNotTrainedError, ValueError, ImportError, OSError) as e:
        fail(f"--ranker {spec}: {e} (or pass --ranker default or none)")


RankerOpt = typer.Option(
    "default", "--ranker", help="Ranker term: default (packaged), none, or a ranker file/folder."
)


def reward_command(
    task_id: str = typer.Argument(..., help="Task id (or its last parts, e.g. c2cuda/saxpy)."),
    candidate: Path = typer.Argument(..., help="Candidate file, or a model reply with a fence."),
    tasks_path: Path = typer.Option(
        None, "--tasks", help=f"Task file or folder (default: {SAMPLE_DEFAULT})."
    ),
    preset: str = PresetOpt,
    reward: list[str] | None = RewardOpt,
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document to stdout."),
    compile_only: bool = typer.Option(None, "--compile-only/--full", help="Default: when no GPU."),
    cache_dir: Path = typer.Option(None, "--cache-dir", help=_CACHE_HELP),
    ranker: str = RankerOpt,
) -> None:
    """Evaluate, analyse and score one candidate, and explain each reward component."""
    task = select_task(load_task_set(tasks_path), task_id)
    text = read_source(candidate, "CANDIDATE")
    if not text.strip():
        fail(f"CANDIDATE {candidate} is empty; give the candidate's source file")
    code = extract_candidate(text, task.kind).code if "```" in text else text
    if code is None:
        fail(f"{candidate}: {extract_candidate(text, task.kind).error}")
    scorer = scorer_for(task, reward_config(preset, reward), compile_only, cache_dir, ranker)
    try:
        (s,) = scorer.score_code(task, [code])
    finally:
        scorer.close()  # the command's one evaluator session and the analyzer's pool
    bd = s.breakdown
    if as_json:
        emit_json(
            {
                "task_id": task.id,
                "reward": bd.model_dump(mode="json"),
                "result": s.result.model_dump(mode="json") if s.result else None,
                "structure": [r.model_dump(mode="json") for r in s.reports],
            }
        )
    else:
        t = Table(title=f"reward of {candidate.name} on {task.id} ({bd.config})")
        for col in ("component", "value", "why"):
            t.add_column(col, overflow="fold")
        notes = {n.split(":")[0]: n for n in bd.notes}
        for name, value in bd.components.items():
            why = notes.get(name) or next((n for n in bd.notes if name in n.split(":")[0]), "")
            t.add_row(name, f"{value:+.3f}", why)
        t.add_row("total", f"{bd.total:+.3f}" if bd.valid else "none", "sum of the above")
        stdout.print(t)
        stdout.print(render_feedback(s, task), markup=False, highlight=False)
        if bd.mode == "compile-only":
            stdout.print(
                "[bold yellow]compile-only[/]: no GPU here, so the candidate was compiled but not "
                "run, checked or timed; speed, structure and ranker terms stay 0"
            )
    raise typer.Exit(0 if bd.valid else 1)
