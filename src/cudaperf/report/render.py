"""Benchmark reports as files: one self-contained HTML page (plots embedded as base64 PNG, CSS
inline, no external asset) and a Markdown twin (plots as PNG files in `figures/` beside it).

`write_run_report(summary, folder)` and `write_compare_report(comparison, folder)` write
`report.html`, `report.md`, `summary.json` and `figures/*.png` into `folder` and return the
HTML path.
"""

from __future__ import annotations

import base64
import html
import json
import re
from pathlib import Path

from cudaperf.report.figures import compare_figures, have_matplotlib, run_figures
from cudaperf.report.rows import BASELINE_LABELS
from cudaperf.report.summary import fmt_ci, fmt_time, fmt_value, host_note

__all__ = [
    "absent_text",
    "headline",
    "left_out_text",
    "paired_text",
    "write_compare_report",
    "write_run_report",
]

_CSS = """body{font-family:system-ui,sans-serif;margin:24px auto;max-width:1150px;color:#222}
table{border-collapse:collapse;margin:8px 0 18px}td,th{border:1px solid #ccc;padding:3px 8px;
font-size:13px;text-align:left}th{background:#f0f0f0}td.n{text-align:right;font-variant:
tabular-nums}.banner{background:#fff3cd;border:1px solid #e0c060;padding:10px;margin:10px 0}
pre{background:#f7f7f7;padding:6px;font-size:12px;white-space:pre-wrap;max-height:260px;
overflow:auto}img{max-width:100%;border:1px solid #eee;margin:6px 0}.doc{color:#666;
font-size:12px}"""


def _esc(x) -> str:
    return html.escape(str(x))


def _ci(e: dict) -> str:
    return fmt_ci(e.get("ci"), e.get("ci_note", ""), e["kind"])


def _table(head: list[str], rows: list[list[str]], cls_num: set[int] = frozenset()) -> str:
    th = "".join(f"<th>{_esc(h)}</th>" for h in head)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="n">{_esc(c)}</td>' if i in cls_num else f"<td>{_esc(c)}</td>"
            for i, c in enumerate(r)
        )
        + "</tr>"
        for r in rows
    )
    return f"<table><tr>{th}</tr>{body}</table>"


def _md_table(head: list[str], rows: list[list[str]]) -> str:
    def cell(c) -> str:
        return str(c).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(map(cell, head)) + " |", "|" + "---|" * len(head)]
    return "\n".join(lines + ["| " + " | ".join(map(cell, r)) + " |" for r in rows])


def _mode_note(mode: str) -> str:
    if mode == "compile-only":
        return (
            "Compile-only run: there was no GPU, so candidates were compiled but never run, "
            "checked or timed. Only compile rates are reported; correctness and speedups "
            "were not measured."
        )
    if mode == "mixed":
        return "Mixed run: some samples were evaluated compile-only (no GPU); read with care."
    return ""


