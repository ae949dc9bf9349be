"""`RewardConfig`: the levels, weights and transforms of the unified reward, validated.

Each field's `metadata["help"]` is the text the CLI shows. `__post_init__` checks that the
failure levels keep their order (rejected < format error <= compile error < compiled-only,
runtime error / timeout; compile error < wrong output <= runtime error, so a no-op or
constant kernel never beats an honest crash; every failure < the slowest correct candidate)
and raises a `ValueError` that names the field, the value and how to fix it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Literal

from cudaperf.execute.types import SPEEDUPS

__all__ = ["BASELINES", "PRESETS", "RewardConfig"]

# Which speedup the speed term uses; "auto" takes the first that was measured, in this order.
BASELINES: dict[str, tuple[str, ...]] = {
    "auto": tuple(SPEEDUPS[b][0] for b in ("eager", "naive", "cpu")),
    **{name: (field_,) for name, (field_, _) in SPEEDUPS.items()},
}


def _f(default, help: str):  # noqa: A002 - `help` reads best at call sites
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class RewardConfig:
    """Levels per outcome, the speed transform and the bonus weights (see `cudaperf.reward`)."""

    name: str = _f("unified", "label stored in every RewardBreakdown (e.g. the preset name)")
    rejected: float = _f(-1.0, "an anti-hacking check fired: the lowest reward of all")
    format_error: float = _f(-0.75, "no complete code block in the reply")
    compile_error: float = _f(-0.5, "nvcc rejected the candidate (or the entry is missing)")
    compiled: float = _f(
        -0.25, "compile-only mode: it compiled, nothing ran; never earns speed or bonuses"
    )
    runtime_error: float = _f(-0.25, "a CUDA error, a crash, or a timeout")
    wrong_output: float = _f(
        -0.25,
        "it ran but some config's output is outside the tolerance; at most "
        "runtime_error, so a no-op or constant kernel never beats an honest crash",
    )

    correct: float = _f(1.0, "correct on every config (held-out ones too) and timed")
    speed_weight: float = _f(1.0, "the speed term's maximum, reached at speed_cap")
    speed_cap: float = _f(16.0, "speedup over the baseline at which the speed term saturates")
    speed_floor: float = _f(
        -0.5, "lowest speed term, as a fraction of speed_weight (slower than the baseline)"
    )
    baseline: Literal["auto", "eager", "compile", "naive", "cpu"] = _f(
        "auto", "speedup the speed term uses; auto: eager, else naive, else CPU"
    )
    structure_weight: float = _f(0.25, "bonus for the structural score (correct candidates only)")
    ranker_weight: float = _f(0.25, "bonus for the ranker's score (correct candidates only)")

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, float | int) and not isinstance(v, bool) and not math.isfinite(v):
                raise ValueError(f"{f.name}={v} must be a finite number")
        if self.baseline not in BASELINES:
            raise ValueError(f"baseline={self.baseline!r}; use one of {sorted(BASELINES)}")
        for name in ("speed_weight", "structure_weight", "ranker_weight"):
            if getattr(self, name) < 0:
                v = getattr(self, name)
                raise ValueError(f"{name}={v} is negative; use 0 to switch the term off")
        if not self.speed_cap > 1:
            raise ValueError(f"speed_cap={self.speed_cap} must be > 1 (e.g. 16: 16x saturates)")
        if not -1 <= self.speed_floor <= 0:
            raise ValueError(f"speed_floor={self.speed_floor}; use a value in [-1, 0], e.g. -0.5")
        self._check_order()

    def _check_order(self) -> None:
        slowest_correct = self.correct + self.speed_weight * self.speed_floor
        chain = [
            ("rejected", self.rejected, "<", "format_error", self.format_error),
            ("format_error", self.format_error, "<=", "compile_error", self.compile_error),
            ("compile_error", self.compile_error, "<", "runtime_error", self.runtime_error),
            ("compile_error", self.compile_error, "<", "compiled", self.compiled),
            ("compile_error", self.compile_error, "<", "wrong_output", self.wrong_output),
            ("wrong_output", self.wrong_output, "<=", "runtime_error", self.runtime_error),
            ("wrong_output", self.wrong_output, "<", "the slowest correct", slowest_correct),
        ]
        for a, va, op, b, vb in chain:
            if not (va < vb if op == "<" else va <= vb):
                raise ValueError(
                    f"{a}={va} must be {op} {b}={vb}: failures are ordered rejected < format "
                    "error <= compile error < wrong output <= runtime error < correct (the "
                    "slowest correct is correct + speed_weight * speed_floor); raise or lower "
                    "one of them"
                )

    def bounds(self) -> tuple[float, float]:
        """(lowest, highest) total this configuration can give."""
        return self.rejected, self.correct + self.speed_weight + self.structure_weight + (
            self.ranker_weight
        )

    def with_(self, **changes) -> RewardConfig:
        """A validated copy with some fields changed."""
        return replace(self, **changes)

    @classmethod
    def preset(cls, name: str, overrides: Sequence[str] = ()) -> RewardConfig:
        """A named preset: `unified` (all components) or `outcome_only` (ablation), with
        `overrides`, each `field=value` (the CLI's `--reward structure_weight=0.5`). An
        overridden config is named after the preset and its overrides (its breakdowns say it
        is not the preset). Raises `ValueError` naming a bad preset, field or value."""
        if name not in PRESETS:
            raise ValueError(f"unknown reward preset {name!r}; use one of {sorted(PRESETS)}")
        changes: dict[str, object] = {}
        for item in overrides:
            key, sep, text = (part.strip() for part in item.partition("="))
            if not sep or not key:
                raise ValueError(f"--reward {item!r}: write FIELD=VALUE, e.g. structure_weight=0.5")
            changes[key] = _parse_field(key, text, item)
        if changes and "name" not in changes:
            changes["name"] = name + "+" + ",".join(f"{k}={v}" for k, v in changes.items())
        try:
            return replace(PRESETS[name], **changes)
        except ValueError as e:
            raise ValueError(f"--reward {', '.join(overrides)}: {e}") from None

    @classmethod
    def help(cls) -> dict[str, str]:
        """Field name → help text (for the CLI)."""
        return {f.name: f.metadata.get("help", "") for f in fields(cls)}


def _parse_field(key: str, text: str, item: str) -> object:
    """The value of `--reward key=text` in the field's type (float, or the string fields)."""
    known = {f.name: f for f in fields(RewardConfig)}
    if key not in known:
        raise ValueError(
            f"--reward {item!r}: no reward field {key!r}; use one of "
            f"{sorted(known)} (`cudaperf train grpo --help` lists them)"
        )
    if key in ("name", "baseline"):
        if not text:
            raise ValueError(f"--reward {item!r}: give a value after '='")
        return text
    try:
        return float(text)
    except ValueError:
        raise ValueError(
            f"--reward {item!r}: {key} takes a number, e.g. {key}={known[key].default:g}"
        ) from None


PRESETS: dict[str, RewardConfig] = {
    "unified": RewardConfig(),
    # Correctness and speed only: the ablation that shows what structure and the ranker add.
    "outcome_only": RewardConfig(name="outcome_only", structure_weight=0.0, ranker_weight=0.0),
}
