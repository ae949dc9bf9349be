from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from cudaperf.cli import app
from tests.train.helpers import write_task_file

pytest.importorskip("trl")
runner = CliRunner()


def test_train_sft_smoke_run_and_clear_errors(tmp_path, tiny):
    tasks = write_task_file(tmp_path)
    args = [
        "train",
        "sft",
        "--out",
        str(tmp_path / "run"),
        "--model",
        str(tiny),
        "--tasks",
        str(tasks),
        "--epochs",
        "1",
        "--lora-r",
        "2",
        "--val-families",
        "1",
    ]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["rows_trained"] >= 1
    bad = runner.invoke(app, [*args[:5], str(tmp_path / "missing"), *args[6:]])
    assert bad.exit_code == 2 and "--model" in bad.output and "Traceback" not in bad.output
    (tmp_path / "t").mkdir()
    only_test = write_task_file(tmp_path / "t", families=("histogram",))
    bad = runner.invoke(app, [*args[:7], str(only_test), *args[8:]])
    assert bad.exit_code == 2 and "holds a run" in bad.output  # the run above is kept
    bad = runner.invoke(app, [*args[:7], str(only_test), *args[8:], "--overwrite"])
    assert bad.exit_code == 2 and "training-split" in bad.output
    assert (tmp_path / "run" / "final").is_dir()  # refused before anything was removed


def test_train_grpo_rejects_unknown_preset_and_bad_gpus(tmp_path):
    base = [
        "train",
        "grpo",
        "--out",
        str(tmp_path / "g"),
        "--tasks",
        str(write_task_file(tmp_path)),
    ]
    res = runner.invoke(app, [*base, "--preset", "fastest"])
    assert res.exit_code == 2 and "preset" in res.output
    res = runner.invoke(app, [*base, "--eval-gpus", "one"])
    assert res.exit_code == 2 and "eval-gpus" in res.output


def test_train_report_plots_steps(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    lines = []
    for s in range(3):
        lines.append(
            {
                "kind": "rollout",
                "step": s,
                "rows": 4,
                "return_mean": 0.1 * s,
                "score_mean": 0.1,
                "outcome_mean": 0.0,
                "groups_2_correct": 0.5,
                "generate_s": 0.5,
                "analyse_s": 0.125,
                "eval_s": 0.25,
                "candidates": 4,
                "processes": 1,
                "groups": 1,
                "status_share": {"ok": 0.5, "compile_error": 0.5},
            }
        )
        lines.append({"kind": "step", "step": s + 1, "step_s": 2.0, "optimizer_s": 0.5})
        lines.append({"kind": "trainer", "step": s + 1, "loss": 0.1})
    (run / "steps.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    res = runner.invoke(
        app, ["train", "report", str(run), str(run), "--plot", str(tmp_path / "c.png")]
    )
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)[str(run)]
    assert rep["steps"] == 3 and rep["return_last"] == pytest.approx(0.2)
    assert rep["update_s_mean"] == pytest.approx(2.0 - 0.5 - 0.125 - 0.25)
    assert rep["optimizer_s_mean"] == 0.5 and rep["candidates_per_step"] == 4
    assert "generate" in res.stderr or "generate" in res.output  # the breakdown table
    assert (tmp_path / "c.png").stat().st_size > 1000
    res = runner.invoke(app, ["train", "report", str(tmp_path)])
    assert res.exit_code == 2 and "steps.jsonl" in res.output


def test_train_without_tasks_reads_the_measured_dataset_from_any_folder(tmp_path, monkeypatch):
    (tmp_path / "d").mkdir()
    only_test = write_task_file(tmp_path / "d", families=("histogram",))
    monkeypatch.setenv("CUDAPERF_DATASET", str(only_test))
    monkeypatch.chdir(tmp_path)  # no data/tasks.jsonl.gz here
    for cmd in ("sft", "grpo"):
        res = runner.invoke(app, ["train", cmd, "--out", str(tmp_path / cmd)])
        # the dataset was found and read: it holds no training-split task
        assert res.exit_code == 2 and "training-split" in res.output, res.output
