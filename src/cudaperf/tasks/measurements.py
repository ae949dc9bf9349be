"""Turning evaluation results into stored `Measurement`s of a task set's implementations.

`cudaperf eval --implementations --out results.jsonl` writes one ExecResult per line; each
`ok` result of an implementation (its `candidate_id` is the implementation id) becomes one
`Measurement` per config: GPU name, median and interquartile range, trials, toolchain
versions and date. Results that are not `ok` add nothing (an unverified time is never
stored). This module reads the results as plain JSON, so the task package does not depend on
the evaluator.

Each result and measurement names the protocol that produced it (`PROTOCOLS`): the bulk mode
(`cudaperf data measure`) checks less than the per-candidate evaluator, so a consumer that must
not mix them (the ranker's training pairs, a dataset build) keeps one with `keep_protocols`. A
result without a `protocol` field (written before it existed) reads as `LEGACY_PROTOCOL`
("bulk-v1": every stored measurement so far came from `data measure`; an evaluator result file
of that time is read as bulk-v1 too, so give such a file's rows a protocol before attaching).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from cudaperf.tasks.model import LEGACY_PROTOCOL, Measurement, Task

__all__ = [
    "BULK_PROTOCOL",
    "EVALUATOR_PROTOCOL",
    "PROTOCOLS",
    "attach_measurements",
    "keep_protocols",
    "keep_verified",
    "measurements_from_results",
    "protocol_of",
    "read_results",
]

BULK_PROTOCOL = "bulk-v1"  # `cudaperf data measure` (execute.bulk)
EVALUATOR_PROTOCOL = "evaluator-v1"  # `cudaperf eval` and every other use of execute.Evaluator

# Measurement protocols: id -> what ran (the defaults of each mode; the trial count a timing
# actually got is its `trials`). Rows and measurements carry the id.
PROTOCOLS: dict[str, str] = {
    BULK_PROTOCOL: (
        "cudaperf data measure (execute.bulk): C->CUDA: input set 0 checked on the device, timed "
        "(20 trials within 50 ms per config, 3 warm-up calls, L2 flushed), wall-clock and roofline "
        "cross-checks, re-checked after timing; PyTorch->CUDA: 2 correctness trials, first failing "
        "config ends the implementation, no profiler kernel-share check, no torch.compile baseline"
    ),
    EVALUATOR_PROTOCOL: (
        "cudaperf eval (execute.Evaluator): fresh secret inputs per check, 100 trials within 2 s "
        "per config, 10 warm-up calls; PyTorch->CUDA: 5 correctness trials, every config, profiler "
        "kernel-share check, eager and torch.compile baselines"
    ),
}


def protocol_of(row: dict) -> str:
    """The protocol id of a result row (`LEGACY_PROTOCOL` for a row written before the field)."""
    return row.get("protocol") or LEGACY_PROTOCOL


def keep_protocols(tasks: list[Task], protocols: Iterable[str]) -> list[Task]:
    """The tasks with only the measurements made under one of `protocols` (ids of PROTOCOLS;
    an unknown id is a ValueError). Implementations and tasks are kept, possibly unmeasured."""
    want = set(protocols)
    unknown = want - set(PROTOCOLS)
    if unknown:
        raise ValueError(
            f"unknown measurement protocol(s) {sorted(unknown)}; use {sorted(PROTOCOLS)}"
        )
    out = []
    for t in tasks:
        impls = [
            i.model_copy(update={"measurements": [m for m in i.measurements if m.protocol in want]})
            for i in t.implementations
        ]
        out.append(t.model_copy(update={"implementations": impls}))
    return out


def read_results(path: str | Path) -> list[dict]:
    """The JSON objects of an evaluation results JSONL file."""
    rows = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{n}: not valid JSON ({e.msg})") from None
    return rows


def measurements_from_results(
    rows: Iterable[dict], date: str
) -> dict[tuple[str, str], list[Measurement]]:
    """(task id, implementation id) → measurements, from `ok` full-mode results only."""
    out: dict[tuple[str, str], list[Measurement]] = {}
    for r in rows:
        if r.get("status") != "ok" or r.get("mode") != "full":
            continue
        ms = [
            Measurement(
                gpu=r["gpu"],
                config=c["config"],
                median_us=round(c["timing"]["median_us"], 3),
                iqr_us=round(c["timing"]["iqr_us"], 3),
                trials=c["timing"]["trials"],
                versions=r.get("versions", {}),
                date=date,
                protocol=protocol_of(r),
            )
            for c in r["configs"]
            if c.get("timing")
        ]
        out[(r["task_id"], r["candidate_id"])] = ms
    return out


def attach_measurements(
    tasks: list[Task], found: dict[tuple[str, str], list[Measurement]]
) -> tuple[list[Task], int]:
    """Tasks with measurements replaced per (GPU, config), and how many impls got any."""
    updated, n = [], 0
    for t in tasks:
        impls = []
        for impl in t.implementations:
            new = found.get((t.id, impl.id))
            if new:
                n += 1
                keys = {(m.gpu, m.config) for m in new}
                kept = [m for m in impl.measurements if (m.gpu, m.config) not in keys]
                impl = impl.model_copy(update={"measurements": kept + new})
            impls.append(impl)
        updated.append(t.model_copy(update={"implementations": impls}))
    return updated, n


def keep_verified(
    tasks: list[Task],
    found: dict[tuple[str, str], list[Measurement]],
    min_implementations: int = 3,
    min_strategies: int = 2,
    gpu: str = "",
) -> tuple[list[Task], dict[str, int]]:
    """Only what a GPU verified: implementations measured (`ok`) on every config of their task,
    then only tasks that still have `min_implementations` with `min_strategies` distinct tags.

    `found` is `measurements_from_results(...)` of the verification run: an implementation
    counts as verified when it has an `ok` result there (on `gpu`, when given) covering every
    config. Returns the kept tasks and counts of what was dropped, by reason.
    """
    dropped: dict[str, int] = {}

    def drop(reason: str) -> None:
        dropped[reason] = dropped.get(reason, 0) + 1

    kept = []
    for t in tasks:
        names = [c.name for c in t.configs]
        impls = []
        for impl in t.implementations:
            ms = [m for m in found.get((t.id, impl.id), []) if not gpu or m.gpu == gpu]
            probe = impl.model_copy(update={"measurements": ms})
            if not ms:
                drop("implementation not verified (failed or not run)")
            elif not any(probe.measured_on(g, names) for g in {m.gpu for m in ms}):
                drop("implementation not timed on every config")
            else:
                impls.append(impl)
        strategies = {s for i in impls for s in i.strategies}
        if len(impls) < min_implementations:
            drop(f"task left with fewer than {min_implementations} verified implementations")
        elif len(strategies) < min_strategies:
            drop(f"task left with fewer than {min_strategies} distinct strategies")
        else:
            kept.append(t.model_copy(update={"implementations": impls}))
    return kept, dropped
