"""The summary of bench/eval_throughput.py: per column its rate, verdicts and configs, the
agreement of KernelBench's harness with cudaperf, and the printed table, from the records alone."""

from __future__ import annotations

import statistics

from throughput_kb import KB_CORRECT_TRIALS, KB_PERF_TRIALS, KB_SEED
from throughput_records import Records

FORMS = {"kernelbench": "load_inline", "inline": "load_inline", "native": "native"}
LABELS = {
    "kernelbench": "KernelBench harness",
    "inline": "cudaperf",
    "native": "cudaperf",
}
CHECKS = {
    "kernelbench": f"{KB_CORRECT_TRIALS} correctness trials (seed {KB_SEED}), "
    f"{KB_PERF_TRIALS} timed trials of the candidate and {KB_PERF_TRIALS} of the reference "
    "(CUDA events, mean), the problem file's own size only, one process per candidate",
    "cudaperf": "5 correctness trials per config on fresh secret-seeded inputs (task's own and "
    "a signed wider distribution), up to 100 timed trials per config (L2 flushed) within the "
    "time budget, re-check after timing, mutation/aliasing/stream/timer/profiler/roofline "
    "checks, eager baseline, candidate in its own confined process",
}


def _problem(key: str) -> str:
    return key.split("@")[0]


def _rate(n: int, wall: float) -> float | None:
    return round(60 * n / wall, 2) if n and wall > 0 else None


def kb_column(records: Records, keys: list[str], settings_key: str) -> dict:
    """KernelBench's rows for `keys`; wall = their evaluations + each pre-compile segment's
    wall time shared evenly over that segment's jobs (jobs cut by a deadline take their share
    with them, so the rate is never lowered by our splitting into calls)."""
    rows = [r for k in keys if (r := records.last("kb_row", key=k, settings=settings_key))]
    segs = {s["segment"]: s for s in records.of("kb_segment")}
    build = sum(
        segs[r["segment"]]["wall_s"] / segs[r["segment"]]["n_jobs"]
        for r in rows
        if r.get("segment") in segs
    )
    wall = sum(r["eval_s"] for r in rows) + build
    return {
        "n_planned": len(keys),
        "n": len(rows),
        "correct": sum(r["correct"] for r in rows),
        "wall_s": round(wall, 2),
        "build_share_s": round(build, 2),
        "candidates_per_min": _rate(len(rows), wall),
        "configs_per_candidate": 1,
        "configs": "default only (the problem file's own sizes)",
        "rows": rows,
        "build_segments": len({r.get("segment") for r in rows if r.get("segment")}),
    }


def cudaperf_column(rec: dict | None, keys: list[str]) -> dict:
    if rec is None:
        return {"n_planned": len(keys), "n": 0, "correct": 0, "rows": []}
    rows = rec["rows"]
    n_cfg = [r["n_configs"] for r in rows]
    trials = [c["trials"] for r in rows for c in r["configs"] if c["trials"]]
    names = sorted({c for r in rows for c in r.get("task_configs", [])})
    return {
        "n_planned": len(keys),
        "n": len(rows),
        "correct": sum(r["correct"] for r in rows),
        "wall_s": rec["wall_s"],
        "candidates_per_min": _rate(len(rows), rec["wall_s"]),
        "configs_per_candidate": {"min": min(n_cfg), "max": max(n_cfg), "total": sum(n_cfg)},
        "configs": f"every config of the task ({', '.join(names)}; held-out included)"
        if rec["settings"]["configs"] == "all"
        else "default only",
        "every_config_checked": all(r["n_configs"] == len(r.get("task_configs", [])) for r in rows),
        "timed_trials_per_config": {"min": min(trials), "median": statistics.median(trials)}
        if trials
        else None,
        "rows": rows,
    }


