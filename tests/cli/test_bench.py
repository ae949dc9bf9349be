"""`cudaperf bench` on the CPU: scripted references over the bundled sample set, compile-only
(nvcc, no GPU), resume, report, compare, and one-line errors for bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cudaperf.cli import app

runner = CliRunner()
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")


def bench_run(tmp_path, model: str, out: str, *extra: str):
    args = ["bench", "run", "--model", model, "--suite", "sample", "--samples", "2",
            "--turns", "2", "--limit", "4", "--compile-only", "--bootstrap", "50",
            "--cache-dir", str(tmp_path / "cache"), "--ranker", "none",
            "--out", str(tmp_path / out), *extra]  # fmt: skip
    return runner.invoke(app, args)


@needs_nvcc
def test_bench_run_resume_report_and_compare_compile_only(tmp_path):
    res = bench_run(tmp_path, "scripted:best", "best")
    assert res.exit_code == 0, res.output
    assert "compile rate (turn 1)" in res.stdout and "100.0%" in res.stdout
    assert "compile-only" in res.stdout and "no correctness or speedup" in res.stdout
    assert "correct rate" not in res.stdout  # not measured without a GPU: not shown as 0
    run = json.loads((tmp_path / "best/run.json").read_text())
    assert len(run["tasks"]) == 4 and run["command"].startswith("cudaperf bench run")
    lines = (tmp_path / "best/trajectories.jsonl").read_text().splitlines()
    assert len(lines) == 4 * 3  # 2 turn records + 1 summary per task

    again = bench_run(tmp_path, "scripted:best", "best")  # resume: nothing left to do
    assert again.exit_code == 0 and "already finished" in again.output
    assert (tmp_path / "best/trajectories.jsonl").read_text().splitlines() == lines

    html = (tmp_path / "best/report.html").read_text()
    assert "Compile-only run: there was no GPU" in html
    rep = runner.invoke(app, ["bench", "report", str(tmp_path / "best"), "--bootstrap", "20"])
    assert rep.exit_code == 0 and "report:" in rep.stdout

    assert bench_run(tmp_path, "scripted:naive", "naive").exit_code == 0
    cmp = runner.invoke(app, ["bench", "compare", str(tmp_path / "naive"),
                              str(tmp_path / "best"), "--out", str(tmp_path / "cmp"),
                              "--bootstrap", "50"])  # fmt: skip
    assert cmp.exit_code == 0, cmp.output
    assert "paired on 4 task(s)" in cmp.stdout and (tmp_path / "cmp/report.html").is_file()


def test_bad_input_gives_one_line_errors(tmp_path):
    cases = [
        (["--suite", "nosuch"], "nor a suite name"),
        (["--suite", "kernelbench:1"], "--suite-path"),
        (["--suite", "sample", "--adapter", "a"], "--adapter loads on top of a Hugging Face"),
        (["--suite", "sample", "--samples", "0"], "use at least 1"),
        (["--suite", "sample", "--gpus", "a,b"], "give GPU indices such as 0,1"),
        (["--suite", "sample", "--gpus", "0,0"], "distinct non-negative GPU indices"),
        (["--suite", "sample", "--gpus", "0", "--compile-only"], "or drop --compile-only"),
        (["--suite", "sample", "--gpus", "99"], "no GPU 99 here"),
    ]
    for extra, message in cases:
        args = ["bench", "run", "--model", "scripted:best", "--out", str(tmp_path / "r"), *extra]
        res = runner.invoke(app, args)
        assert res.exit_code == 2, (extra, res.output)
        assert message in res.output and "Traceback" not in res.output
    res = runner.invoke(app, ["bench", "report", str(tmp_path / "none")])
    assert res.exit_code == 2 and "no run.json" in res.output
    res = runner.invoke(app, ["bench", "compare", str(tmp_path / "x"), "--out", str(tmp_path)])
    assert res.exit_code == 2 and "at least two run folders" in res.output


@needs_nvcc
def test_several_suites_in_one_run_and_scripted_models_leave_out_bare_tasks(tmp_path):
    kb = Path(__file__).resolve().parents[1] / "fixtures/kernelbench/KernelBench"
    res = bench_run(tmp_path, "scripted:naive", "r", "--suite", "kernelbench:1",
                    "--suite-path", str(kb), "--trials", "7")  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "leaving out 2 task(s) without implementations" in res.output
    run = json.loads((tmp_path / "r/run.json").read_text())
    assert run["settings"]["suite"] == "sample + kernelbench:1" and len(run["tasks"]) == 4
    assert "--suite sample --suite kernelbench:1 --suite-path" in run["command"]
    assert run["evaluator"]["trials"] == "7" and run["mode"] == "compile-only"


@needs_nvcc
def test_no_compile_baseline_is_recorded_and_kept_by_the_resume_command(tmp_path):
    args = ["bench", "run", "--model", "scripted:naive", "--suite", "sample", "--samples", "1",
            "--turns", "1", "--limit", "1", "--compile-only", "--bootstrap", "20",
            "--cache-dir", str(tmp_path / "cache"), "--ranker", "none",
            "--no-compile-baseline", "--out", str(tmp_path / "r")]  # fmt: skip
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    run = json.loads((tmp_path / "r/run.json").read_text())
    assert run["settings"]["compile_baseline"] is False
    assert run["evaluator"]["compile_baseline"] == "False"
    assert "--no-compile-baseline" in run["command"]
    assert all("compile" not in m["baselines"] for m in run["tasks"].values())
    res = runner.invoke(app, args[:-3] + ["--out", str(tmp_path / "r")])  # the flag dropped
    assert res.exit_code == 2 and "compile_baseline=False there, True now" in res.output
