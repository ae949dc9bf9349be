"""The numbers of a benchmark report: one run (`summarize`) or several side by side (`compare`).

Both return plain dicts (JSON-serialisable; `summary.json` beside the report) that
`report.render` turns into HTML and Markdown. Only tasks that finished (have a summary
record) count; an interrupted run's report says how many finished. A compile-only run (no GPU:
nothing was run, checked or timed) reports compile rates only and says so; correctness and
speed metrics are left out rather than shown as zeros.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np

from cudaperf.execute.types import sum_phases
from cudaperf.refine.trajectory import TurnRecord, finished_tasks
from cudaperf.report.metrics import (
    INFRA,
    Metric,
    TaskView,
    fast_p,
    interval,
    paired_interval,
    paired_tasks,
    rejected_reasons,
    scored,
    standard_metrics,
    task_views,
    turn_metrics,
    value,
)
from cudaperf.report.rows import BASELINE_FIELDS, BASELINE_LABELS, BenchRow, rows_from_trajectory
from cudaperf.report.run import RunFiles, setup_diff

__all__ = [
    "FAILURE_ORDER",
    "P_GRID",
    "absent_baselines",
    "compare",
    "family_metrics",
    "family_table",
    "fmt_ci",
    "fmt_value",
    "host_cpus",
    "host_note",
    "hosts_differ_note",
    "load_views",
    "summarize",
]

P_GRID = [round(float(p), 3) for p in np.geomspace(0.25, 128.0, 46)]  # fast_p curve abscissae
FAILURE_ORDER = [
    "rejected",
    "wrong_output",
    "runtime_error",
    "timeout",
    "compile_error",
    "format_error",
    "infra_error",
    "screened",
]


def load_views(run: RunFiles, samples: int | None = None, turns: int | None = None):
    """(rows, task views, baselines present, mode) of the finished tasks of `run`, keeping
    only samples < `samples` and turns <= `turns` when given (for paired comparisons)."""
    finished = finished_tasks(run.records)
    meta = {k: m for k, m in run.meta.items() if k in finished}
    rows = [
        r
        for r in rows_from_trajectory(run.records, meta)
        if (samples is None or r.sample < samples) and (turns is None or r.turn <= turns)
    ]
    views = task_views(rows, meta)
    baselines = [b for b in BASELINE_FIELDS if any(b in m.baselines for m in meta.values())]
    modes = {r.mode for r in rows if r.mode}
    # no evaluated sample (only format errors): the evaluator's mode as the run recorded it
    mode = modes.pop() if len(modes) == 1 else ("mixed" if modes else run.info.get("mode", "none"))
    return rows, views, baselines, mode


def _measured(ms: list[Metric], mode: str) -> list[Metric]:
    """Compile-only runs measured compilation only: keep the compile-rate metrics."""
    return [m for m in ms if "compile rate" in m.name] if mode == "compile-only" else ms


def _ci(iv) -> dict:
    """An `intervals.Interval` as JSON: "ci" [lo, hi] (an end None for a one-sided bound;
    None when there is no interval) and "ci_note" ("" two-sided, "one-sided", or why none)."""
    ci = None if iv.lo is None and iv.hi is None else [iv.lo, iv.hi]
    return {"ci": ci, "ci_note": iv.note}


def _entry(m: Metric, views: Sequence[TaskView], by="family") -> dict:
    n = sum(bool(m.per_task(v)) for v in views)
    return {
        "metric": m.name,
        "value": value(m, views),
        **_ci(interval(m, views, by=by)),
        "tasks": n,
        "kind": m.kind,
        "doc": m.doc,
        "baseline": m.baseline,
    }


def _primary(baselines: list[str]) -> str | None:
    return next((b for b in ("naive", "eager", "cpu", "compile") if b in baselines), None)


def _group_metrics(samples: int, turns: int, prim: str | None, mode: str) -> list[Metric]:
    """The columns of the per-suite / level / family tables (against the primary baseline)."""
    want = ["compile rate", "correct rate", "correct, best"]
    if prim:
        want += [f"fast_1 vs {prim} (best", f"geomean speedup vs {prim}, all"]
    ms = standard_metrics(samples, turns, [prim] if prim else [])
    return _measured([m for m in ms if m.name.startswith(tuple(want))], mode)


def _groups(views: list[TaskView], key: str, ms: list[Metric]) -> list:
    vals = sorted({getattr(v.meta, key) for v in views})
    if key != "family" and len(vals) < 2:
        return []
    out = []
    for g in vals:
        sub = [v for v in views if getattr(v.meta, key) == g]
        by = "task" if key == "family" else "family"  # within one family: tasks resampled
        out.append({"group": g, "tasks": len(sub), "metrics": [_entry(m, sub, by) for m in ms]})
    return out


def left_out(rows: Sequence[BenchRow], views: Sequence[TaskView], baselines) -> dict:
    """What the metrics leave out as the harness's failures, not the model's: samples with an
    infra error (in no rate) and the tasks with no scored sample at all; per baseline, the
    tasks that have it but whose correct samples it could not be timed for."""
    infra = [r for r in rows if r.status == INFRA]
    return {
        "infra_error_samples": len(infra),
        "infra_error_tasks": sum(
            bool(v.turns) and not scored([r for rs in v.turns.values() for r in rs]) for v in views
        ),
        "baseline_unmeasured": {
            b: n
            for b in baselines
            if (n := sum(b in v.meta.baselines and v.unmeasured(b) for v in views))
        },
    }


def _failures(rows: list[BenchRow], limit: int = 12) -> list[dict]:
    """The worst failure of each task (by FAILURE_ORDER), worst tasks first."""
    rank = {s: i for i, s in enumerate(FAILURE_ORDER)}
    worst: dict[str, BenchRow] = {}
    for r in rows:
        if r.correct or r.status == "compiled":
            continue
        cur = worst.get(r.task_id)
        if cur is None or rank.get(r.status, 99) < rank.get(cur.status, 99):
            worst[r.task_id] = r
    order = sorted(worst.values(), key=lambda r: (rank.get(r.status, 99), r.task_id))
    return [
        {
            "task": r.task_id,
            "turn": r.turn,
            "sample": r.sample,
            "status": r.status,
            "findings": r.findings,
            "feedback": r.feedback,
            "reply": r.reply_head,
        }
        for r in order[:limit]
    ]


def _curves(views: list[TaskView], baselines: list[str], turns: int) -> dict:
    """`metrics.fast_p` over P_GRID per baseline: per turn-1 sample, and best of all turns."""
    out = {}
    for b in baselines:
        if any(b in v.meta.baselines and v.turns for v in views):
            out[b] = {
                "best": [value(fast_p(p, b, turns), views) for p in P_GRID],
                "turn1": [value(fast_p(p, b), views) for p in P_GRID],
            }
    return out


def absent_baselines(present: Sequence[str], runs: Sequence[RunFiles]) -> dict[str, str]:
    """Baseline name -> why the report has no speedups against it (every baseline of
    BASELINE_FIELDS not in `present`): not timed (`--no-compile-baseline`), or no task of
    `runs` can have it."""
    kinds = {m.kind for r in runs for m in r.meta.values()}
    naive = any("naive" in m.baselines for r in runs for m in r.meta.values())
    off = any(r.settings.get("compile_baseline") is False for r in runs)
    why = {
        "cpu": "" if "c2cuda" in kinds else "no C→CUDA task",
        "naive": "" if naive else "no task with a naive kernel",
        "eager": "" if "torch2cuda" in kinds else "no PyTorch→CUDA task",
        "compile": ("not timed (--no-compile-baseline)" if off else "")
        if "torch2cuda" in kinds
        else "no PyTorch→CUDA task",
    }
    return {b: why[b] or "not in every run" for b in BASELINE_FIELDS if b not in present}


def summarize(run: RunFiles) -> dict:
    """Everything a run's report shows (see the module doc)."""
    st = run.settings
    rows, views, baselines, mode = load_views(run)
    samples, turns = int(st["samples"]), int(st["turns"])
    ms = _measured(standard_metrics(samples, turns, baselines), mode)
    prim = _primary(baselines)
    group_ms = _group_metrics(samples, turns, prim, mode)
    share, reasons = rejected_reasons(rows)
    per_turn = []
    if mode != "compile-only":
        for t in range(1, turns + 1):
            per_turn.append(
                {"turn": t, "metrics": [_entry(m, views) for m in turn_metrics(t, baselines)]}
            )
    return {
        "title": f"{st['model']} on {run.info.get('suite_label', st['suite'])}",
        "settings": st,
        "info": run.info,
        "mode": mode,
        "tasks": {
            "selected": len(run.meta),
            "finished": len(views),
            "families": len({v.meta.family for v in views}),
        },
        "samples_evaluated": len(rows),
        "baselines": {b: BASELINE_LABELS[b] for b in baselines},
        "primary_baseline": prim,
        "baselines_absent": absent_baselines(baselines, [run]),
        "statuses": dict(Counter(r.status for r in rows).most_common()),
        "left_out": left_out(rows, views, baselines),
        "metrics": [_entry(m, views) for m in ms],
        "per_turn": per_turn,
        "groups": {k: _groups(views, k, group_ms) for k in ("suite", "level", "family")},
        "rejected": {"share": share, "reasons": dict(reasons.most_common())},
        "failures": _failures(rows),
        "speedups": {
            b: sorted(r.speedups[b] for r in rows if r.turn == 1 and b in r.speedups)
            for b in baselines
        }
        if mode != "compile-only"
        else {},
        "fast_p_curves": _curves(views, baselines, turns) if mode != "compile-only" else {},
        "time": run_time(run),
        "hosts": host_cpus(run),
    }


