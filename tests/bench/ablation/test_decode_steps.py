"""bench/ablation/decode_steps.py on bench run folders written here: each chunk's time per
decode step is its generation seconds over its longest reply, chunks are told apart as a
process's first, a later one of the same size or of a new size, and a chunk cut before its
replies were kept says nothing."""

from __future__ import annotations

import gzip
import json

import pytest

from tests.script_helpers import load_script
from tests.trajectory_helpers import summary_line, turn_line

ds = load_script("bench/ablation/decode_steps.py")


def count(text: str) -> int:  # a word a token
    return len(text.split())


def _run(tmp_path, chunks, timing, pending=None, turns=1, packed=False):
    """A run folder: `chunks` lists each recorded chunk's replies per task."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"turns": turns}))
    text = "".join(
        turn_line(f"t{c}_{t}", replies=replies) + summary_line(f"t{c}_{t}")
        for c, tasks in enumerate(chunks)
        for t, replies in enumerate(tasks)
    )
    if packed:
        (run / "trajectories.jsonl.gz").write_bytes(gzip.compress(text.encode()))
    else:
        (run / "trajectories.jsonl").write_text(text)
    (run / "timing.jsonl").write_text("".join(json.dumps(r) + "\n" for r in timing))
    if pending is not None:
        rows = [{"task_id": f"p{i}", "turn": 1, "replies": r} for i, r in enumerate(pending)]
        (run / "pending_replies.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run


def _t(started, tasks, gen, wall, complete=True):
    return {
        "started": started,
        "tasks": tasks,
        "complete": complete,
        "wall_s": wall,
        "generate_s": gen,
    }


W = "w "


def test_ms_per_step_and_the_kind_of_each_chunk(tmp_path):
    chunks = [
        [[W * 100, W * 10], [W * 5, W * 5]],  # longest 100 words
        [[W * 50, W * 2], [W * 3, W * 3]],  # same size, 1 s after the first ended
        [[W * 20, W * 20]],  # one task: a new size
        [[W * 200, W * 1]],  # a new process: starts 60 s after the last ended
    ]
    timing = [
        _t("2026-12-07T10:00:00+00:00", 2, 10.0, 30.0),
        _t("2026-12-07T10:00:31+00:00", 2, 2.5, 20.0),
        _t("2026-12-07T10:00:52+00:00", 1, 1.0, 8.0),
        _t("2026-12-07T10:02:00+00:00", 1, 30.0, 40.0),
    ]
    rows = ds.run_chunks(_run(tmp_path, chunks, timing, packed=True), count, cap=100)
    assert [r["ms_per_step"] for r in rows] == [100.0, 50.0, 50.0, 150.0]
    assert [r["in_process"] for r in rows] == ["first", "same", "new", "first"]
    assert [r["longest_tokens"] for r in rows] == [100, 50, 20, 200]
    assert [r["at_cap"] for r in rows] == [1, 0, 0, 1] and rows[0]["replies"] == 4


def test_a_cut_chunk_is_left_out_and_the_last_one_reads_its_pending_replies(tmp_path):
    chunks = [[[W * 10, W * 4]]]
    timing = [
        _t("2026-12-07T10:00:00+00:00", 1, 5.0, 6.0, complete=False),  # cut, nothing kept
        _t("2026-12-07T11:00:00+00:00", 1, 2.0, 9.0),
        _t("2026-12-07T11:00:10+00:00", 2, 8.0, 20.0, complete=False),  # the run stopped in it
    ]
    rows = ds.run_chunks(_run(tmp_path, chunks, timing, pending=[[W * 40], [W * 8]]), count)
    assert [(r["recorded"], r["longest_tokens"], r["ms_per_step"]) for r in rows] == [
        (True, 10, 200.0),
        (False, 40, 200.0),
    ]
    assert rows[0]["in_process"] == "first"  # an hour after the cut one
    assert rows[1]["in_process"] == "new"


def test_timing_rows_that_begin_late_match_the_last_tasks(tmp_path):
    chunks = [[[W * 7]], [[W * 30]]]  # the first chunk ran before timing.jsonl existed
    rows = ds.run_chunks(
        _run(tmp_path, chunks, [_t("2026-12-07T10:00:00+00:00", 1, 3.0, 4.0)]), count
    )
    assert [r["longest_tokens"] for r in rows] == [30]


def test_runs_of_several_turns_and_timing_beyond_the_trajectory_are_refused(tmp_path):
    with pytest.raises(ValueError, match="4 turns"):
        ds.run_chunks(_run(tmp_path, [[[W]]], [], turns=4), count)
    run = tmp_path / "b"
    run.mkdir()
    with pytest.raises(ValueError, match="more tasks than its trajectory"):
        ds.run_chunks(_run(run, [[[W]]], [_t("2026-12-07T10:00:00+00:00", 2, 1.0, 2.0)]), count)
