"""Kernel sources the analyzer and ranker tests read: every sample implementation and a
stride of the packaged dataset's tasks (C and PyTorch families)."""

from __future__ import annotations

import gzip
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data" / "tasks.jsonl.gz"


def implementations(every: int = 700) -> list[tuple[str, str]]:
    """(name, code) of every sample implementation and of the dataset's tasks at every
    `every`-th line (C and PyTorch families)."""
    from cudaperf.tasks.io import load_sample
    from cudaperf.tasks.model import Task

    out = [(f"{t.id}:{i.id}", i.code) for t in load_sample() for i in t.implementations]
    if DATA.exists():
        with gzip.open(DATA, "rt", encoding="utf-8") as f:
            tasks = [Task.model_validate_json(ln) for n, ln in enumerate(f) if n % every == 0]
        out += [(f"{t.id}:{i.id}", i.code) for t in tasks for i in t.implementations]
    return out