def run_time(run: RunFiles) -> dict:
    """Where a run's time went: the evaluator's per-phase seconds of the finished tasks'
    evaluations (`evaluator_phases_s`, summed over them: compiles run in parallel, so the
    phases may add up to more than the wall time; samples of one task with the same candidate
    share one evaluation and its phases, counted once, and a result the cache answered took
    none of them in this run) and, from timing.jsonl (every chunk of
    every process that worked on the run, interrupted ones included), the wall, generation
    and scoring seconds; a run older than timing.jsonl has the phases only. A run resumed
    from a start older than timing.jsonl is timed only in part: `tasks_timed` (tasks of the
    chunks that finished) of `tasks_finished` say how much, and the line says so.
    `evaluations`: how many evaluations the phases add up."""
    finished = finished_tasks(run.records)
    evaluations = {
        (r.task_id, s.result.cache_key or id(s.result)): s.result.phases
        for r in run.records
        if isinstance(r, TurnRecord) and r.task_id in finished
        for s in r.samples
        if s.result is not None and not s.result.cached
    }
    phases = sum_phases(evaluations.values())
    out = {"evaluator_phases_s": phases, "evaluations": len(evaluations)} if phases else {}
    if not run.timing:
        return out
    done = [c for c in run.timing if c.get("complete")]
    done_s = sum(c.get("wall_s", 0.0) for c in done)
    done_tasks = sum(c.get("tasks", 0) for c in done)
    return {
        "wall_s": round(sum(c.get("wall_s", 0.0) for c in run.timing), 1),
        "generate_s": round(sum(c.get("generate_s", 0.0) for c in run.timing), 1),
        "score_s": round(sum(c.get("score_s", 0.0) for c in run.timing), 1),
        "chunks": len(run.timing),
        "chunks_interrupted": len(run.timing) - len(done),
        "s_per_task": round(done_s / done_tasks, 2) if done_tasks else None,
        "tasks_timed": done_tasks,
        "tasks_finished": len(finished),
        **_scoring_split(run.timing),
        **out,
    }


