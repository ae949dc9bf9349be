"""Training data: which tasks a run may use, how they are held out, and the SFT rows.

Only training-split families (`data/splits.json`) ever reach training rows, prompts or
decisions. Inside them, `split_training` holds out

- whole families (`val_families` of them, chosen by a seeded shuffle): leave-family-out
  validation for choosing epochs and settings (the validation split holds only
  PyTorch→CUDA families, and the test families are never looked at);
- a share of every other family's tasks (`holdout_share`, by a hash of the task id): unseen
  tasks of trained families, for measuring what the model learned beyond copying.

An SFT row is refine's own first prompt (`refine.prompts.first_messages`) and, as the
completion, a reply in the form refine's extractor reads (`tasks.reply`): one sentence
naming the implementation's strategies, then the whole candidate in one fenced block.
With `targets="pairs"` each task also gives a second-turn row: refine's turn-2 prompt
(`next_messages`) after the slowest implementation as the reply and the feedback the
evaluator would give it, rebuilt from its stored measurements on the visible configs only
(`stored_feedback`), with the fastest implementation as the completion.
Guaranteed: `sft_rows` only takes tasks of `fit` (the caller's training tasks), every
target extracts back to exactly the implementation's code (checked per row), and no
held-out configuration (name, sizes or time) reaches a prompt.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from cudaperf.refine.backends import weakest_first
from cudaperf.refine.prompts import SYSTEM, first_messages, next_messages
from cudaperf.tasks.io import load_tasks
from cudaperf.tasks.model import Implementation, Task, TaskKind
from cudaperf.tasks.reply import extract_candidate, fenced
from cudaperf.tasks.splits import read_splits

__all__ = [
    "Holdout",
    "load_training_tasks",
    "split_training",
    "fastest_reply",
    "sft_rows",
    "target_reply",
    "write_manifest",
]

Targets = Literal["fastest", "all", "pairs"]
TARGETS = ("fastest", "all", "pairs")


def load_training_tasks(
    tasks_path: str | Path, splits_path: str | Path | None = None, kinds: Sequence[str] = ()
) -> list[Task]:
    """The tasks of training-split families in `tasks_path` (splits: `splits_path`, default
    splits.json beside the task file), optionally only of `kinds` (c2cuda, torch2cuda).
    Raises ValueError, saying what to pass, when there are none."""
    tasks_path = Path(tasks_path)
    if not tasks_path.exists():
        raise ValueError(f"{tasks_path}: no such task file; pass an existing one with --tasks")
    sp = Path(splits_path) if splits_path else tasks_path.parent / "splits.json"
    if not sp.is_file():
        raise ValueError(f"{sp}: no splits file; pass --splits data/splits.json")
    families = read_splits(sp)
    tasks = load_tasks(tasks_path)
    want = set(kinds)
    bad = want - {k.value for k in TaskKind}
    if bad:
        raise ValueError(f"unknown task kind(s) {sorted(bad)}; use c2cuda and/or torch2cuda")
    out = [
        t
        for t in tasks
        if families.get(t.family) == "train"
        and (not want or t.kind.value in want)
        and t.implementations
    ]
    if not out:
        raise ValueError(
            f"{tasks_path}: none of its {len(tasks)} tasks is in a training-split family of "
            f"{sp} (with implementations{', of kinds ' + ','.join(sorted(want)) if want else ''})"
            "; training never uses validation or test families: pass a task file with "
            "training-split tasks (data/tasks.jsonl.gz)"
        )
    return out


@dataclass(frozen=True)
class Holdout:
    """How training tasks divide into fit / leave-family-out validation / unseen tasks."""

    fit: list[Task]  # tasks SFT and GRPO train on
    val_families: list[Task]  # tasks of the families held out whole (epoch choice)
    unseen: list[Task]  # held-out tasks of the fit families (never trained on)

    def manifest(self) -> dict:
        """JSON-able ids of each part (written beside a run so benchmarks use the same)."""
        return {
            "fit_families": sorted({t.family for t in self.fit}),
            "val_families": sorted({t.family for t in self.val_families}),
            "fit_tasks": len(self.fit),
            "val_family_tasks": [t.id for t in self.val_families],
            "unseen_tasks": [t.id for t in self.unseen],
        }


def _unit(text: str) -> float:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") / 2**64


def split_training(
    tasks: Sequence[Task], val_families: int = 3, holdout_share: float = 0.05, seed: int = 0
) -> Holdout:
    """Divide training tasks (see the module doc); deterministic in `seed` and the ids."""
    if val_families < 0 or not 0 <= holdout_share < 1:
        raise ValueError(
            f"val_families={val_families}, holdout_share={holdout_share}: use >= 0 and [0, 1)"
        )
    fams = sorted({t.family for t in tasks})
    if val_families >= len(fams):
        raise ValueError(
            f"--val-families {val_families} would hold out all {len(fams)} training families; "
            f"give at most {len(fams) - 1} (--val-families 0: no held-out family)"
        )
    rng = random.Random(seed)
    held = set(rng.sample(fams, val_families))
    val = [t for t in tasks if t.family in held]
    rest = [t for t in tasks if t.family not in held]
    unseen = [t for t in rest if _unit(f"{seed}:{t.id}") < holdout_share]
    gone = {t.id for t in unseen}
    return Holdout([t for t in rest if t.id not in gone], val, unseen)


def target_reply(task: Task, impl: Implementation) -> str:
    """A model reply carrying `impl`: a one-sentence plan and the file in one fenced block."""
    tags = [s.replace("_", " ") for s in impl.strategies if s != "naive"]
    plan = "Plan: " + ", ".join(tags) + "." if tags else "Plan: one thread per output element."
    return f"{plan}\n{fenced(task.kind, impl.code)}"


def _chosen(task: Task, targets: Targets) -> list[Implementation]:
    order = weakest_first(task, held_out=False)  # slowest first, visible configs only
    return order if targets == "all" else order[-1:]


def fastest_reply(task: Task) -> str | None:
    """The SFT target of `task` under `targets="fastest"` (None: no implementation)."""
    best = _chosen(task, "fastest")
    return target_reply(task, best[0]) if best else None


def stored_feedback(task: Task, impl: Implementation, gpu: str | None = None) -> str | None:
    """The feedback refine would show for `impl` (correct, timed), rebuilt from its stored
    measurements on the task's visible configs and the naive implementation's; held-out
    configs count as correct (every dataset implementation was verified on every config) but
    carry no time, so no held-out size or time reaches the text. There are no structural
    findings (the analyzer is not run). None when `impl` has no measurement on a visible
    config."""
    from cudaperf.execute.api import naive_implementation
    from cudaperf.execute.feedback import timing_feedback
    from cudaperf.execute.types import Candidate, ConfigResult, ExecResult, Status, Timing, geomean
    from cudaperf.refine.feedback import render_feedback
    from cudaperf.reward.formula import compute_reward
    from cudaperf.reward.scorer import Scored
    from cudaperf.tasks.reply import Extraction

    visible = [c.name for c in task.visible_configs]
    gpus = {m.gpu for m in impl.measurements}
    name = gpu or (sorted(gpus)[0] if gpus else None)
    mine = {m.config: m for m in impl.measurements if m.gpu == name and m.config in visible}
    if not mine:
        return None
    naive = naive_implementation(task)
    base = {
        m.config: m
        for i in task.implementations
        if naive and i.code == naive.code
        for m in i.measurements
        if m.gpu == name
    }
    configs = [
        ConfigResult(
            config=c,
            held_out=False,
            correct=True,
            timing=Timing.of([m.median_us]),
            naive_timing=Timing.of([base[c].median_us]) if c in base else None,
        )
        for c, m in mine.items()
    ] + [
        ConfigResult(config=c.name, held_out=True, correct=True) for c in task.configs if c.held_out
    ]
    timed = [c for c in configs if c.timing is not None]
    speed = (
        geomean([c.naive_timing.median_us / c.timing.median_us for c in timed])
        if all(c.naive_timing for c in timed)
        else None
    )
    res = ExecResult(
        status=Status.OK,
        mode="full",
        task_id=task.id,
        configs=configs,
        candidate_hash=Candidate(code=impl.code).hash,
        speedup_vs_naive=speed,
        feedback=timing_feedback(configs),
        gpu=name or "",
    )
    scored = Scored(task.id, Extraction(code=impl.code), res, (), None, compute_reward(res))
    return render_feedback(scored, task)


def _pair_row(task: Task, system: str) -> dict | None:
    order = weakest_first(task, held_out=False)  # visible configs only
    if len(order) < 2:
        return None
    weak, strong = order[0], order[-1]
    fb = stored_feedback(task, weak)
    if fb is None:
        return None
    prompt = next_messages(first_messages(task, system), target_reply(task, weak), fb)
    return {
        "prompt": prompt,
        "completion": [{"role": "assistant", "content": target_reply(task, strong)}],
        "task_id": task.id,
        "family": task.family,
    }


def sft_rows(fit: Iterable[Task], targets: Targets = "fastest", system: str = SYSTEM) -> list[dict]:
    """Prompt-completion rows (TRL's conversational format) for every task of `fit`:
    `prompt` = refine's first messages, `completion` = one assistant message; plus `task_id`
    and `family`. `targets`: the fastest implementation only, every implementation, or
    `pairs` (the fastest, and a second-turn row from the slowest with its feedback)."""
    if targets not in TARGETS:
        raise ValueError(f"--targets {targets!r}; use one of {', '.join(TARGETS)}")
    rows = []
    for task in fit:
        for impl in _chosen(task, targets):
            reply = target_reply(task, impl)
            got = extract_candidate(reply, task.kind).code
            if got is None or got.rstrip() != impl.code.rstrip():
                raise ValueError(f"{task.id}/{impl.id}: its target does not extract back")
            rows.append(
                {
                    "prompt": first_messages(task, system),
                    "completion": [{"role": "assistant", "content": reply}],
                    "task_id": task.id,
                    "family": task.family,
                }
            )
        pair = _pair_row(task, system) if targets == "pairs" else None
        if pair is not None:
            rows.append(pair)
    return rows


def write_manifest(holdout: Holdout, path: str | Path) -> None:
    """Write `Holdout.manifest()` as JSON."""
    Path(path).write_text(json.dumps(holdout.manifest(), indent=1) + "\n", encoding="utf-8")
