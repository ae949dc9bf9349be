"""The HTML report renders in a real headless browser (Chromium), and its Markdown twin."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import numpy as np
import pytest

from cudaperf.report.render import paired_text, write_compare_report, write_run_report
from cudaperf.report.rows import task_meta
from cudaperf.report.run import BenchSettings, make_bench_backend, read_run, run_bench
from cudaperf.report.summary import compare, summarize
from cudaperf.reward import RewardScorer
from cudaperf.tasks.io import load_sample

from .helpers import stored_evaluator

TASKS = load_sample()[:6]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


class HalfBroken:
    """Each task's best implementation, and a reply that does not compile."""

    def __init__(self, tasks):
        self.best = make_bench_backend("scripted:best", tasks)
        self.name = "half-broken"

    def generate_batch(self, convs, n):
        return [[self.best.generate(m, 1)[0], "```cuda\nbroken(\n```"][:n] for m in convs]


def _run(tmp_path, name, backend):
    st = BenchSettings(model=backend.name, suite="sample", samples=2, turns=2)
    meta = {t.id: task_meta(t, "sample") for t in TASKS}
    sc = RewardScorer(
        TASKS, evaluator=stored_evaluator([]), analyzer=lambda c: [], analyze="always"
    )
    run_bench(st, TASKS, meta, tmp_path / name, backend, sc)
    return read_run(tmp_path / name)


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("reports")
    a = _run(tmp, "naive", make_bench_backend("scripted:naive", TASKS))
    b = _run(tmp, "mixed", HalfBroken(TASKS))
    run_html = write_run_report(summarize(b), b.path)
    cmp_html = write_compare_report(compare([a, b]), tmp / "cmp")
    return run_html, cmp_html


