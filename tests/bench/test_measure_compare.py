import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import measure_compare  # noqa: E402


def _row(task, impl, status, t):
    return {
        "task_id": task,
        "candidate_id": impl,
        "status": status,
        "configs": [{"config": "default", "timing": {"median_us": t}}],
    }


def test_statuses_that_differ_and_time_ratios_are_reported(tmp_path):
    a = [_row("t1", "i1", "ok", 10.0), _row("t1", "i2", "ok", 20.0), _row("t2", "i1", "ok", 5.0)]
    b = [_row("t1", "i1", "ok", 11.0), _row("t1", "i2", "wrong_output", 20.0)]
    for name, rows in (("after", a), ("before", b)):
        (tmp_path / f"measure_{name}.jsonl").write_text(
            "\n".join(json.dumps(r) for r in rows) + "\n{cut"
        )
    assert measure_compare.main([str(tmp_path)]) == 0
    c = json.loads((tmp_path / "compare.json").read_text())["comparisons"]["after vs before"]
    assert c["pairs"] == 2 and c["only_a"] == 1
    assert c["status_differs"] == [{"task": "t1", "impl": "i2", "a": "ok", "b": "wrong_output"}]
    assert c["timed_configs"] == 2 and c["time_ratio_median"] == 1.05


def test_one_run_is_one_clear_error(tmp_path, capsys):
    (tmp_path / "measure_after.jsonl").write_text("")
    assert measure_compare.main([str(tmp_path)]) == 2
    assert "need two" in capsys.readouterr().err


def test_each_task_kind_is_compared_on_its_own_and_a_warm_run_is_left_out(tmp_path):
    c_id, t_id = "gen/c2cuda/vec_add/00001", "gen/torch2cuda/torch_softmax/00002"
    runs = {"warm": (1.0, 1.0), "after": (10.0, 100.0), "before": (10.0, 120.0)}
    for name, (tc, tt) in runs.items():
        rows = [_row(c_id, "i", "ok", tc), _row(t_id, "i", "ok", tt)]
        (tmp_path / f"measure_{name}.jsonl").write_text("\n".join(map(json.dumps, rows)) + "\n")
    assert measure_compare.main([str(tmp_path)]) == 0
    out = json.loads((tmp_path / "compare.json").read_text())
    assert set(out["comparisons"]) == {"after vs before"}
    kinds = out["comparisons"]["after vs before"]["by_kind"]
    assert kinds["c2cuda"]["time_ratio_median"] == 1.0
    assert kinds["torch2cuda"]["time_ratio_median"] == 1.2