SCORING_PARTS = ("evaluate_s", "analyse_s", "rank_s")  # the scorer's clocks (timing.jsonl)


def _scoring_split(timing: list[dict]) -> dict:
    """`scoring_split_s`: the chunks' scoring seconds by the scorer's clocks (the evaluator,
    the structural analysis, the ranker), when every chunk recorded them (since session 47)."""
    if not all(all(k in c for k in SCORING_PARTS) for c in timing):
        return {}
    return {"scoring_split_s": {k: round(sum(c[k] for c in timing), 1) for k in SCORING_PARTS}}


def host_cpus(run: RunFiles) -> dict:
    """The host CPUs a run's chunks ran on (timing.jsonl's `host_cpu`): `models`, each with
    its chunk count, and `unrecorded`, chunks of a run older than the field (or without
    timing.jsonl: then 0 chunks and `unrecorded` None). The serial C reference is timed on the
    host, so speedups against it compare host CPUs too."""
    if not run.timing:
        return {"models": {}, "unrecorded": None}
    got = Counter(c["host_cpu"] for c in run.timing if c.get("host_cpu"))
    return {"models": dict(sorted(got.items())), "unrecorded": len(run.timing) - got.total()}


def _hosts_text(h: dict) -> str:
    models = ", ".join(f"{m} ({n} chunk(s))" for m, n in h["models"].items())
    if h["unrecorded"] is None:
        return "not recorded (no timing.jsonl)"
    if h["unrecorded"]:
        models += ("; " if models else "") + f"{h['unrecorded']} chunk(s) not recorded"
    return models