def _chromium(tmp_path, html, *args) -> subprocess.CompletedProcess:
    cmd = [CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", *args, html.as_uri()]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True)


def test_reports_are_self_contained(reports):
    for html in reports:
        text = html.read_text()
        assert not re.search(r"""(src|href)=["']?(https?:|//|file:)""", text)
        assert text.count("data:image/png;base64,") >= 2
        md = (html.parent / "report.md").read_text()
        assert md.count("](figures/") >= 2 and "| metric |" in md


def test_compare_report_has_the_per_family_tables_and_dot_plot(reports):
    text, md = reports[1].read_text(), (reports[1].parent / "report.md").read_text()
    for doc in (text, md):
        assert "By family: correct rate (turn 1)" in doc
        assert "By family: geomean speedup vs naive, all tasks" in doc
    assert "Per family, each run with its 95% interval" in text
    assert list((reports[1].parent / "figures").glob("per_family_each_run*.png"))
    assert md.count("| " + TASKS[0].family + " | 1 |") == 3  # a row in each of the 3 tables


def test_a_paired_difference_on_fewer_tasks_than_compared_says_on_how_many(reports):
    d = {"diff": 0.99, "ci": [0.87, 1.13], "tasks": 45}
    assert paired_text(d, "speedup", 60) == "x0.99 [x0.87, x1.13] (on 45 tasks)"
    assert paired_text(d | {"tasks": 60}, "speedup", 60) == "x0.99 [x0.87, x1.13]"
    rate = {"diff": 0.05, "ci": [-0.01, 0.1], "tasks": 3}
    assert paired_text(rate, "rate", 4) == "+5.0 pts [-1.0, +10.0] (on 3 tasks)"
    c = json.loads((reports[1].parent / "summary.json").read_text())
    assert all(0 < d["tasks"] <= c["tasks"] for m in c["metrics"] for d in m["diffs"])
    assert "the tasks where both runs have a value" in reports[1].read_text()


def test_run_report_names_baselines_and_shows_failures_with_feedback(reports):
    text = reports[0].read_text()
    assert "Speed vs the task&#x27;s naive CUDA kernel (baseline &#x27;naive&#x27;)" in text
    assert "Worst failures" in text and "compile_error" in text
    assert "Reward-hacking watch" in text


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed: apt-get install chromium")
def test_the_html_renders_in_headless_chromium(reports, tmp_path):
    from matplotlib.image import imread

    for i, html in enumerate(reports):
        png = tmp_path / f"shot{i}.png"
        _chromium(tmp_path, html, f"--screenshot={png}", "--window-size=1200,2000")
        assert png.is_file() and png.stat().st_size > 10_000
        pixels = imread(png)[..., :3]
        assert pixels.shape[:2] == (2000, 1200) and float(np.var(pixels)) > 0.005  # not blank
        dom = _chromium(tmp_path, html, "--dump-dom").stdout
        assert re.search(r"<td>compile rate \(turn 1\)</td>", dom)
        assert len(re.findall(r"<tr>", dom)) > 10 and "<img" in dom


def test_without_matplotlib_the_tables_are_still_written(tmp_path, monkeypatch):
    import cudaperf.report.figures as figures
    import cudaperf.report.render as render

    run = _run(tmp_path, "naive", make_bench_backend("scripted:naive", TASKS))
    monkeypatch.setattr(figures, "have_matplotlib", lambda: False)
    monkeypatch.setattr(render, "have_matplotlib", lambda: False)
    html = write_run_report(summarize(run), tmp_path / "out").read_text()
    assert "Plots left out: matplotlib is not installed" in html and "<img" not in html
    assert "<td>compile rate (turn 1)</td>" in html


def test_the_first_screen_answers_correct_fast_against_what_and_how_sure(reports):
    text = reports[0].read_text()
    head = text[: text.index("<h2>")]  # before the first table
    assert "Correct: " in head and "of turn-1 samples" in head
    assert "Fast, against the task&#x27;s naive CUDA kernel" in head
    assert "families; 95% intervals over families" in head
    assert "limit none (all tasks)" in text and "limit None" not in text
    split = r"evaluator \d+%, analysis \d+%, ranker \d+%"  # the scorer's clocks
    assert re.search(
        rf"time: \d+ s in 1 chunk\(s\) \(generation \d+%, scoring \d+%: {split}\)", text
    )
    speed, plot = text.index("<h2>Speed vs"), text.index("data:image/png")
    assert speed < plot  # the speed results come before the plots


def test_compile_only_reports_do_not_claim_a_rejected_share():
    from cudaperf.report.render import _run_sections, headline

    s = {
        "mode": "compile-only",
        "rejected": {"share": 0.0, "reasons": {}},
        "metrics": [
            {
                "metric": "compile rate (turn 1)",
                "value": 0.5,
                "ci": None,
                "ci_note": "one family: no interval",
                "kind": "rate",
                "tasks": 2,
                "doc": "",
                "baseline": "",
            }
        ],
        "baselines": {},
        "per_turn": [],
        "groups": {},
        "statuses": {},
        "tasks": {"finished": 2, "families": 1},
    }
    heads = [h for h, _, _ in _run_sections(s)]
    assert not any("0.0% of evaluated samples rejected" in h for h in heads)
    assert any("not checked (compile-only" in h for h in heads)
    assert headline(s)[0].startswith("Compiles: 50.0% n/a (one family: no interval)")


def test_the_headline_says_plainly_when_no_correct_sample_was_timed():
    """It read "correct turn-1 samples run n/a n/a (no task takes part) its speed"."""
    from cudaperf.report.render import headline

    def entry(metric, value, kind="rate", note=""):
        ci = None if value is None or note else [value, value + 0.1]
        return {"metric": metric, "value": value, "ci": ci, "ci_note": note, "kind": kind}

    s = {
        "mode": "full",
        "primary_baseline": "naive",
        "baselines": {"naive": "the task's naive CUDA kernel"},
        "tasks": {"finished": 6, "families": 3},
        "metrics": [
            entry("correct rate (turn 1)", 0.0, note="one-sided"),
            entry("fast_1 vs naive (best of 4x1)", 0.0, note="one-sided"),
            entry("geomean speedup vs naive, correct turn-1 samples", None, "speedup"),
        ],
    }
    fast = headline(s)[1]
    assert "no turn-1 sample was correct, so none was timed against it" in fast
    assert "n/a n/a" not in fast
    s["metrics"][2] = entry("geomean speedup vs naive, correct turn-1 samples", 1.5, "speedup")
    assert "correct turn-1 samples run 1.50x [1.50x, 1.60x] its speed" in headline(s)[1]


def test_reports_say_how_replies_were_sampled(tmp_path):
    import dataclasses

    a = _run(tmp_path, "naive", make_bench_backend("scripted:naive", TASKS))
    b = _run(tmp_path, "mixed", HalfBroken(TASKS))
    assert (
        "sampling: not recorded (run.json predates it)"
        in write_run_report(summarize(b), tmp_path / "old").read_text()
    )
    sampled = {"temperature": 0.8, "max_tokens": 1024, "generation": "dynamic", "gguf_file": None}
    b = dataclasses.replace(b, info={**b.info, "sampling": sampled})
    text = write_run_report(summarize(b), tmp_path / "new").read_text()
    assert "sampling: temperature 0.8, at most 1024 tokens, generation dynamic</li>" in text
    text = write_compare_report(compare([a, b]), tmp_path / "cmp").read_text()
    assert "sampling: naive scripted replay; mixed temperature 0.8, at most 1024 tokens" in text
