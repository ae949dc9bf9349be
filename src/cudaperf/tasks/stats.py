"""Summary statistics of a task set (`cudaperf tasks stats`)."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from cudaperf.tasks.model import Task, TaskKind

__all__ = ["normalize_code", "task_stats"]

_BLOCK_COMMENT = re.compile(r"/\*.*?\*/", re.S)
_LINE_COMMENT = re.compile(r"//[^\n]*")
_PY_COMMENT = re.compile(r"(?m)^\s*#(?!include|define|pragma|if|endif|else|elif|undef)[^\n]*")


def normalize_code(code: str) -> str:
    """Code with C and Python comments removed and all whitespace collapsed to nothing.

    Two implementations whose normalised code is equal are duplicates. (Whitespace is
    removed rather than collapsed so that formatting alone never makes two codes differ.)
    """
    code = _BLOCK_COMMENT.sub("", code)
    code = _LINE_COMMENT.sub("", code)
    code = _PY_COMMENT.sub("", code)
    return "".join(code.split())


def _duplicates(tasks: list[Task]) -> int:
    """Implementations whose normalised code equals an earlier one's (anywhere in the set)."""
    seen: set[str] = set()
    dup = 0
    for t in tasks:
        for impl in t.implementations:
            key = normalize_code(impl.code)
            if key in seen:
                dup += 1
            seen.add(key)
    return dup


def _measured_fraction(tasks: list[Task]) -> float:
    """Share of implementations with a measurement on every config, on some one GPU."""
    total = measured = 0
    for t in tasks:
        names = [c.name for c in t.configs]
        for impl in t.implementations:
            total += 1
            gpus = {m.gpu for m in impl.measurements}
            if any(impl.measured_on(g, names) for g in gpus):
                measured += 1
    return measured / total if total else 0.0


def task_stats(tasks: list[Task]) -> dict[str, Any]:
    """The keys reported by `cudaperf tasks stats --json` (see the README for definitions)."""
    n = len(tasks)
    families = Counter(t.family for t in tasks)
    by_kind = Counter(t.kind.value for t in tasks)
    strategies = Counter(s for t in tasks for i in t.implementations for s in i.strategies)

    def min_of(values: list[int]) -> int:
        return min(values) if values else 0

    return {
        "tasks": n,
        "by_kind": {k.value: by_kind.get(k.value, 0) for k in TaskKind},
        "families": len(families),
        "max_family_share": round(max(families.values()) / n, 4) if n else 0.0,
        "min_configs": min_of([len(t.configs) for t in tasks]),
        "min_held_out_configs": min_of([sum(c.held_out for c in t.configs) for t in tasks]),
        "min_implementations": min_of([len(t.implementations) for t in tasks]),
        "min_distinct_strategies": min_of(
            [len({s for i in t.implementations for s in i.strategies}) for t in tasks]
        ),
        "implementations": sum(len(t.implementations) for t in tasks),
        "measured_fraction": round(_measured_fraction(tasks), 4),
        "duplicate_implementations": _duplicates(tasks),
        "strategies": dict(sorted(strategies.items())),
        "family_counts": dict(sorted(families.items())),
    }
