"""`option`: a dataclass field that carries the help text its command-line option shows.

The option classes (`execute.EvalConfig`, `train.grpo.GrpoOptions`, `train.sft.SftOptions`)
declare each setting once, default and help together; `cli.options.field_option` builds the
`typer.Option` from the field, so the command line never retypes a default.
"""

from __future__ import annotations

import math
from dataclasses import field, fields
from typing import Any

__all__ = ["check_numbers", "option", "wall_budget_problem"]

SEED_MAX = 2**32 - 1  # numpy's and torch's seeds are 32-bit unsigned


def option(default: Any, help: str, **kw: Any):  # noqa: A002 - `help` reads best at the fields
    """A field with `default` (a list, dict or set is copied per instance) and
    `metadata["help"]`; `kw` goes to `dataclasses.field`."""
    if isinstance(default, (list, dict, set)):
        return field(default_factory=lambda: type(default)(default), metadata={"help": help}, **kw)
    return field(default=default, metadata={"help": help}, **kw)


def check_numbers(obj: Any, seeds: tuple[str, ...] = ()) -> None:
    """ValueError naming the option when a float field of the dataclass `obj` is not finite
    (inf and nan pass `> 0` checks and trained on, 2026-12-05), or a `seeds` field is outside
    0 .. 2**32 - 1 (torch's message named no option, after the model had loaded)."""
    for f in fields(obj):
        v = getattr(obj, f.name)
        if isinstance(v, float) and not math.isfinite(v):
            flag = f.name.removesuffix("_s").replace("_", "-")  # wall_budget_s: --wall-budget
            raise ValueError(f"--{flag} {v}: use a finite number")
    for name in seeds:
        v = getattr(obj, name)
        if v is not None and not 0 <= v <= SEED_MAX:
            raise ValueError(f"--{name.replace('_', '-')} {v}: use a seed in 0 .. {SEED_MAX}")


def wall_budget_problem(seconds: float | None) -> str | None:
    """The one line that refuses a `--wall-budget` (train sft, train grpo, bench run): seconds
    > 0 and finite, or absent (None: no problem)."""
    if seconds is None or 0 < seconds < math.inf:
        return None
    return f"--wall-budget {seconds}: give seconds > 0 (or leave it out)"
