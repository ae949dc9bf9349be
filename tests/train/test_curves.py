from __future__ import annotations

import pytest

from cudaperf.train.curves import merge_rollouts, trained_steps


def test_rollouts_of_several_processes_merge_by_rows():
    a = {
        "rows": 4,
        "groups": 1,
        "generate_s": 2.0,
        "eval_s": 1.0,
        "prompt_tokens": 10,
        "completion_tokens": 5,
        "return_mean": 1.0,
        "status_share": {"ok": 1.0},
        "groups_2_correct": 1.0,
    }
    b = {
        "rows": 12,
        "groups": 3,
        "generate_s": 3.0,
        "eval_s": 0.5,
        "prompt_tokens": 30,
        "completion_tokens": 15,
        "return_mean": 0.0,
        "status_share": {"format_error": 1.0},
        "groups_2_correct": 0.0,
    }
    a["eval_phases_s"], b["eval_phases_s"] = {"call": 1.5, "compile": 2.0}, {"call": 0.25}
    m = merge_rollouts([a, b])
    assert m["rows"] == 16 and m["groups"] == 4 and m["processes"] == 2
    assert m["eval_phases_s"] == {"call": 1.75, "compile": 2.0}  # summed over processes
    assert m["generate_s"] == 3.0 and m["eval_s"] == 1.0 and m["completion_tokens"] == 20
    assert m["return_mean"] == pytest.approx(0.25)
    assert m["status_share"] == {"ok": 0.25, "format_error": 0.75}
    assert m["groups_2_correct"] == pytest.approx(0.25)


def test_a_merged_record_has_the_fields_of_a_one_process_record():
    a = {
        "kind": "rollout",
        "step": 4,
        "rows": 4,
        "groups": 1,
        "generate_s": 2.0,
        "analyse_s": 0.5,
        "eval_s": 1.0,
        "candidates": 4,
        "cached": 1,
        "evaluator_s": 0.9,
        "eval_wait_s": 0.0,
        "score_by_turn": [0.2, 0.4],
        "score_mean": 0.3,
        "tasks": ["a"],
        "canary": [{"task": "a", "config": "small", "median_us": 3.0}],
        "status_share": {"ok": 1.0},
        "groups_2_correct": 1.0,
    }
    b = {
        **a,
        "rows": 4,
        "candidates": 2,
        "cached": 0,
        "eval_wait_s": 0.7,
        "tasks": ["b"],
        "score_by_turn": [0.0, 0.2],
        "canary": [],
    }
    a["score_by_task"] = {"a": {"score": 0.5, "rows": 4}}
    b["score_by_task"] = {"a": {"score": -1.0, "rows": 2}, "b": {"score": None, "rows": 2}}
    one, two = merge_rollouts([a]), merge_rollouts([a, b])
    assert set(one) == set(two)
    assert one["processes"] == 1 and two["processes"] == 2 and two["step"] == 4
    assert two["candidates"] == 6 and two["cached"] == 1 and two["eval_wait_s"] == 0.7
    assert two["score_by_turn"] == [pytest.approx(0.1), pytest.approx(0.3)]
    assert two["tasks_by_process"] == [["a"], ["b"]] and len(two["canary"]) == 1
    assert two["score_by_task"] == {"a": {"score": 0.0, "rows": 6}, "b": {"score": None, "rows": 2}}
    assert "samples" not in two  # neither record had any
    got = merge_rollouts([{**a, "samples": [{"task": "a"}]}, {**b, "samples": [{"task": "b"}]}])
    assert got["samples"] == [{"task": "a"}, {"task": "b"}]
    assert {k: one[k] for k in ("rows", "candidates", "score_by_turn")} == {
        "rows": 4,
        "candidates": 4,
        "score_by_turn": [0.2, 0.4],
    }


