"""`cudaperf refine` on the CPU: scripted replies, compile-only, trajectory and best kernel."""

from __future__ import annotations

import json
import shutil

import pytest
from typer.testing import CliRunner

from cudaperf.cli import app

runner = CliRunner()
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")


@needs_nvcc
def test_refine_scripted_compile_only(tmp_path):
    out, best = tmp_path / "t.jsonl", tmp_path / "best.cu"
    args = [
        "refine",
        "c2cuda/saxpy",
        "--model",
        "scripted:implementations",
        "--turns",
        "3",
        "--samples",
        "1",
        "--out",
        str(out),
        "--best-out",
        str(best),
        "--compile-only",
        "--cache-dir",
        str(tmp_path / "cache"),
    ]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert "turn 1: best reward -0.250 (compiled)" in res.stdout
    assert "compile-only" in res.stdout and "stopped: no improvement" in res.stdout
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["type"] for r in lines] == ["turn", "turn", "summary"]
    assert best.read_text().strip() and "saxpy" in best.read_text()


@needs_nvcc
def test_refine_scripted_weakest_first_compile_only(tmp_path):
    out = tmp_path / "t.jsonl"
    args = [
        "refine",
        "c2cuda/matmul",
        "--model",
        "scripted:weakest-first",
        "--turns",
        "4",
        "--samples",
        "2",
        "--out",
        str(out),
        "--best-out",
        str(tmp_path / "b.cu"),
        "--compile-only",
        "--cache-dir",
        str(tmp_path / "cache"),
    ]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    # compile-only: every kernel earns the same "compiled" reward, so turn 2 gains nothing
    assert [r["type"] for r in lines] == ["turn", "turn", "summary"]
    assert [r["samples"][0]["reply"].split("`")[1] for r in lines[:2]] == ["naive", "smem_tiled"]
    assert lines[-1]["model"] == "scripted:weakest-first"


def test_refine_bad_target_and_missing_c_options(tmp_path):
    res = runner.invoke(app, ["refine", "no/such/task", "--model", "scripted:implementations"])
    assert res.exit_code == 2 and "no task 'no/such/task' (TARGET)" in res.output
    c = tmp_path / "f.c"
    c.write_text("void f(int n, float* y) { }\n")
    res = runner.invoke(app, ["refine", str(c), "--model", "scripted:implementations"])
    assert res.exit_code == 2 and "--function" in res.output
    res = runner.invoke(
        app,
        [
            "refine",
            str(c),
            "--function",
            "f",
            "--sizes",
            "n=4",
            "--model",
            "scripted:implementations",
        ],
    )
    assert res.exit_code == 2 and "no implementations" in res.output


@needs_nvcc
def test_refine_scores_the_replies_a_stopped_run_left_pending(tmp_path):
    """A run stopped while scoring leaves its turn's replies in `<out stem>.pending.jsonl`;
    the rerun scores those (no new draw) and removes the file once the turn is recorded."""
    from cudaperf.refine import first_messages, make_backend
    from cudaperf.refine.pending import Pending, draw_key
    from cudaperf.tasks.io import load_sample

    out = tmp_path / "t.jsonl"
    task = next(t for t in load_sample() if t.id.endswith("c2cuda/saxpy"))
    name = make_backend("scripted:implementations", task=task).name
    code = task.implementation("naive").code
    reply = f"From before the stop.\n```cuda\n// pending draw\n{code}\n```"
    key = draw_key(task.id, 1, name, first_messages(task))
    Pending(tmp_path / "t.pending.jsonl").hold([(key, task.id, 1, name, [reply])])
    args = ["refine", "c2cuda/saxpy", "--model", "scripted:implementations", "--turns", "1"]
    args += ["--samples", "1", "--out", str(out), "--best-out", str(tmp_path / "b.cu")]
    args += ["--compile-only", "--cache-dir", str(tmp_path / "cache")]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    first = json.loads(out.read_text().splitlines()[0])
    assert first["samples"][0]["reply"] == reply
    assert not (tmp_path / "t.pending.jsonl").exists()