def host_note(h: dict, baselines) -> str:
    """One report line on the host CPU of a run whose speedups include the C reference's
    ("" when they do not): which host, and a warning when the run's chunks ran on several or
    some host is unknown."""
    if "cpu" not in baselines:
        return ""
    if len(h["models"]) == 1 and not h["unrecorded"]:
        return f"host CPU (times the serial C reference): {next(iter(h['models']))}"
    return (
        "speedups vs cpu mix host CPUs or hosts not recorded, so they are the hosts' as much as "
        f"the kernels': {_hosts_text(h)}"
    )


def hosts_differ_note(names: Sequence[str], hosts: Sequence[dict], baselines) -> str:
    """The compare report's warning when the runs' speedups against the C reference were not
    all timed on one recorded host CPU ("" when they were, or no such speedup is compared)."""
    if "cpu" not in baselines:
        return ""
    models = {m for h in hosts for m in h["models"]}
    if len(models) == 1 and not any(h["unrecorded"] for h in hosts):
        return ""
    verdict = "are not" if len(models) > 1 else "may not be"  # else: one known, some unknown
    return (
        f"speedups vs cpu {verdict} comparable between these runs: the serial C reference was "
        "timed on "
        + "; ".join(f"{n}: {_hosts_text(h)}" for n, h in zip(names, hosts, strict=True))
        + " (compare speedups against a GPU baseline instead)"
    )


def fmt_time(t: dict) -> str:
    """One line for a run's `time` entry ("" for a run without timing.jsonl)."""
    if "wall_s" not in t:
        return ""
    wall = max(t["wall_s"], 1e-9)
    cut = f", {t['chunks_interrupted']} cut short" if t["chunks_interrupted"] else ""
    per = f"; {t['s_per_task']:.1f} s per task" if t["s_per_task"] is not None else ""
    timed, finished = t.get("tasks_timed"), t.get("tasks_finished")
    part = (
        f" for {timed} of {finished} tasks (the rest ran before timing was recorded)"
        if timed is not None and finished is not None and timed < finished
        else ""
    )
    split = t.get("scoring_split_s")
    names = {"evaluate_s": "evaluator", "analyse_s": "analysis", "rank_s": "ranker"}
    of = (
        ": " + ", ".join(f"{names[k]} {100 * split[k] / wall:.0f}%" for k in SCORING_PARTS)
        if split
        else ""
    )
    return (
        f"time: {t['wall_s']:.0f} s{part} in {t['chunks']} chunk(s){cut} (generation "
        f"{100 * t['generate_s'] / wall:.0f}%, scoring {100 * t['score_s'] / wall:.0f}%{of})"
        f"{per}"
    )


