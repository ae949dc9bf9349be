"""Training data: which tasks a run may use, how they are held out, and the SFT rows.

Only training-split families (`data/splits.json`) ever reach training rows, prompts or
decisions. Inside them, `split_training` holds out

- whole families (`val_families` of them, chosen by a seeded shuffle): leave-family-out
  validation for choosing epochs and settings (the validation split holds only
  PyTorch→CUDA families, and the test families are never looked at);
- a share of every other family's tasks (`holdout_share`, by a hash of the task id): unseen
  tasks of trained families, for measuring what the model learned beyond copying.

An SFT row is refine's own first prompt (`refine.prompts.first_messages`) and, as the
completion, a reply in the form refine's extractor reads (`reward.extract`): one sentence
naming the implementation's strategies, then the whole candidate in one fenced block.
Guaranteed: `sft_rows` only takes tasks of `fit` (the caller's training tasks), and every
target extracts back to exactly the implementation's code (checked per row).
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
from cudaperf.refine.prompts import SYSTEM, first_messages
from cudaperf.reward.extract import extract_candidate
from cudaperf.tasks.io import load_tasks
from cudaperf.tasks.model import Implementation, Task, TaskKind
from cudaperf.tasks.splits import read_splits

__all__ = [
    "Holdout",
    "load_training_tasks",
    "split_training",
    "sft_rows",
    "target_reply",
    "write_manifest",
]

Targets = Literal["fastest", "all"]


def load_training_tasks(
    tasks_path: str | Path, splits_path: str | Path | None = None, kinds: Sequence[str] = ()
) -> list[Task]:
    """The tasks of training-split families in `tasks_path` (splits: `splits_path`, default
    splits.json beside the task file), optionally only of `kinds` (c2cuda, torch2cuda).
    Raises ValueError, saying what to pass, when there are none."""
    tasks_path = Path(tasks_path)
    if not tasks_path.exists():
        raise ValueError(f"{tasks_path}: no such task file; pass --tasks data/tasks.jsonl.gz")
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
        t for t in tasks
        if families.get(t.family) == "train" and (not want or t.kind.value in want)
        and t.implementations
    ]  # fmt: skip
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
            f"val_families={val_families} would hold out all {len(fams)} training families; "
            "use fewer"
        )
    rng = random.Random(seed)
    held = set(rng.sample(fams, val_families))
    val = [t for t in tasks if t.family in held]
    rest = [t for t in tasks if t.family not in held]
    unseen = [t for t in rest if _unit(f"{seed}:{t.id}") < holdout_share]
    gone = {t.id for t in unseen}
    return Holdout([t for t in rest if t.id not in gone], val, unseen)


def _tag(task: Task) -> str:
    return "cuda" if task.kind is TaskKind.C2CUDA else "python"


def target_reply(task: Task, impl: Implementation) -> str:
    """A model reply carrying `impl`: a one-sentence plan and the file in one fenced block."""
    tags = [s.replace("_", " ") for s in impl.strategies if s != "naive"]
    plan = "Plan: " + ", ".join(tags) + "." if tags else "Plan: one thread per output element."
    return f"{plan}\n```{_tag(task)}\n{impl.code.rstrip()}\n```"


def _chosen(task: Task, targets: Targets) -> list[Implementation]:
    order = weakest_first(task)  # slowest first, by the stored measurements
    return order[-1:] if targets == "fastest" else order


def sft_rows(fit: Iterable[Task], targets: Targets = "fastest", system: str = SYSTEM) -> list[dict]:
    """Prompt-completion rows (TRL's conversational format) for every task of `fit`:
    `prompt` = refine's first messages, `completion` = one assistant message; plus `task_id`
    and `family`. `targets`: the fastest implementation only, or every implementation."""
    if targets not in ("fastest", "all"):
        raise ValueError(f"targets={targets!r}; use fastest or all")
    rows = []
    for task in fit:
        for impl in _chosen(task, targets):
            reply = target_reply(task, impl)
            got = extract_candidate(reply, task.kind).code
            if got is None or got.rstrip() != impl.code.rstrip():
                raise ValueError(f"{task.id}/{impl.id}: its target does not extract back")
            rows.append({
                "prompt": first_messages(task, system),
                "completion": [{"role": "assistant", "content": reply}],
                "task_id": task.id, "family": task.family,
            })  # fmt: skip
    return rows


def write_manifest(holdout: Holdout, path: str | Path) -> None:
    """Write `Holdout.manifest()` as JSON."""
    Path(path).write_text(json.dumps(holdout.manifest(), indent=1) + "\n", encoding="utf-8")
