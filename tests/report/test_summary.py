"""The per-family side-by-side of a comparison, on hand-made runs whose numbers are worked out
by hand below."""

from __future__ import annotations

import math

import pytest

from cudaperf.report.figures import family_dots
from cudaperf.report.metrics import FAIL_FLOOR as FAIL
from cudaperf.report.render import _family_sections
from cudaperf.report.summary import family_metrics, family_table

from .helpers import meta, row, views

# Family F: tasks a1, a2; family G: task g1. 2 samples, 1 turn, speedups vs naive.
#            a1                 a2                  g1
# run A:  ok 2x, compile err   2 compile errors    ok 4x, ok 4x
# run B:  ok 2x, ok 8x         ok 0.5x, compile    ok 4x, wrong output
METAS = [meta("a1", "F"), meta("a2", "F"), meta("g1", "G")]
A = [
    row("a1", 1, 0, family="F", naive=2.0),
    row("a1", 1, 1, "compile_error", family="F"),
    row("a2", 1, 0, "compile_error", family="F"),
    row("a2", 1, 1, "compile_error", family="F"),
    row("g1", 1, 0, family="G", naive=4.0),
    row("g1", 1, 1, family="G", naive=4.0),
]
B = [
    row("a1", 1, 0, family="F", naive=2.0),
    row("a1", 1, 1, family="F", naive=8.0),
    row("a2", 1, 0, family="F", naive=0.5),
    row("a2", 1, 1, "compile_error", family="F"),
    row("g1", 1, 0, family="G", naive=4.0),
    row("g1", 1, 1, "wrong_output", family="G"),
]
MS = family_metrics(2, 1, "naive", "full")
GEO = "geomean speedup vs naive, all tasks (best of 2x1; failure = 0.1x floor)"


@pytest.fixture(scope="module")
def table():
    t = family_table([views(A, METAS), views(B, METAS)], MS)
    return {f["family"]: {m["metric"]: m for m in f["metrics"]} for f in t}, t


def test_the_columns_are_correct_rate_fast_1_and_geomean_against_the_primary_baseline():
    assert [m.name for m in MS] == [
        "correct rate (turn 1)",
        "fast_1 vs naive (best of 2x1)",
        "geomean speedup vs naive, all tasks (best of 2x1; failure = 0.1x floor)",
    ]
    assert [m.name for m in family_metrics(2, 1, "naive", "compile-only")] == [
        "compile rate (turn 1)"
    ]


def test_correct_rate_per_family_with_task_intervals_and_paired_difference(table):
    by, rows = table
    assert [(f["family"], f["tasks"]) for f in rows] == [("F", 2), ("G", 1)]
    c = by["F"]["correct rate (turn 1)"]
    assert c["values"] == [0.25, 0.75]  # A: (1/2 + 0)/2; B: (1 + 1/2)/2
    # two tasks: a t interval on 1 degree of freedom spans almost everything, as it should
    assert all(lo < 0.01 and hi > 0.99 for lo, hi in c["cis"]) and c["ci_notes"] == ["", ""]
    # each task gains exactly 0.5 in B: no interval (never the zero-width [0.5, 0.5])
    assert c["diffs"] == [{"diff": 0.5, "ci": None, "ci_note": "the same difference in every task"}]
    g = by["G"]["correct rate (turn 1)"]  # one task: no interval, and the note says so
    assert g["values"] == [1.0, 0.5] and g["cis"] == [None, None]
    assert g["ci_notes"] == ["one task: no interval"] * 2
    assert g["diffs"] == [{"diff": -0.5, "ci": None, "ci_note": "one task: no interval"}]


def test_fast_1_and_geomean_per_family(table):
    by, _ = table
    f1 = by["F"]["fast_1 vs naive (best of 2x1)"]
    assert f1["values"] == [0.5, 0.5] and f1["diffs"][0]["diff"] == 0.0
    assert f1["diffs"][0]["ci"] is None
    geo = by["F"][GEO]
    # A: best 2x and a failure -> sqrt(2 * floor); B: best 8x and 0.5x -> sqrt(4) = 2
    assert geo["values"] == pytest.approx([math.sqrt(2 * FAIL), 2.0])
    # paired ratio B/A = 2/sqrt(2 * floor); per-task ratios 4 (a1) and 0.5/floor (a2): a
    # log-symmetric interval around it
    d = geo["diffs"][0]
    assert d["diff"] == pytest.approx(2 / math.sqrt(2 * FAIL))
    assert d["ci"][0] < d["diff"] < d["ci"][1]
    assert d["ci"][0] * d["ci"][1] == pytest.approx(d["diff"] ** 2)
    g = by["G"][GEO]
    assert g["values"] == pytest.approx([4.0, 4.0]) and g["diffs"][0]["diff"] == pytest.approx(1)


def test_the_tables_and_the_dot_plot_show_every_family(table):
    _, rows = table
    c = {
        "by_family": rows,
        "names": ["A", "B"],
        "primary_baseline": "naive",
        "mode": "full",
        "baselines": {"naive": "the task's naive CUDA kernel"},
    }
    secs = _family_sections(c)
    assert [h for h, _, _ in secs] == [
        "By family: correct rate (turn 1)",
        "By family: fast_1 vs naive (best of 2x1) (baseline: the task's naive CUDA kernel)",
        "By family: geomean speedup vs naive, all tasks (best of 2x1; failure = 0.1x floor) "
        "(baseline: the task's naive CUDA kernel)",
    ]
    head, body = secs[0][1], secs[0][2]
    assert head == ["family", "tasks", "A [95% CI]", "B [95% CI]", "B vs A (paired) [95% CI]"]
    assert body[0] == [
        "F",
        "2",
        "25.0% [0.0%, 100.0%]",
        "75.0% [0.0%, 100.0%]",
        "+50.0 pts n/a (the same difference in every task)",
    ]
    assert body[1][2] == "100.0% n/a (one task: no interval)"  # not [100.0%, 100.0%]
    assert secs[2][2][1][4] == "x1.00 n/a (one task: no interval)"
    pytest.importorskip("matplotlib")
    png = family_dots(c)
    assert png is not None and png.startswith(b"\x89PNG")
    assert family_dots({**c, "by_family": []}) is None