def test_read_steps_numbers_rows_by_trainer_step_and_a_rerun_replaces_a_record(tmp_path):
    import json

    from cudaperf.train.curves import read_steps

    roll = {
        "kind": "rollout",
        "step": 0,
        "rows": 4,
        "processes": 1,
        "generate_s": 1.0,
        "analyse_s": 0.5,
        "eval_s": 1.5,
        "canary_s": 0.5,
        "return_mean": 0.1,
    }
    lines = [
        roll,
        {**roll, "return_mean": 0.7},  # the step's rollout again, after a resume
        {"kind": "step", "step": 1, "step_s": 5.0, "optimizer_s": 0.25},
    ]
    (tmp_path / "steps.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (row,) = read_steps(tmp_path)
    assert row["step"] == 1 and row["return_mean"] == 0.7 and "kind" not in row
    assert row["update_s"] == pytest.approx(5.0 - 3.5) and row["optimizer_s"] == 0.25


def test_the_summary_has_the_evaluators_mean_seconds_per_phase(tmp_path):
    """`summary` (train report): per run, the mean over the steps that logged them of the
    evaluator's seconds per phase; runs from before the phases were logged have none."""
    import json

    from cudaperf.train.curves import summary

    def run(folder, phases):
        folder.mkdir()
        lines = []
        for k, ph in enumerate(phases, 1):
            roll = {"kind": "rollout", "step": k - 1, "rows": 4, "processes": 1}
            lines += [roll | ({"eval_phases_s": ph} if ph else {}), {"kind": "step", "step": k}]
        (folder / "steps.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
        return folder

    new = run(tmp_path / "new", [{"call": 2.0, "time": 1.0}, {"call": 4.0}, None])
    old = run(tmp_path / "old", [None, None])
    rep = summary([new, old])
    assert rep[str(new)]["eval_phases_s_mean"] == {"call": 3.0, "time": 0.5}
    assert rep[str(old)]["eval_phases_s_mean"] == {}


def test_first_and_last_visits_of_each_task_are_paired():
    """A step's mean moves with which tasks it drew; pairing each task's first and last visit
    does not. Tasks seen once, or never scored, are left out."""
    from cudaperf.train.curves import first_last_by_task

    rows = [
        {"score_by_task": {"a": {"score": -1.0, "rows": 4}, "b": {"score": 0.5, "rows": 4}}},
        {"score_by_task": {"c": {"score": 0.2, "rows": 4}, "d": {"score": None, "rows": 4}}},
        {
            "score_by_task": {
                "a": {"score": 0.0, "rows": 4},
                "b": {"score": 0.25, "rows": 4},
                "d": {"score": 1.0, "rows": 4},
            }
        },
        {"score_by_task": {"a": {"score": 1.0, "rows": 4}}},
        {},  # a step logged before score_by_task existed
    ]
    got = first_last_by_task(rows)
    assert got["tasks"] == 2 and got["rose"] == 1 and got["fell"] == 1
    assert got["first_mean"] == pytest.approx(-0.25) and got["last_mean"] == pytest.approx(0.625)
    assert got["diff_mean"] == pytest.approx(0.875)  # (2.0 + -0.25) / 2
    assert got["diff_se"] == pytest.approx(1.125)  # sd of (2, -0.25) / sqrt(2)
    assert first_last_by_task([{}]) == {"tasks": 0}


def test_blocks_and_rolling_means_show_the_trend_single_steps_hide():
    """Per block of steps, the means of return, outcome and the status shares; a last block
    may be shorter. The rolling mean averages the last `size` numbers, skipping None."""
    from cudaperf.train.curves import blocks, rolling

    rows = [
        {
            "step": k,
            "return_mean": float(k),
            "score_mean": 1.0,
            "outcome_mean": 0.5,
            "status_share": {"ok": 1.0} if k % 2 else {"compile_error": 1.0},
            "score_by_turn": [1.0, float(k)] if k < 5 else [2.0],
        }
        for k in range(1, 6)
    ]
    got = blocks(rows, size=2)
    assert [b["steps"] for b in got] == ["1-2", "3-4", "5-5"]
    assert [b["return"] for b in got] == [1.5, 3.5, 5.0]
    assert [b["ok"] for b in got] == [0.5, 0.5, 1.0]
    assert [b["compile_error"] for b in got] == [0.5, 0.5, 0.0]
    assert got[0]["outcome"] == 0.5 and got[0]["score"] == 1.0
    assert [b["score_by_turn"] for b in got] == [[1.0, 1.5], [1.0, 3.5], [2.0]]
    assert rolling([1.0, None, 3.0, 5.0], size=2) == [1.0, 1.0, 3.0, 4.0]
    assert rolling([None, 2.0], size=3) == [None, 2.0]


def test_trained_steps_counts_each_logged_step_once_and_skips_a_cut_last_line(tmp_path):
    """What the ablation's status and primary.py count as trained: distinct `step` rows (a
    resumed process that redid a step logs it again), not rollout or trainer rows."""
    import json

    rows = [
        {"kind": "rollout", "step": 0},
        {"kind": "step", "step": 1},
        {"kind": "trainer", "step": 1, "loss": 0.1},
        {"kind": "step", "step": 2},
        {"kind": "step", "step": 2},
        {"kind": "step", "step": 3},
    ]
    path = tmp_path / "steps.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"kind": "step", "st')
    assert trained_steps(path) == [1, 2, 3]
    assert trained_steps(tmp_path / "none.jsonl") == []