def agreement(kb: dict, ours: dict) -> dict:
    """Correctness agreement and time ratios over the candidates both sides finished."""
    mine = {_problem(r["key"]): r for r in ours["rows"]}
    pairs = [(a, mine[_problem(a["key"])]) for a in kb["rows"] if _problem(a["key"]) in mine]
    same = sum(a["correct"] == b["correct"] for a, b in pairs)
    ratios = [
        b["median_us"] / a["runtime_us"]
        for a, b in pairs
        if a.get("runtime_us") and b.get("median_us")
    ]
    disagree = [_problem(a["key"]) for a, b in pairs if a["correct"] != b["correct"]]
    return {
        "n": len(pairs),
        "same_verdict": same,
        "disagree": disagree,
        "median_time_ratio": round(statistics.median(ratios), 4) if ratios else None,
        "time_ratio_n": len(ratios),
        "time_ratio_is": "cudaperf median (default config) / KernelBench mean, same kernels",
    }


def summarise(records: Records, plan: dict) -> dict:
    """The comparison from the records alone (what `plan` asked for: keys per column)."""
    cols: dict[str, dict] = {}
    for name, keys in plan["keys"].items():
        if name == "kernelbench":
            col = kb_column(records, keys, plan["kb_settings_key"])
        else:
            col = cudaperf_column(
                records.last("pass", name=name, settings=plan["settings"][name]), keys
            )
        side = "kernelbench" if name == "kernelbench" else "cudaperf"
        cols[name] = {"harness": LABELS[name], "form": FORMS[name], "checks": CHECKS[side]} | col
    out: dict = {"columns": cols}
    if "kernelbench" in cols:
        for name in ("inline", "native"):
            if name in cols and cols[name]["n"] and cols["kernelbench"]["n"]:
                out[f"agreement_vs_{name}"] = agreement(cols["kernelbench"], cols[name])
    out["complete"] = all(c["n"] == c["n_planned"] for c in cols.values())
    out["same_problems"] = len({tuple(sorted(map(_problem, k))) for k in plan["keys"].values()}) < 2
    out["cudaperf_settings"] = next(iter(plan["settings"].values()), None)
    out["table"] = table(cols, out)
    return out


def table(cols: dict, summary: dict) -> list[str]:
    lines = [
        f"{'harness':<22}{'form':<13}{'done':>9}{'correct':>9}{'cfg/cand':>10}{'cand/min':>10}"
    ]
    for c in cols.values():
        cfg = c.get("configs_per_candidate")
        cfg = cfg if isinstance(cfg, int) else (f"{cfg['total'] / c['n']:.2f}" if cfg else "-")
        rate = c.get("candidates_per_min") or "-"
        lines.append(
            f"{c['harness']:<22}{c['form']:<13}{c['n']:>4}/{c['n_planned']:<4}"
            f"{c['correct']:>9}{cfg:>10}{rate:>10}"
        )
    for c in cols.values():
        every = {True: "; every config checked", False: "; NOT every config checked"}
        tt = c.get("timed_trials_per_config")
        tt = f"; timed trials per config: min {tt['min']}, median {tt['median']}" if tt else ""
        lines.append(
            f"{c['harness']} ({c['form']}): configs: {c.get('configs', '-')}"
            f"{every.get(c.get('every_config_checked'), '')}{tt}"
        )
    lines.append(f"KernelBench checks: {CHECKS['kernelbench']}")
    lines.append(f"cudaperf checks: {CHECKS['cudaperf']}")
    st = summary.get("cudaperf_settings")
    if st:
        cb = "on" if st.get("compile_baseline") else "off"
        lines.append(
            f"cudaperf settings: time budget {st.get('time_budget_s')} s per config, "
            f"torch.compile baseline {cb}"
        )
    same = "yes" if summary["same_problems"] else "NO"
    lines.append(f"same problems in every column: {same}")
    for name in ("inline", "native"):
        a = summary.get(f"agreement_vs_{name}")
        if a:
            lines.append(
                f"agreement KernelBench vs cudaperf {FORMS[name]}: {a['same_verdict']}/"
                f"{a['n']} same verdict; median time ratio {a['median_time_ratio']} "
                f"over {a['time_ratio_n']}"
            )
    lines.append("complete" if summary["complete"] else "NOT complete: rerun the same command")
    return lines
