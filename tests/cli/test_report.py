"""`cudaperf report`: only evaluation results are reported, and a compile-only run does not
read as measured."""

from __future__ import annotations

import json

from tests.cli.helpers import cli, user_error
from tests.tasks.helpers import C_TASK


def _row(**kw):
    return {"task_id": "t", "candidate_hash": "h", "candidate_id": "a", "status": "compiled",
            "mode": "compile-only", **kw}  # fmt: skip


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