def _run_sections(s: dict) -> list[tuple[str, list[str], list[list[str]]]]:
    """(heading, header, rows) of every table of a run report, in order."""

    def metric_rows(es: list[dict]) -> list[list[str]]:
        return [
            [e["metric"], fmt_value(e["value"], e["kind"]), _ci(e), str(e["tasks"])] for e in es
        ]

    cols = ["metric", "value", "95% CI", "tasks"]
    out = [
        (
            "Summary: compilation and correctness",
            cols,
            metric_rows([e for e in s["metrics"] if not e.get("baseline")]),
        )
    ]
    for b, label in s["baselines"].items():
        es = [e for e in s["metrics"] if e.get("baseline") == b]
        if es:
            out.append((f"Speed vs {label} (baseline '{b}')", cols, metric_rows(es)))
    if s["per_turn"]:
        names = [e["metric"].rsplit(" by turn", 1)[0] for e in s["per_turn"][0]["metrics"]]
        out.append(
            (
                "Per-turn best-so-far",
                ["turn", *names],
                [
                    [str(t["turn"])]
                    + [f"{fmt_value(e['value'], e['kind'])} {_ci(e)}" for e in t["metrics"]]
                    for t in s["per_turn"]
                ],
            )
        )
    prim = s.get("primary_baseline")
    for key, groups in s["groups"].items():
        if not groups:
            continue
        names = [e["metric"] for e in groups[0]["metrics"]]
        vs = prim and s["mode"] != "compile-only"
        title = f"By {key}" + (f" (speedups vs {s['baselines'][prim]})" if vs else "")
        out.append(
            (
                title,
                [key, "tasks", *names],
                [
                    [g["group"], str(g["tasks"])]
                    + [f"{fmt_value(e['value'], e['kind'])} {_ci(e)}" for e in g["metrics"]]
                    for g in groups
                ],
            )
        )
    rj = s["rejected"]
    watch = (
        f"{100 * rj['share']:.1f}% of evaluated samples rejected"
        if s["mode"] != "compile-only"
        else "not checked (compile-only: nothing ran, so no run-time check fired)"
    )
    out.append(
        (
            f"Reward-hacking watch: {watch}",
            ["check that fired", "samples"],
            [[k, str(v)] for k, v in rj["reasons"].items()] or [["(none)", "0"]],
        )
    )
    defs = [[e["metric"], e["doc"]] for e in s["metrics"]]
    if s["per_turn"]:
        for e in s["per_turn"][0]["metrics"]:
            doc = e["doc"].replace("1..1", "1..t").replace("by turn 1", "by turn t")
            defs.append([e["metric"].replace(" by turn 1", " by turn t"), doc])
    out.append(
        (
            "Definitions (intervals: 95% cluster-robust t intervals, families as clusters; "
            "one-sided bounds and n/a where no two-sided interval exists)",
            ["metric", "formula"],
            defs,
        )
    )
    out.append(
        (
            "Statuses (all samples, all turns)",
            ["status", "samples"],
            [[k, str(v)] for k, v in s["statuses"].items()],
        )
    )
    return out


def _opt(v) -> str:
    return "none (all tasks)" if v is None else str(v)


def _find(s: dict, prefix: str) -> dict | None:
    return next((e for e in s["metrics"] if e["metric"].startswith(prefix)), None)


def headline(s: dict) -> list[str]:
    """The first screen: how often correct, how fast, against what, how sure."""
    t = s["tasks"]
    sure = (
        f"{t['finished']} tasks in {t['families']} families; 95% intervals over families "
        "(fewer families, wider intervals; n/a where none can be given)"
    )
    if s["mode"] == "compile-only":
        e = _find(s, "compile rate")
        return [
            f"Compiles: {_val(e)} of turn-1 samples. Nothing was run: no correctness or "
            "speed was measured (no GPU).",
            sure,
        ]
    out = []
    c1, cb = _find(s, "correct rate (turn 1)"), _find(s, "correct, best")
    if c1:
        out.append(
            f"Correct: {_val(c1)} of turn-1 samples"
            + (f"; {_val(cb)} of tasks with a correct sample ({cb['metric']})" if cb else "")
        )
    prim = s.get("primary_baseline")
    if prim:
        f1 = _find(s, f"fast_1 vs {prim} (best")
        geo = _find(s, f"geomean speedup vs {prim}, correct")
        parts = []
        if f1:
            parts.append(f"{_val(f1)} of tasks beat it ({f1['metric']})")
        if geo and geo["value"] is None:  # read "run n/a n/a (no task takes part) its speed"
            parts.append("no turn-1 sample was correct, so none was timed against it")
        elif geo:
            parts.append(f"correct turn-1 samples run {_val(geo)} its speed (geomean)")
        out.append(f"Fast, against {s['baselines'][prim]}: " + "; ".join(parts))
    return [*out, sure]


def _val(e: dict | None) -> str:
    return "n/a" if e is None else f"{fmt_value(e['value'], e['kind'])} {_ci(e)}"