def family_metrics(samples: int, turns: int, prim: str | None, mode: str) -> list[Metric]:
    """The columns of a comparison's per-family table: correct rate (turn 1), and against the
    primary baseline fast_1 (best of all samples and turns) and the geomean speedup over all
    tasks (failure = the 0.1x floor); only the compile rate when a run was not evaluated in full."""
    if mode != "full":
        return [m for m in standard_metrics(samples, turns, []) if "compile rate" in m.name]
    want = ["correct rate (turn 1)"]
    if prim:
        want += [f"fast_1 vs {prim} (best", f"geomean speedup vs {prim}, all"]
    ms = standard_metrics(samples, turns, [prim] if prim else [])
    return [m for m in ms if m.name.startswith(tuple(want))]


def family_table(views: Sequence[Sequence[TaskView]], ms: list[Metric]) -> list[dict]:
    """Per family of the first run's tasks (sorted), for each metric of `ms`: each run's value
    and 95% interval (the family's tasks as clusters), and each later run's paired
    difference against the first (`paired_interval` pairing the same tasks; a ratio for
    speedups). `views`: one list of task views per run, on the same tasks."""
    out = []
    for fam in sorted({v.meta.family for v in views[0]}):
        sub = [[v for v in vs if v.meta.family == fam] for vs in views]
        rows = []
        for m in ms:
            es = [_entry(m, s, by="task") for s in sub]
            diffs = []
            for s in sub[1:]:
                d, iv = paired_interval(m, sub[0], s, by="task")
                diffs.append({"diff": d, **_ci(iv)})
            rows.append(
                {
                    "metric": m.name,
                    "kind": m.kind,
                    "values": [e["value"] for e in es],
                    "cis": [e["ci"] for e in es],
                    "ci_notes": [e["ci_note"] for e in es],
                    "diffs": diffs,
                }
            )
        out.append({"family": fam, "tasks": len(sub[0]), "metrics": rows})
    return out


def setup_differences(runs: Sequence[RunFiles]) -> list[str]:
    """How each later run's measurement setup differs from the first's: GPU, evaluator mode,
    evaluator settings, toolchain and evaluator code (`versions`: nvcc, gcc, driver, cudaperf
    with its evaluator fingerprint); one line per difference, [] when none."""
    base = runs[0]
    return [
        f"{r.path.name}: {key} = {now!r}, {base.path.name}: {then!r}"
        for r in runs[1:]
        for key, then, now in setup_diff(base.info, r.info)
    ]


