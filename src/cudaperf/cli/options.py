"""Options that several commands share, each declared once.

- `field_option` / `options_of`: a `typer.Option` whose default and help come from a field of
  an option class (`GrpoOptions`, `EvalConfig`, ...), so the command line does not retype them.
- The reward: `PresetOpt` and `RewardOpt` (`--preset NAME`, `--reward FIELD=VALUE`, repeatable)
  and `reward_config`, which turns them into the `RewardConfig` the command uses.
- The evaluator: `eval_config` (the given settings over `EvalConfig`'s defaults) and the
  per-config timing budget, `--timing-budget` seconds, in `eval`, `bench run` and
  `data measure` (`TimingBudgetOpt`); a training run's wall clock is `--wall-budget`.
- `gpu_list`: the one parser of GPU index lists (`--gpus`, `--eval-gpus`).
- `renamed`: an old option spelling kept as a hidden alias that says the new name.

Every helper turns a bad value into one `fail` line naming the option and the fix.
"""

from __future__ import annotations

import math
from dataclasses import MISSING, fields
from types import SimpleNamespace
from typing import Any

import typer

from cudaperf.cli.common import console, fail
from cudaperf.execute.config import EvalConfig
from cudaperf.reward.config import PRESETS, RewardConfig

__all__ = [
    "PresetOpt",
    "RewardOpt",
    "TimingBudgetOpt",
    "eval_config",
    "field_help",
    "field_option",
    "gpu_list",
    "options_of",
    "renamed",
    "reward_config",
]


def field_help(cls, name: str) -> str:
    """The help text of `cls`'s field `name` (its `metadata["help"]`), first letter capital
    unless it starts with a name that is written small (smollm2, splits.json)."""
    text = next(f for f in fields(cls) if f.name == name).metadata.get("help", "")
    first = text.split(" ", 1)[0].rstrip(",:;")
    return text[:1].upper() + text[1:] if first.isalpha() else text


def field_option(cls, name: str, *decls: str, **kw: Any):
    """`typer.Option` for the field `name` of the dataclass `cls`: its default and its help
    (`metadata["help"]`); the flag is `--name-with-dashes` unless `decls` gives it, and a
    field that defaults to True is turned off by `--no-name-with-dashes`. `kw` goes to
    `typer.Option` (e.g. `min=1`; `default=` where the command's form of the value differs,
    as for a list given as text)."""
    f = next(f for f in fields(cls) if f.name == name)
    default = kw.pop("default", f.default if f.default is not MISSING else ...)
    flag = "--" + name.replace("_", "-")
    flags = decls or ((f"{flag}/--no-{flag[2:]}",) if default is True else (flag,))
    return typer.Option(default, *flags, help=kw.pop("help", field_help(cls, name)), **kw)


def options_of(cls, **flags: str) -> SimpleNamespace:
    """`field_option` for every field of the dataclass `cls`, by field name (`flags`: the
    flag of a field whose name is not its flag, e.g. `wall_budget_s="--wall-budget"`). A
    command takes the options it has: `turns: int = GRPO.turns`."""
    return SimpleNamespace(
        **{
            f.name: field_option(cls, f.name, *filter(None, [flags.get(f.name)]))
            for f in fields(cls)
        }
    )


PresetOpt = typer.Option(
    "unified",
    "--preset",
    help=f"Reward preset: one of {', '.join(sorted(PRESETS))} (outcome_only: correctness and "
    "speed only, no structure or ranker bonus). --reward changes single fields.",
)
RewardOpt = typer.Option(
    None,
    "--reward",
    metavar="FIELD=VALUE",
    help="Change one field of the --preset's reward, e.g. structure_weight=0.5; repeat for "
    "several. Fields: "
    + "; ".join(f"{k}: {v}" for k, v in RewardConfig.help().items() if k != "name")
    + ".",
)


def reward_config(preset: str, overrides: list[str] | None = None) -> RewardConfig:
    """The `RewardConfig` of --preset and --reward, or one line naming the bad value."""
    try:
        return RewardConfig.preset(preset, overrides or ())
    except ValueError as e:
        fail(str(e))


# The command-line flag of each `EvalConfig` field that `eval` and `bench run` take, so that
# a bad value is named as the user typed it (not `time_budget_s=-1.0`).
EVAL_FLAGS = {
    "trials": "--trials",
    "time_budget_s": "--timing-budget",
    "cpu_time_budget_s": "--cpu-time-budget",
    "run_timeout_s": "--run-timeout",
    "arch": "--arch",
    "compile_jobs": "--jobs",
    "workers_per_gpu": "--workers-per-gpu",
    "cache_dir": "--cache-dir",
    "gpus": "--gpus",
}


def eval_config(**given: Any) -> EvalConfig:
    """`EvalConfig` with the given settings (None: the default), or one line naming a bad one
    by its flag (inf, which the evaluator's `> 0` checks let through, too)."""
    for k, v in given.items():
        if isinstance(v, float) and not math.isfinite(v):
            fail(f"{EVAL_FLAGS.get(k, k)} {v}: use a finite number")
    try:
        return EvalConfig(**{k: v for k, v in given.items() if v is not None})
    except ValueError as e:
        msg = str(e)
        for field, flag in EVAL_FLAGS.items():  # the evaluator's "field=value ..." messages
            if field in given and msg.startswith(f"{field}="):
                msg = f"{flag} {msg.removeprefix(f'{field}=')}"
                break
        fail(msg)


TimingBudgetOpt = typer.Option(
    None, "--timing-budget", help=field_help(EvalConfig, "time_budget_s") + " (seconds)."
)
OLD_TIMING_BUDGET = typer.Option(None, "--time-budget", hidden=True)  # eval, bench run


def renamed(old: str, old_value: Any, new: str, new_value: Any, convert=None) -> Any:
    """The value of option `new`, or of its old spelling `old` (a hidden alias, `convert`ed to
    the new unit), with one line on stderr saying the new name. Both given is an error."""
    if old_value is None:
        return new_value
    if new_value is not None:
        fail(f"{old} is the old name of {new}; give {new} only")
    value = convert(old_value) if convert else old_value
    console.print(f"{old} is deprecated: use {new} {value:g}", highlight=False)
    return value


def gpu_list(spec: str | None, option: str, present: bool = False) -> tuple[int, ...] | None:
    """The GPU indices of a list such as "0,1" (nvidia-smi numbering; None: no list given).
    Each entry a non-negative integer, none twice, none empty; with `present`, each a GPU that
    nvidia-smi lists here."""
    if spec is None:
        return None
    fix = "give GPU indices such as 0,1 (as nvidia-smi numbers them)"
    parts = [p.strip() for p in spec.split(",")]
    if not all(p.isdigit() for p in parts):  # also "", "-1", "1.5", "one"
        fail(f"{option} {spec!r}: {fix}")
    ids = tuple(int(p) for p in parts)
    if dup := sorted({g for g in ids if ids.count(g) > 1}):
        fail(
            f"{option} {spec!r}: GPU {dup[0]} is named twice; give distinct GPU indices such as 0,1"
        )
    if present:
        from cudaperf.execute.build import detect_gpus

        have = [g.index for g in detect_gpus()]
        if missing := [g for g in ids if g not in have]:
            there = ", ".join(map(str, have)) if have else "none"
            fail(
                f"{option} {spec}: no GPU {', '.join(map(str, missing))} here (GPUs: {there}); "
                f"give indices nvidia-smi lists, or leave {option} out"
            )
    return ids
