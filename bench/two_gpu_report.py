"""Issue #20's record from `bench/two_gpu.sh`'s outputs: GPUs, versions, date, commands and the
three comparisons, as JSON, and a plot.

    python bench/two_gpu_report.py /root/work/two_gpu --out bench/results/two_gpu_h200x2.json \
        --plot bench/results/two_gpu_h200x2.png

FOLDER...: the script's work folder, or folders of its $OUT copies (read in order; a later
folder's files replace an earlier one's). Expected inside: env.json, commands.jsonl, the GRPO
runs split/, shared/, ddp2/ (or ddp1/ on one GPU) with steps.jsonl (+ report.json), and
measure_gpus0/, measure_gpus01/, bench_gpusall/, bench_gpus0/ with their summary / run files.
What is missing is listed under `not_run`, never filled in.

1. layout: per run, the mean step-time breakdown, and per canary kernel (task, config) the
   median over steps of its median event time with the spread (IQR / median) across steps;
   `differs_beyond_noise` when the layouts' medians differ by more than the larger spread.
2. ddp: per-step seconds and rows per second against the one-process run on the same GPU
   layout (`shared`), whether every step's groups stayed whole and apart (each process its own
   tasks), and whether the rollout rows carry the same fields as the one-process run's.
3. throughput: `data measure` implementations per minute on GPU 0 and on GPUs 0,1 (and the
   ratio), `bench run` wall seconds per task on every GPU (and on GPU 0 where it was run).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from cudaperf.train.curves import BREAKDOWN, STACKED, read_steps, summary  # noqa: E402

RUNS = ("split", "shared", "ddp2", "ddp1")


PATTERNS = (
    "env.json",
    "*/steps.jsonl",
    "*/report.json",
    "measure_gpus*/summary.json",
    "bench_gpus*/run.json",
)


def _files(folders: list[Path]) -> dict[str, Path]:
    """Relative path -> the last folder's copy of it (only the files this report reads)."""
    out: dict[str, Path] = {}
    for f in folders:
        if not f.is_dir():
            raise SystemExit(f"{f}: not a folder; give bench/two_gpu.sh's work or $OUT folder")
        for pat in PATTERNS:
            for p in sorted(f.glob(pat)):
                out[str(p.relative_to(f))] = p
    return out


def _json(files: dict[str, Path], rel: str):
    p = files.get(rel)
    return json.loads(p.read_text()) if p else None


def _commands(folders: list[Path]) -> list[dict]:
    """Every command of every folder's commands*.jsonl, once each, in the order they ran."""
    seen: dict[tuple, dict] = {}
    for f in folders:
        for p in sorted(f.glob("commands*.jsonl")):
            for line in p.read_text().splitlines():
                if line.strip():
                    c = json.loads(line)
                    seen[(c["name"], c["started"])] = c
    return sorted(seen.values(), key=lambda c: c["started"])


def _spread(xs: list[float]) -> float | None:
    if len(xs) < 2:
        return None
    q = statistics.quantiles(xs, n=4)
    return round((q[2] - q[0]) / statistics.median(xs), 4)


def _canaries(rows: list[dict]) -> dict[str, dict]:
    by: dict[str, list[float]] = {}
    for r in rows:
        for c in r.get("canary", []):
            by.setdefault(f"{c['task']}/{c['config']}", []).append(c["median_us"])
    return {
        k: {"steps": len(v), "median_us": round(statistics.median(v), 3), "spread": _spread(v)}
        for k, v in sorted(by.items())
    }


def _run(files, name) -> dict | None:
    if f"{name}/steps.jsonl" not in files:
        return None
    path = files[f"{name}/steps.jsonl"]
    rows = read_steps(path)
    logs = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    layout = next((r for r in reversed(logs) if r.get("kind") == "layout"), None)
    report = _json(files, f"{name}/report.json")
    return {
        "rows": rows,
        "summary": summary([path])[str(path)],
        "layout": layout,
        "report": {
            k: report.get(k)
            for k in ("steps", "seconds", "prepare_s", "stopped_by_time_budget", "interrupted")
        }
        if report
        else None,
        "canary": _canaries(rows),
    }


def layout_comparison(runs: dict) -> dict:
    split, shared = runs.get("split"), runs.get("shared")
    out = {
        name: {
            "layout": r["layout"],
            "breakdown_mean_s": r["summary"],
            "run": r["report"],
            "canary": r["canary"],
        }
        for name, r in (("split", split), ("shared", shared))
        if r
    }
    if split and shared:
        diff = {}
        for k in sorted(set(split["canary"]) & set(shared["canary"])):
            a, b = split["canary"][k], shared["canary"][k]
            rel = (b["median_us"] - a["median_us"]) / a["median_us"]
            noise = max(x for x in (a["spread"], b["spread"], 0.0) if x is not None)
            diff[k] = {
                "split_us": a["median_us"],
                "shared_us": b["median_us"],
                "shared_vs_split": round(rel, 4),
                "noise": noise,
                "differs_beyond_noise": abs(rel) > noise,
            }
        out["canary_difference"] = diff
    return out


def _groups_whole(rows: list[dict]) -> bool | None:
    per = [r["tasks_by_process"] for r in rows if "tasks_by_process" in r]
    if not per:
        return None
    for step in per:
        flat = [t for p in step for t in p]
        if len(flat) != len(set(flat)):
            return False
    return True