def compare(runs: Sequence[RunFiles], labels: Sequence[str] | None = None) -> dict:
    """The first run against each later one: every metric of both on the tasks both finished,
    the samples both have (index < the smaller `samples`) and the turns both ran, with the
    paired difference (later - first) and its paired interval; `by_family` holds
    the same per family (`family_table` of `family_metrics`). `labels` names the runs (one
    each, distinct); by default their folder names, numbered where two are alike."""
    if len(runs) < 2:
        raise ValueError("compare needs at least two runs")
    if labels is not None:
        labels = [str(n).strip() for n in labels]
        if len(labels) != len(runs) or not all(labels) or len(set(labels)) < len(labels):
            raise ValueError(
                f"give one distinct, non-empty --label per run ({len(runs)} runs, "
                f"{len(labels)} labels), in the order of the runs"
            )
    samples = min(int(r.settings["samples"]) for r in runs)
    turns = min(int(r.settings["turns"]) for r in runs)
    loaded = [load_views(r, samples, turns) for r in runs]
    ids = set.intersection(*({v.meta.id for v in lv[1] if v.turns} for lv in loaded))
    if not ids:
        raise ValueError("the runs share no finished task; compare runs of the same suite")
    modes = {lv[3] for lv in loaded}
    mode = modes.pop() if len(modes) == 1 else "mixed"
    baselines = [b for b in BASELINE_FIELDS if all(b in lv[2] for lv in loaded)]
    ms = standard_metrics(samples, turns, baselines)
    if mode != "full":
        ms = [m for m in ms if "compile rate" in m.name]
    views = [[v for v in lv[1] if v.meta.id in ids] for lv in loaded]
    names = list(labels) if labels else [r.path.name or str(r.path) for r in runs]
    if len(set(names)) < len(names):
        names = [f"{n} ({i + 1})" for i, n in enumerate(names)]
    models = [
        r.settings["model"] + (f" + {r.settings['adapter']}" if r.settings.get("adapter") else "")
        for r in runs
    ]
    table = []
    for m in ms:
        row = {
            "metric": m.name,
            "kind": m.kind,
            "doc": m.doc,
            "values": [value(m, v) for v in views],
            "diffs": [],
        }
        for v in views[1:]:
            d, iv = paired_interval(m, views[0], v)
            n = len(paired_tasks(m, views[0], v))  # where both have a value of m
            row["diffs"].append({"diff": d, **_ci(iv), "tasks": n})
        table.append(row)
    hosts = [host_cpus(r) for r in runs]  # the C reference's hosts: its speedups are theirs
    per_turn = []
    if mode == "full":
        by_turn = [turn_metrics(t, baselines) for t in range(1, turns + 1)]
        per_turn = [
            [
                {"turn": t, "values": {m.name: value(m, v) for m in ms}}
                for t, ms in enumerate(by_turn, 1)
            ]
            for v in views
        ]
    return {
        "title": " vs ".join(names),
        "runs": [str(r.path) for r in runs],
        "names": names,
        "models": models,
        "infos": [r.info for r in runs],  # run.json beside the settings (setup, sampling)
        "primary_baseline": _primary(baselines),
        "mode": mode,
        "tasks": len(ids),
        "families": len({v.meta.family for v in views[0]}),
        "samples": samples,
        "turns": turns,
        "baselines": {b: BASELINE_LABELS[b] for b in baselines},
        "metrics": table,
        "baselines_absent": absent_baselines(baselines, runs),
        "setup_differences": setup_differences(runs),
        "hosts": hosts,
        "hosts_note": hosts_differ_note(names, hosts, baselines),
        "per_turn": per_turn,
        "by_family": family_table(views, family_metrics(samples, turns, _primary(baselines), mode)),
        "fast_p_curves": [_curves(v, baselines, turns) for v in views] if mode == "full" else [],
    }


def fmt_ci(ci: list | None, note: str, kind: str) -> str:
    """An interval as the tables print it: "[lo, hi]", a one-sided bound ">= lo (one-sided)",
    or "n/a (why)"; never a zero-width interval (`report.intervals` gives none instead)."""
    if ci is None:
        return f"n/a ({note})" if note else "n/a"
    lo, hi = ci
    if hi is None:
        return f">= {fmt_value(lo, kind)} (one-sided)"
    if lo is None:
        return f"<= {fmt_value(hi, kind)} (one-sided)"
    return f"[{fmt_value(lo, kind)}, {fmt_value(hi, kind)}]"


def fmt_value(v: float | None, kind: str) -> str:
    """A metric value as the tables print it: rates in %, speedups in x."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    return f"{100 * v:.1f}%" if kind == "rate" else f"{v:.2f}x"
