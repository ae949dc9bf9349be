"""Builders for report tests: hand-made rows and task views, and an evaluator that reports the
stored H200 measurements of the sample set's implementations (no GPU, no compiler)."""

from __future__ import annotations

import math

from cudaperf.execute.types import Candidate, ConfigResult, ExecResult, Status, Timing
from cudaperf.report.metrics import task_views
from cudaperf.report.rows import BenchRow, TaskMeta


def meta(tid: str, family: str = "f", baselines=("naive",), kind="c2cuda") -> TaskMeta:
    return TaskMeta(id=tid, suite="s", family=family, kind=kind, baselines=list(baselines))


def row(tid: str, turn: int, sample: int, status: str = "ok", family: str = "f", **speedups):
    return BenchRow(
        task_id=tid,
        suite="s",
        family=family,
        kind="c2cuda",
        turn=turn,
        sample=sample,
        status=status,
        mode="full",
        compiled=status in ("ok", "wrong_output", "runtime_error"),
        correct=status == "ok",
        speedups=speedups if status == "ok" else {},
    )


def views(rows, metas):
    return task_views(rows, {m.id: m for m in metas})


def stored_speedup(task, code: str) -> float:
    """Geomean over configs of naive median / this implementation's median (stored H200)."""
    impl = next(i for i in task.implementations if i.code.strip() == code.strip())
    naive = task.implementation("naive")
    ratios = [
        n.median_us / m.median_us
        for n, m in zip(naive.measurements, impl.measurements, strict=True)
    ]
    return math.prod(ratios) ** (1 / len(ratios))


def stored_evaluator(calls: list):
    """OK results for known implementations (speedup vs naive from stored measurements, vs
    CPU = 20x that), COMPILE_ERROR for anything else; records every batch in `calls`."""

    def run(jobs):
        calls.append([t.id for t, _ in jobs])
        out = []
        for task, cand in jobs:
            known = any(i.code.strip() == cand.code.strip() for i in task.implementations)
            base = dict(mode="full", task_id=task.id, candidate_hash=cand.hash, gpu="fake")
            if not known:
                out.append(ExecResult(status=Status.COMPILE_ERROR, **base, compile_log="error"))
                continue
            sp = stored_speedup(task, cand.code)
            cfg = ConfigResult(
                config="small", held_out=False, correct=True, timing=Timing.of([10.0])
            )
            extra = (
                {"speedup_vs_cpu": 20 * sp}
                if task.kind.value == "c2cuda"
                else {"speedup_vs_eager": sp / 2, "speedup_vs_compile": sp / 3}
            )
            out.append(
                ExecResult(status=Status.OK, **base, configs=[cfg], speedup_vs_naive=sp, **extra)
            )
        return out

    return run


def stored_bench(out, tasks, model="scripted:best", backend=None, preset="outcome_only", **kw):
    """A `cudaperf bench run` folder at `out` of `tasks` (the sample set's), scored through the
    reward preset with `stored_evaluator`; `backend` replaces `model`'s scripted one (the run
    still records `model`); `kw` (samples, turns) go to BenchSettings (2 samples, 1 turn)."""
    from cudaperf.report.rows import task_meta
    from cudaperf.report.run import BenchSettings, make_bench_backend, run_bench
    from cudaperf.reward import RewardConfig, RewardScorer

    st = BenchSettings(
        model=model, suite="sample", preset=preset, **({"samples": 2, "turns": 1} | kw)
    )
    sc = RewardScorer(
        tasks,
        config=RewardConfig.preset(preset),
        evaluator=stored_evaluator([]),
        analyzer=lambda c: [],
        analyze="always",
    )
    be = backend if backend is not None else make_bench_backend(model, tasks)
    m = {t.id: task_meta(t, "sample") for t in tasks}
    run_bench(st, tasks, m, out, be, sc, batch_tasks=8)
    return out


__all__ = [
    "Candidate",
    "meta",
    "row",
    "stored_bench",
    "stored_evaluator",
    "stored_speedup",
    "views",
]


def turn1_task_mean(folder, field: str) -> float:
    """By hand, from a bench run folder's rows: the mean over tasks of the mean `field` of the
    task's turn-1 samples (`correct`: the correct rate; `reward`: the primary metric)."""
    from cudaperf.report.run import read_run
    from cudaperf.report.summary import load_views

    rows, *_ = load_views(read_run(folder), turns=1)
    per: dict[str, list[float]] = {}
    for r in rows:
        per.setdefault(r.task_id, []).append(getattr(r, field))
    return sum(sum(v) / len(v) for v in per.values()) / len(per)