def sampling_text(info: dict, model: str) -> str:
    """How a run's replies were drawn, from run.json's `sampling`: "scripted replay" for a
    scripted model, "not recorded" for a run.json written before it was."""
    if model.startswith("scripted:"):
        return "scripted replay"
    sp = info.get("sampling")
    if not isinstance(sp, dict):
        return "not recorded (run.json predates it)"
    parts = [f"temperature {sp.get('temperature')}", f"at most {sp.get('max_tokens')} tokens"]
    parts += [f"{k.replace('_', ' ')} {sp[k]}" for k in sorted(sp) if k not in _SAMPLED and sp[k]]
    return ", ".join(parts)


_SAMPLED = ("temperature", "max_tokens")  # sampling_text's first two parts


def turns_from_text(tf: dict | None) -> str:
    """The header line of a run that began from another's turns (`bench run --turns-from`;
    "" for one that did not)."""
    if not isinstance(tf, dict) or not tf.get("run"):
        return ""
    k = tf.get("turns", "?")
    turns = "turn 1" if k == 1 else f"turns 1-{k}"
    return (
        f"first turns: {tf.get('tasks', '?')} task(s) begin with the {turns} recorded by "
        f"{tf['run']} (started {tf.get('started') or '?'}); those turns' time is that run's"
    )


def _header(s: dict) -> tuple[str, list[str]]:
    st = s["settings"]
    facts = [
        f"model: {st['model']}" + (f" + adapter {st['adapter']}" if st.get("adapter") else ""),
        f"suite: {s['info'].get('suite_label', st['suite'])} ({s['info'].get('source', '')})",
        f"tasks: {s['tasks']['finished']} finished of {s['tasks']['selected']} selected, "
        f"{s['tasks']['families']} families; {st['samples']} samples x {st['turns']} turn(s); "
        f"{s['samples_evaluated']} samples evaluated",
        f"subset: seed {st['seed']}, limit {_opt(st['limit'])}, per family "
        f"{_opt(st['tasks_per_family'])}",
        f"evaluator: {s['mode']}; GPU {s['info'].get('gpu') or 'none'}; started "
        f"{s['info'].get('started', '?')}",
        f"sampling: {sampling_text(s['info'], st['model'])}",
    ]
    if line := fmt_time(s.get("time") or {}):
        facts.append(line)
    if s.get("hosts") and (line := host_note(s["hosts"], s["baselines"])):
        facts.append(line)
    if line := turns_from_text(s["info"].get("turns_from")):
        facts.append(line)
    if s["info"].get("left_out"):
        facts.append(f"left out: {s['info']['left_out']}")
    if s.get("baselines_absent"):
        facts.append(absent_text(s["baselines_absent"]))
    facts += left_out_text(s.get("left_out", {}), s["baselines"])
    return s["title"], facts


def left_out_text(lo: dict, labels: dict[str, str]) -> list[str]:
    """The header lines naming what the metrics leave out as the harness's failures."""
    out = []
    if lo.get("infra_error_samples"):
        out.append(
            f"infra errors: {lo['infra_error_samples']} sample(s) failed in the "
            "evaluator, not the model; left out of every rate"
            + (
                f" ({lo['infra_error_tasks']} task(s) with no other sample left out entirely)"
                if lo.get("infra_error_tasks")
                else ""
            )
        )
    for b, n in lo.get("baseline_unmeasured", {}).items():
        out.append(
            f"baseline not measured: {labels.get(b, b)} could not be timed for {n} "
            "task(s); they are left out of its speed metrics"
        )
    return out


def absent_text(absent: dict[str, str]) -> str:
    """The report line naming the baselines without speedups and why."""
    return "baselines absent: " + "; ".join(
        f"{BASELINE_LABELS[b]} ({why})" for b, why in absent.items()
    )


def _b64(png: bytes) -> str:
    return base64.b64encode(png).decode()


