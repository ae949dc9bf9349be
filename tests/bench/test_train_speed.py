"""bench/train_speed.py's summary (steady state from repeats >= 1, errors kept) and
bench/train_eval_speed.py's candidates (never a task's naive implementation)."""

from __future__ import annotations

from tests.script_helpers import load_script


def _run(mode, batch, rep, tps, secs, error=None):
    return {
        "mode": mode,
        "batch": batch,
        "repeat": rep,
        "tokens_per_s": tps,
        "seconds": secs,
        "error": error,
    }


def test_summary_reports_the_steady_state_and_the_first_run_apart():
    m = load_script("bench/train_speed.py")
    rows = [
        _run("compile", 8, 0, 10.0, 90.0),
        _run("compile", 8, 1, 400.0, 2.0),
        _run("compile", 8, 2, 600.0, 1.5),
        _run("dynamic", 8, 0, 100.0, 8.0),
    ]
    s = m.summarise(rows)
    assert s["compile@8"]["tokens_per_s"] == 500.0  # the compile run is not averaged in
    assert s["compile@8"]["first_run_s"] == 90.0
    assert s["dynamic@8"]["tokens_per_s"] == 100.0  # only repeat 0: it is what there is


def test_summary_keeps_a_failed_mode_with_its_error():
    m = load_script("bench/train_speed.py")
    s = m.summarise([_run("continuous", 16, 0, None, None, error="RuntimeError: no paged")])
    assert s["continuous@16"]["tokens_per_s"] is None
    assert s["continuous@16"]["error"] == "RuntimeError: no paged"


def test_eval_speed_candidates_are_never_the_naive_implementation():
    from cudaperf.execute.api import naive_implementation
    from cudaperf.tasks.io import load_sample

    m = load_script("bench/train_eval_speed.py")
    tasks = [t for t in load_sample() if naive_implementation(t) is not None]
    assert tasks
    for pick in (0, 1):
        got = m.candidates(tasks, pick)
        assert got and all(c != naive_implementation(t).code for t, c in got)
    a, b = dict((t.id, c) for t, c in m.candidates(tasks, 0)), m.candidates(tasks, 1)
    assert any(a[t.id] != c for t, c in b)  # batch B holds other kernels than batch A
