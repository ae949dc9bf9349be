"""`cudaperf report`: only evaluation results are reported, and a compile-only run does not
read as measured."""

from __future__ import annotations

import json

from tests.cli.helpers import cli, user_error
from tests.tasks.helpers import C_TASK


def _row(**kw):
    return {
        "task_id": "t",
        "candidate_hash": "h",
        "candidate_id": "a",
        "status": "compiled",
        "mode": "compile-only",
        **kw,
    }


def test_files_that_are_not_eval_results_are_refused(tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps(C_TASK) + "\n")
    user_error(cli("report", tasks), "tasks.jsonl:1 is not an evaluation result", code=2)
    traj = tmp_path / "traj.jsonl"
    traj.write_text(json.dumps({"type": "turn", "task_id": "t", "turn": 1}) + "\n")
    user_error(cli("report", traj), "is not an evaluation result (no 'status')", code=2)
    odd = tmp_path / "odd.jsonl"
    odd.write_text(json.dumps({"status": "great", "task_id": "t"}) + "\n")
    user_error(cli("report", odd), "status 'great'", code=2)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    user_error(cli("report", empty), "holds no results", code=2)
    garbage = tmp_path / "g.jsonl"
    garbage.write_bytes(b"\x89PNG\r\n")
    user_error(cli("report", garbage), "not UTF-8", code=2)
    user_error(cli("report", tmp_path / "none.jsonl"), "does not exist", code=2)


def test_compile_only_results_are_not_shown_as_measured(tmp_path):
    res = tmp_path / "r.jsonl"
    res.write_text(json.dumps(_row()) + "\n" + json.dumps(_row(candidate_id="b")) + "\n")
    r = cli("report", res)
    assert r.returncode == 0, r.stderr
    row = next(ln for ln in r.stdout.splitlines() if "correct_fraction" in ln)
    assert "not measured" in row and "0.000" not in row
    doc = json.loads(cli("report", res, "--json").stdout)
    assert doc["correct_fraction"] is None and doc["measured_results"] == 0


def test_a_result_field_of_the_wrong_type_is_named_not_a_traceback(tmp_path):
    res = tmp_path / "r.jsonl"
    res.write_text(json.dumps(_row()) + "\n" + json.dumps(_row(speedup_vs_cpu="fast")) + "\n")
    user_error(cli("report", res), "r.jsonl:2", "'speedup_vs_cpu'", "valid number", code=2)
    res.write_text(json.dumps(_row(configs=3)) + "\n")
    user_error(cli("report", res), "r.jsonl:1", "'configs' is not a list", code=2)
    res.write_text(json.dumps(_row(task_id=7)) + "\n")
    user_error(cli("tasks", "attach", res, "--out", tmp_path / "t.jsonl"), "'task_id'", code=2)


def test_gzipped_results_are_read_and_bad_gzip_is_one_line(tmp_path):
    import gzip

    gz = tmp_path / "results.jsonl.gz"
    gz.write_bytes(gzip.compress((json.dumps(_row()) + "\n").encode()))
    res = cli("report", gz, "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["measured_results"] == 0
    bad = tmp_path / "bad.jsonl.gz"
    bad.write_text("not gzip")
    user_error(cli("report", bad), "not a readable gzip file", code=2)


def test_eval_backend_ray_without_ray_is_one_line(monkeypatch):
    import sys

    import pytest

    from cudaperf.cli.common import UserError
    from cudaperf.cli.eval import _run

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    with pytest.raises(UserError, match=r"pip install 'cudaperf\[ray\]'"):
        _run([], None, None, "ray", None, False)


def test_bench_tables_keep_bracketed_intervals():
    from rich.console import Console

    import cudaperf.cli.bench as bench

    con = Console(record=True, width=200)
    s = {
        "title": "m on [s]",
        "mode": "full",
        "metrics": [
            {
                "metric": "geomean",
                "value": 1.5,
                "ci": [1.0, 2.45],
                "ci_note": "",
                "kind": "speedup",
                "tasks": 3,
            }
        ],
    }
    old, bench.stdout = bench.stdout, con
    try:
        bench._print_summary(s, "r.html")
    finally:
        bench.stdout = old
    t = bench.Table()
    t.add_column("paired")
    bench._row(t, "x1.41 [x0.50, x4.00]")  # compare's paired ratio, as paired_text writes it
    con.print(t)
    text = con.export_text()
    assert "[1.00x, 2.45x]" in text and "m on [s]" in text and "[x0.50, x4.00]" in text