def _page(title, facts, note, sections, figs, extra_html="", top=(), plots_after=0) -> str:
    parts = [f"<h1>{_esc(title)}</h1>"]
    if top:
        parts.append(
            '<div class="head">' + "".join(f"<p><b>{_esc(x)}</b></p>" for x in top) + "</div>"
        )
    if note:
        parts.append(f'<div class="banner">{_esc(note)}</div>')
    parts.append("<ul>" + "".join(f"<li>{_esc(f)}</li>" for f in facts) + "</ul>")
    for i, (head, cols, rows) in enumerate(sections):
        nums = set(range(1, len(cols)))
        parts.append(f"<h2>{_esc(head)}</h2>" + _table(cols, rows, nums))
        if i == plots_after:  # the plots after the correctness and speed tables
            parts += [
                f'<h2>{_esc(cap)}</h2><img alt="{_esc(cap)}" '
                f'src="data:image/png;base64,{_b64(png)}">'
                for cap, png in figs.items()
            ]
    if not have_matplotlib():
        parts.append("<p>Plots left out: matplotlib is not installed here.</p>")
    parts.append(extra_html)
    return (
        f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{_esc(title)}</title>'
        f"<style>{_CSS}</style></head><body>{''.join(parts)}</body></html>"
    )


def _slug(caption: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", caption.lower()).strip("_")[:60]


def _write(folder: Path, page: str, md: list[str], figs: dict[str, bytes], data: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "figures").mkdir(exist_ok=True)
    for cap, png in figs.items():
        name = f"figures/{_slug(cap)}.png"
        (folder / name).write_bytes(png)
        md.append(f"### {cap}\n\n![{cap}]({name})\n")
    (folder / "report.md").write_text("\n".join(md), encoding="utf-8")
    (folder / "summary.json").write_text(json.dumps(data, indent=1, default=str), "utf-8")
    out = folder / "report.html"
    out.write_text(page, encoding="utf-8")
    return out


def _failures_html(s: dict) -> tuple[str, list[str]]:
    if not s["failures"]:
        return "", []
    h = ["<h2>Worst failures (one per task) with their feedback</h2>"]
    md = ["## Worst failures (one per task) with their feedback\n"]
    for f in s["failures"]:
        head = f"{f['task']} - turn {f['turn']}, sample {f['sample']}: {f['status']}"
        if f["findings"]:
            head += f" ({', '.join(f['findings'])})"
        h.append(
            f"<h3>{_esc(head)}</h3><pre>{_esc(f['feedback'] or '(no feedback)')}</pre>"
            f"<details><summary>the reply</summary><pre>{_esc(f.get('reply', ''))}</pre>"
            "</details>"
        )
        md.append(f"### {head}\n\n```\n{f['feedback'] or '(no feedback)'}\n```\n")
    return "".join(h), md


def write_run_report(s: dict, folder: str | Path) -> Path:
    """report.html / report.md / summary.json / figures of one run's `summarize` dict."""
    title, facts = _header(s)
    note = _mode_note(s["mode"])
    sections = _run_sections(s)
    figs = run_figures(s)
    fail_html, fail_md = _failures_html(s)
    top = headline(s)
    md = [f"# {title}\n", *[f"**{x}**\n" for x in top]]
    if note:
        md.append(f"> **{note}**\n")
    md += [*[f"- {f}" for f in facts], ""]
    md += [f"## {h}\n\n{_md_table(c, r)}\n" for h, c, r in sections] + fail_md
    speed = sum(h.startswith(("Summary", "Speed vs")) for h, _, _ in sections) - 1
    page = _page(title, facts, note, sections, figs, fail_html, top, max(speed, 0))
    return _write(Path(folder), page, md, figs, s)


def _family_sections(c: dict) -> list[tuple[str, list[str], list[list[str]]]]:
    """One table per metric of `c["by_family"]`: a row per family, each run's value [95% CI]
    and each later run's paired difference against the first."""
    fams = c.get("by_family", [])
    if not fams:
        return []
    names = c["names"]
    prim = c.get("primary_baseline")
    vs = f" (baseline: {c['baselines'][prim]})" if prim and c["mode"] == "full" else ""
    out = []
    for k, m0 in enumerate(fams[0]["metrics"]):
        head = [
            "family",
            "tasks",
            *[f"{n} [95% CI]" for n in names],
            *[f"{n} vs {names[0]} (paired) [95% CI]" for n in names[1:]],
        ]
        rows = []
        for f in fams:
            e = f["metrics"][k]
            notes = e.get("ci_notes") or [""] * len(e["cis"])
            cells = [
                f"{fmt_value(v, e['kind'])} {fmt_ci(ci, n, e['kind'])}"
                for v, ci, n in zip(e["values"], e["cis"], notes, strict=True)
            ]
            rows.append(
                [
                    f["family"],
                    str(f["tasks"]),
                    *cells,
                    *[paired_text(d, e["kind"]) for d in e["diffs"]],
                ]
            )
        named = vs if prim and f"vs {prim}" in m0["metric"] else ""
        out.append((f"By family: {m0['metric']}{named}", head, rows))
    return out


def write_compare_report(c: dict, folder: str | Path) -> Path:
    """The same files for a `compare` dict: metrics side by side, paired differences."""
    names = c["names"]
    base = "; ".join(f"{k} = {v}" for k, v in c["baselines"].items()) or "none"
    head = ["metric", *names, *[f"{n} vs {names[0]} (paired) [95% CI]" for n in names[1:]]]
    rows = [
        [
            m["metric"],
            *[fmt_value(v, m["kind"]) for v in m["values"]],
            *[paired_text(d, m["kind"], c["tasks"]) for d in m["diffs"]],
        ]
        for m in c["metrics"]
    ]
    runs = ", ".join(
        f"{n} = {p} ({m})" for n, p, m in zip(names, c["runs"], c["models"], strict=True)
    )
    facts = [
        f"runs: {runs}",
        f"paired on {c['tasks']} tasks ({c['families']} families) that every run finished, "
        f"samples 0..{c['samples'] - 1}, turns 1..{c['turns']}; each difference is taken on "
        "the tasks where both runs have a value (a speedup of correct samples: the tasks "
        "correct in both), counted where fewer",
        f"speedup baselines: {base}",
        f"evaluator: {c['mode']}",
        "sampling: "
        + "; ".join(
            f"{n} {sampling_text(i, m)}"
            for n, i, m in zip(names, c["infos"], c["models"], strict=True)
        ),
    ]
    if c.get("baselines_absent"):
        facts.append(absent_text(c["baselines_absent"]))
    diffs = c.get("setup_differences") or []
    note = _mode_note(c["mode"] if c["mode"] != "full" else "")
    if diffs:  # compared anyway (--allow-setup-mismatch): say so first
        note = (
            f"the runs were measured differently ({len(diffs)} difference(s): "
            + "; ".join(diffs[:3])
            + "): differences may be the setup's"
            + ". "
            + note
        )
    if c.get("hosts_note"):
        note = f"{c['hosts_note']}. {note}".strip()
    sections = [
        ("Side by side: paired differences (rates, in points) and ratios (speedups)", head, rows),
        *_family_sections(c),
    ]
    figs = compare_figures(c)
    md = [f"# {c['title']}\n", *[f"- {f}" for f in facts], ""]
    if note:
        md.append(f"> **{note}**\n")
    md += [f"## {h}\n\n{_md_table(cols, r)}\n" for h, cols, r in sections]
    return _write(Path(folder), _page(c["title"], facts, note, sections, figs), md, figs, c)


def paired_text(d: dict, kind: str, of: int | None = None) -> str:
    """A paired difference: rate metrics in percentage points, speedups as a ratio; with
    "(on N tasks)" when it was taken on fewer than the `of` tasks compared."""
    v, ci, note = d["diff"], d["ci"], d.get("ci_note", "")
    if v is None:
        return "n/a"
    none = f"n/a ({note})" if note else "n/a"
    on = f" (on {d['tasks']} tasks)" if of is not None and d.get("tasks", of) < of else ""
    if kind == "rate":
        return (
            f"{100 * v:+.1f} pts "
            + (f"[{100 * ci[0]:+.1f}, {100 * ci[1]:+.1f}]" if ci else none)
            + on
        )
    return f"x{v:.2f} " + (f"[x{ci[0]:.2f}, x{ci[1]:.2f}]" if ci else none) + on