def ddp_comparison(runs: dict) -> dict:
    ddp = runs.get("ddp2") or runs.get("ddp1")
    solo = runs.get("shared")
    if not ddp:
        return {}
    name = "ddp2" if runs.get("ddp2") else "ddp1"
    out = {
        "run": name,
        "breakdown_mean_s": ddp["summary"],
        "layout": ddp["layout"],
        "groups_whole_and_apart": _groups_whole(ddp["rows"]),
    }
    for label, r in ((name, ddp), ("one_process", solo)):
        if r:
            rows = r["rows"]
            secs = [x["step_s"] for x in rows if x.get("step_s")]
            n = [x["rows"] for x in rows if x.get("step_s")]
            out[f"{label}_step_s_mean"] = round(statistics.mean(secs), 3) if secs else None
            out[f"{label}_rows_per_s"] = round(sum(n) / sum(secs), 3) if secs else None
    if solo:
        a = {k for x in ddp["rows"] for k in x}
        b = {k for x in solo["rows"] for k in x}
        out["same_fields_as_one_process"] = a == b
        out["fields_only_in_one"] = sorted(a ^ b)
    return out


def throughput(files, cmds: list[dict]) -> dict:
    out: dict = {}
    for g in ("0", "01"):
        s = _json(files, f"measure_gpus{g}/summary.json")
        if s:
            out[f"measure_gpus{g}"] = {
                k: s.get(k)
                for k in (
                    "implementations_measured_this_run",
                    "wall_s",
                    "impls_per_min",
                    "gpu_process_s_per_impl",
                    "interrupted",
                    "command",
                )
            }
    one, two = out.get("measure_gpus0"), out.get("measure_gpus01")
    if one and two and one.get("impls_per_min") and two.get("impls_per_min"):
        out["measure_2gpu_vs_1gpu"] = round(two["impls_per_min"] / one["impls_per_min"], 3)
    for g in ("all", "0"):
        done = [c for c in cmds if c["name"] == f"bench_gpus{g}" and c["rc"] == 0]
        if done:
            out[f"bench_gpus{g}"] = {"seconds": done[-1]["seconds"], "command": done[-1]["command"]}
    return out


def plot(runs: dict, thr: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ((ax1, ax2), (ax3, ax4)) = plt.subplots(2, 2, figsize=(12, 8))
    names = [n for n in RUNS if runs.get(n)]
    bottom = [0.0] * len(names)
    for part in STACKED:
        v = [runs[n]["summary"].get(f"{part}_mean") or 0.0 for n in names]
        ax1.bar(names, v, bottom=bottom, label=part.removesuffix("_s"))
        bottom = [a + b for a, b in zip(bottom, v, strict=True)]
    ax1.set_ylabel("mean seconds per step")
    ax1.legend(fontsize=7)
    for n in names:
        rows = runs[n]["rows"]
        ax2.plot([r["step"] for r in rows], [r.get("return_mean") for r in rows], label=n)
        for k in runs[n]["canary"]:
            pts = [
                (r["step"], c["median_us"])
                for r in rows
                for c in r.get("canary", [])
                if f"{c['task']}/{c['config']}" == k
            ]
            ax3.plot(*zip(*pts, strict=True), marker=".", lw=0.7, label=f"{n} {k}")
    ax2.set_ylabel("mean return")
    ax2.set_xlabel("GRPO step")
    ax2.legend(fontsize=7)
    ax3.set_ylabel("canary median event time (us)")
    ax3.set_xlabel("GRPO step")
    if ax3.get_legend_handles_labels()[0]:
        ax3.legend(fontsize=6)
    keys = [k for k in ("measure_gpus0", "measure_gpus01") if k in thr]
    ax4.bar(keys, [thr[k].get("impls_per_min") or 0 for k in keys])
    ax4.set_ylabel("data measure: implementations / min")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folders", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, required=True, help="the JSON record to write")
    ap.add_argument("--plot", type=Path, help="the PNG to write")
    a = ap.parse_args(argv)
    files = _files(a.folders)
    runs = {n: r for n in RUNS if (r := _run(files, n))}
    cmds = _commands(a.folders)
    thr = throughput(files, cmds)
    env = _json(files, "env.json") or {}
    rec = {
        "issue": 20,
        "gpus": env.get("gpus"),
        "versions": env.get("versions"),
        "date": env.get("date"),
        "code": env.get("code"),
        "commands": cmds,
        "breakdown_fields": list(BREAKDOWN),
        "layout": layout_comparison(runs),
        "ddp": ddp_comparison(runs),
        "throughput": thr,
    }
    wanted = {
        "split": "layout split (needs 2 GPUs)",
        "shared": "layout shared",
        "ddp2": "DDP with 2 processes (needs 2 GPUs)",
        "measure_gpus01": "data measure on 2 GPUs",
        "measure_gpus0": "data measure on 1 GPU",
        "bench_gpusall": "bench run",
        "bench_gpus0": "bench run on GPU 0 alone",
    }
    have = set(runs) | set(thr)
    rec["not_run"] = [why for k, why in wanted.items() if k not in have]
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(rec, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {a.out}; not run: {rec['not_run'] or 'none'}")
    if a.plot is not None and runs:
        plot(runs, thr, a.plot)
        print(f"wrote {a.plot}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
