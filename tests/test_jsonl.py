"""cudaperf.jsonl: appending after a cut last line, and the writers and readers that use it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cudaperf import jsonl
from cudaperf.jsonl import append_lines, complete_lines, cut_tail, open_append

GOOD = json.dumps({"a": 1})
CUT = '{"a": 2, "b'  # what an interrupted write leaves


def test_cut_tail_finds_the_fragment_after_the_last_newline(tmp_path):
    f = tmp_path / "x.jsonl"
    assert cut_tail(f) is None  # no file
    f.write_text("")
    assert cut_tail(f) is None
    f.write_text(GOOD + "\n")
    assert cut_tail(f) is None
    f.write_text(GOOD + "\n" + CUT)
    assert cut_tail(f) == len(GOOD) + 1
    f.write_text(CUT)
    assert cut_tail(f) == 0
    long = "x" * 200_000  # a fragment longer than one read block
    f.write_text(GOOD + "\n" + long)
    assert cut_tail(f) == len(GOOD) + 1


def test_a_writer_removes_the_cut_line_and_keeps_every_complete_one(tmp_path):
    f = tmp_path / "x.jsonl"
    f.write_text(GOOD + "\n" + CUT)
    with open_append(f) as fh:
        fh.write(json.dumps({"a": 3}) + "\n")
    assert f.read_text().splitlines() == [GOOD, '{"a": 3}']
    f.write_text(GOOD + "\n" + CUT)
    append_lines(f, ['{"a": 4}', '{"a": 5}'])
    assert f.read_text().splitlines() == [GOOD, '{"a": 4}', '{"a": 5}']
    append_lines(f, [])  # nothing to write: the file is left as it is
    assert f.read_text().splitlines()[-1] == '{"a": 5}'


def test_a_shared_file_gets_a_newline_not_a_cut(tmp_path):
    """Another process's write may be in flight: bytes are never removed from a shared file."""
    f = tmp_path / "cache.jsonl"
    f.write_text(GOOD + "\n" + CUT)
    append_lines(f, ['{"a": 6}'], shared=True)
    assert f.read_text() == GOOD + "\n" + CUT + "\n" + '{"a": 6}\n'
    append_lines(f, ['{"a": 7}'], shared=True)  # a file that ends well: no empty line
    assert f.read_text().endswith('{"a": 6}\n{"a": 7}\n')


def test_complete_lines_drops_only_an_unparsable_unterminated_last_line():
    assert complete_lines(GOOD + "\n" + CUT) == [GOOD]
    assert complete_lines(GOOD + "\n") == [GOOD]
    assert complete_lines(GOOD + "\n" + GOOD) == [GOOD, GOOD]  # no newline, but complete
    assert complete_lines("{bad\n" + GOOD + "\n") == ["{bad", GOOD]  # strict readers decide
    assert complete_lines("") == []


def test_evaluation_results_after_an_interrupted_run_keep_both_runs_rows(tmp_path):
    """The defect: a rerun's first row was glued onto the cut line, and lost with it."""
    from cudaperf.execute.results import JsonlWriter, done_keys
    from cudaperf.execute.types import ExecResult, Status

    def row(key: str) -> ExecResult:
        return ExecResult(
            task_id="t",
            candidate_hash=key,
            status=Status.COMPILED,
            cache_key=key,
            mode="compile-only",
        )

    out = tmp_path / "results.jsonl"
    w = JsonlWriter(out)
    w.write(row("k1"))
    w.close()
    with out.open("a") as fh:
        fh.write(row("k2").model_dump_json()[:30])  # the interrupted write
    w = JsonlWriter(out)
    w.write(row("k3"))
    w.close()
    assert set(done_keys(out)) == {"k1", "k3"}


def test_a_stopped_refine_trajectory_and_grpo_log_read_back(tmp_path):
    from cudaperf.refine.trajectory import read_trajectory
    from cudaperf.train.curves import read_steps

    traj = tmp_path / "trajectories.jsonl"
    traj.write_text('{"type": "turn"' + "\n")  # a complete line that is not a record...
    try:
        read_trajectory(traj)
        raise AssertionError("a bad complete line must still be an error")
    except ValueError:
        pass
    traj.write_text('{"type": "tu')  # ...but a cut last line is what a stopped run leaves
    assert read_trajectory(traj) == []
    steps = tmp_path / "steps.jsonl"
    rows = [
        {"kind": "rollout", "step": 0, "processes": 1, "rows": 2, "generate_s": 1.0},
        {"kind": "step", "step": 1, "step_s": 2.0},
    ]
    steps.write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"kind": "rollout", "st')
    assert [r["step"] for r in read_steps(steps)] == [1]


def test_replace_text_makes_parents_and_leaves_no_temporary_file(tmp_path):
    target = tmp_path / "run" / "run.json"
    jsonl.replace_text(target, '{"a": 1}\n')
    jsonl.replace_text(target, '{"a": 2}\n')
    assert target.read_text() == '{"a": 2}\n'
    assert [p.name for p in target.parent.iterdir()] == ["run.json"]


def test_replace_text_cut_while_writing_keeps_the_old_text(tmp_path, monkeypatch):
    target = tmp_path / "run.json"
    target.write_text("old\n")
    real = Path.write_text

    def cut(self, text, *a, **k):  # the process dies halfway through the write
        real(self, text[: len(text) // 2], *a, **k)
        raise KeyboardInterrupt

    monkeypatch.setattr(Path, "write_text", cut)
    with pytest.raises(KeyboardInterrupt):
        jsonl.replace_text(target, "new text, longer than the old\n")
    monkeypatch.undo()
    assert target.read_text() == "old\n"
