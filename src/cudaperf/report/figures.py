"""The report's plots as PNG bytes (matplotlib, Agg): speedup distribution, fast_p curves,
per-turn improvement, per-family bars (one run) or dots with intervals (a comparison). Each
takes a `summary` or `compare` dict and returns None when it has nothing to draw (e.g. a
compile-only run has no speedups)."""

from __future__ import annotations

import io
import math

from cudaperf.report.summary import P_GRID

__all__ = ["compare_figures", "have_matplotlib", "run_figures"]

_COLORS = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860"]


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=100)
    _plt().close(fig)
    return buf.getvalue()


def speedup_hist(s: dict) -> bytes | None:
    """Histogram of log2 speedups of correct turn-1 samples, one panel per baseline."""
    data = {b: v for b, v in s.get("speedups", {}).items() if v}
    if not data:
        return None
    plt = _plt()
    fig, axes = plt.subplots(1, len(data), figsize=(4.2 * len(data), 3.2), squeeze=False)
    for ax, (b, vals) in zip(axes[0], data.items(), strict=True):
        logs = [math.log2(v) for v in vals]
        ax.hist(logs, bins=min(30, max(5, len(logs) // 2)), color=_COLORS[0], edgecolor="white")
        ax.axvline(0, color="black", lw=1)
        ax.set_title(f"vs {s['baselines'][b]} (n={len(vals)})", fontsize=9)
        ax.set_xlabel("log2 speedup (right of 0 = faster)")
        ax.set_ylabel("correct samples")
    return _png(fig)


def _curve_axes(curves_by_run: list[dict], labels: list[str], baselines: dict, key: str):
    bl = [b for b in baselines if any(b in c for c in curves_by_run)]
    if not bl:
        return None
    plt = _plt()
    fig, axes = plt.subplots(1, len(bl), figsize=(4.2 * len(bl), 3.2), squeeze=False)
    for ax, b in zip(axes[0], bl, strict=True):
        for i, (c, lab) in enumerate(zip(curves_by_run, labels, strict=True)):
            if b in c:
                ax.plot(
                    P_GRID,
                    c[b][key],
                    color=_COLORS[i % 6],
                    label=f"{lab}: share of tasks (best sample)",
                )
                if key == "best" and len(curves_by_run) == 1:
                    ax.plot(
                        P_GRID,
                        c[b]["turn1"],
                        color=_COLORS[1],
                        ls="--",
                        label="turn 1: mean share of samples per task",
                    )
        ax.set_xscale("log", base=2)
        ax.axvline(1.0, color="grey", lw=0.8)
        ax.set_ylim(0, 1)
        ax.set_title(f"fast_p vs {baselines[b]}", fontsize=9)
        ax.set_xlabel("p (speedup threshold)")
        ax.set_ylabel("fast_p")
        ax.legend(fontsize=7)
    return _png(fig)


def per_turn(turn_values: list[list[dict]], labels: list[str], prefixes: list[str]):
    """One panel per metric-name prefix, one line per run: the metric by turn (best so far)."""
    series = []
    for prefix in prefixes:
        lines = []
        for turns, lab in zip(turn_values, labels, strict=True):
            pts = [
                (t["turn"], v)
                for t in turns
                for k, v in t["values"].items()
                if k.startswith(prefix) and v is not None
            ]
            if pts:
                lines.append((lab, pts))
        if lines:
            series.append((prefix, lines))
    if not series:
        return None
    plt = _plt()
    fig, axes = plt.subplots(1, len(series), figsize=(4.6 * len(series), 3.2), squeeze=False)
    for ax, (prefix, lines) in zip(axes[0], series, strict=True):
        for i, (lab, pts) in enumerate(lines):
            ax.plot(*zip(*pts, strict=True), marker="o", color=_COLORS[i % 6], label=lab)
        ax.set_xticks(sorted({t for _, pts in lines for t, _ in pts}))
        ax.set_xlabel("turn")
        ax.set_title(f"{prefix.removesuffix(' by')} (best so far)", fontsize=9)
        if prefix.startswith("correct"):
            ax.set_ylim(0, 1.02)  # a share: from 0, so a rise is not magnified
        ax.legend(fontsize=7)
    return _png(fig)


def _bar(v: float, ci: list | None, top: float) -> tuple[float, float]:
    """Error-bar lengths below and above `v`: none without an interval; a one-sided bound
    draws to `top` (a rate's 100%) or to 0 on its open side."""
    if ci is None:
        return 0.0, 0.0
    lo = 0.0 if ci[0] is None else ci[0]
    hi = max(top, v) if ci[1] is None else ci[1]
    return v - lo, hi - v


def family_bars(s: dict) -> bytes | None:
    """Per family: the best-of correct share (compile rate when compile-only), with its CI."""
    fams = s["groups"].get("family", [])
    if not fams:
        return None
    want = "compile rate" if s["mode"] == "compile-only" else "correct, best"
    names, vals, lo, hi, label = [], [], [], [], want
    for g in fams:
        m = next((e for e in g["metrics"] if e["metric"].startswith(want)), None)
        if m is None or m["value"] is None:
            continue
        names.append(f"{g['group']} ({g['tasks']})")
        label = m["metric"]  # e.g. "correct, best of 4x2": says it is the best-of share
        vals.append(m["value"])
        a, b = _bar(m["value"], m["ci"], 1.0)
        lo.append(a)
        hi.append(b)
    if not names:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 0.32 * len(names) + 1.2))
    ax.barh(names, vals, xerr=[lo, hi], color=_COLORS[2], capsize=2)
    ax.set_xlim(0, 1)
    ax.invert_yaxis()
    ax.set_xlabel(f"{label} (95% interval over the family's tasks)")
    ax.tick_params(axis="y", labelsize=7)
    return _png(fig)


def family_dots(c: dict) -> bytes | None:
    """A comparison's per-family table as a dot plot: one panel per metric, one row per
    family, one dot per run with its 95% interval (rates on 0..1, speedups on a log axis)."""
    fams = c.get("by_family", [])
    if not fams or not fams[0]["metrics"]:
        return None
    names = [m["metric"] for m in fams[0]["metrics"]]
    plt = _plt()
    fig, axes = plt.subplots(
        1,
        len(names),
        figsize=(4.4 * len(names), 0.34 * len(fams) + 1.6),
        squeeze=False,
        sharey=True,
    )
    runs = len(c["names"])
    for ax, k in zip(axes[0], range(len(names)), strict=True):
        kind = fams[0]["metrics"][k]["kind"]
        for r, lab in enumerate(c["names"]):
            ys, xs, lo, hi = [], [], [], []
            for y, f in enumerate(fams):
                e = f["metrics"][k]
                v, ci = e["values"][r], e["cis"][r]
                if v is None:
                    continue
                ys.append(y + (r - (runs - 1) / 2) * 0.8 / max(runs, 2))
                xs.append(v)
                a, b = _bar(v, ci, 1.0 if kind == "rate" else v)
                lo.append(a)
                hi.append(b)
            ax.errorbar(
                xs, ys, xerr=[lo, hi], fmt="o", ms=4, capsize=2, color=_COLORS[r % 6], label=lab
            )
        if kind == "rate":
            ax.set_xlim(-0.02, 1.02)
        else:
            ax.set_xscale("log", base=2)
            ax.axvline(1.0, color="grey", lw=0.8)
        ax.set_yticks(range(len(fams)))
        ax.set_yticklabels([f"{f['family']} ({f['tasks']})" for f in fams], fontsize=7)
        ax.invert_yaxis()
        ax.set_title(names[k], fontsize=8)
        ax.legend(fontsize=7)
    return _png(fig)


def _turn_values(s: dict) -> list[dict]:
    return [
        {"turn": t["turn"], "values": {e["metric"]: e["value"] for e in t["metrics"]}}
        for t in s.get("per_turn", [])
    ]


def _turn_prefixes(d: dict) -> list[str]:
    prim = d.get("primary_baseline") or next(iter(d.get("baselines", {})), None)
    return ["correct by"] + ([f"geomean vs {prim} by"] if prim else [])


def have_matplotlib() -> bool:
    """Whether plots can be drawn (the reports leave them out, saying so, when not)."""
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None


def run_figures(s: dict) -> dict[str, bytes]:
    """The plots of one run's summary, by caption ({} without matplotlib)."""
    if not have_matplotlib():
        return {}
    figs = {
        "Speedup distribution (correct turn-1 samples)": speedup_hist(s),
        "fast_p over p (solid: best of all samples and turns; dashed: turn-1 samples)": _curve_axes(
            [s.get("fast_p_curves", {})], ["best of all"], s["baselines"], "best"
        ),
        "Per-turn improvement": per_turn([_turn_values(s)], ["run"], _turn_prefixes(s)),
        "Per-family "
        + (
            "compile rate (turn 1)"
            if s["mode"] == "compile-only"
            else f"correct share, best of {s['settings']['samples']} samples x "
            f"{s['settings']['turns']} turn(s)"
        ): family_bars(s),
    }
    return {k: v for k, v in figs.items() if v is not None}


def compare_figures(c: dict) -> dict[str, bytes]:
    """The plots of a comparison, by caption ({} without matplotlib)."""
    if not have_matplotlib():
        return {}
    curves = c.get("fast_p_curves")
    fast = _curve_axes(curves, c["names"], c["baselines"], "best") if curves else None
    turns = per_turn(c["per_turn"], c["names"], _turn_prefixes(c)) if c.get("per_turn") else None
    figs = {
        "fast_p over p (best of all samples and turns)": fast,
        "Per-turn improvement": turns,
        "Per family, each run with its 95% interval (t interval over the family's tasks)": (
            family_dots(c)
        ),
    }
    return {k: v for k, v in figs.items() if v is not None}
