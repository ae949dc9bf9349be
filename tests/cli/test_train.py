"""`cudaperf train`: a run folder that cannot be made, option values no run can use, a
ranker file that cannot be read and steps files that are not one are each one line, before
any model is loaded (else a traceback, or minutes of training with the value ignored). A run
folder is append-only in spirit: a folder holding a run is continued (--resume) or replaced
(--overwrite), never silently mixed with a new run, and Ctrl-C keeps a resumable checkpoint
and exits 130."""

from __future__ import annotations

import json

import pytest

from tests.cli.helpers import cli, interrupt, start, user_error, wait_for
from tests.train.helpers import make_tiny_model, write_task_file


@pytest.mark.parametrize("trainer", ["sft", "grpo"])
def test_a_run_folder_that_cannot_be_made_is_refused(tmp_path, trainer):
    f = tmp_path / "plain.txt"
    f.write_text("x")
    for out, needle in (
        (f, "is a file"),
        (f / "run", "is a file, so nothing"),
        ("/proc/cudaperf-run", "nothing can be written"),
    ):
        user_error(cli("train", trainer, "--out", out, timeout=60), "--out", needle, code=2)


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["sft", "--limit", "0"], ["'--limit'", "greater than or equal to 1"]),
        (["sft", "--pieces-mib", "0"], ["--pieces-mib 0.0", "MiB > 0"]),
        (["sft", "--wall-budget", "0"], ["--wall-budget 0.0", "seconds > 0"]),
        (["grpo", "--wall-budget", "-5"], ["--wall-budget -5.0", "seconds > 0"]),
        (["grpo", "--pieces-mib", "-1"], ["--pieces-mib -1.0"]),
        (["grpo", "--lr", "0"], ["--lr 0.0", "> 0"]),
        (["grpo", "--beta", "-1"], ["--beta -1.0", ">= 0"]),
        (["grpo", "--temperature", "0"], ["--temperature 0.0", "> 0"]),
        (["sft", "--model", "{tmp}"], ["--model", "holds no config.json"]),
        # inf passes a `> 0` check and once trained (eval_loss NaN); a seed torch refuses once
        # failed after the model loaded, naming no option, with holdout.json already written
        (["sft", "--lr", "inf"], ["--lr inf", "finite"]),
        (["grpo", "--beta", "inf"], ["--beta inf", "finite"]),
        (["grpo", "--temperature", "inf"], ["--temperature inf", "finite"]),
        (["grpo", "--wall-budget", "inf"], ["--wall-budget inf", "finite"]),
        (["sft", "--wall-budget", "inf"], ["--wall-budget inf", "seconds > 0"]),
        (["sft", "--seed", "-1"], ["--seed -1", "0 .. 4294967295"]),
        (["grpo", "--seed", "4294967296"], ["--seed 4294967296", "0 .. 4294967295"]),
        (["grpo", "--split-seed", "-3"], ["--split-seed -3", "0 .. 4294967295"]),
        # an adapter path was read only after the model loaded (minutes for a large one)
        (["grpo", "--adapter", "{tmp}/none"], ["--adapter", "none: no such folder"]),
        (["grpo", "--adapter", "{tmp}"], ["--adapter", "no adapter_config.json there"]),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) and v[0] in ("sft", "grpo") else "",
)
def test_values_no_run_can_use_are_refused_before_loading(tmp_path, args, needles):
    r = cli("train", *(a.format(tmp=tmp_path) for a in args), "--out", tmp_path / "run", timeout=60)
    user_error(r, *needles, code=2)
    assert not (tmp_path / "run").exists()
    assert "Loading weights" not in r.stdout + r.stderr


@pytest.mark.parametrize("trainer", ["sft", "grpo"])
def test_resume_with_no_checkpoint_is_refused(tmp_path, trainer):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "steps.jsonl").write_text("")  # a run folder, but nothing saved
    r = cli("train", trainer, "--out", tmp_path / "run", "--resume", timeout=60)
    user_error(r, "--resume", "no checkpoint-N folder", code=2)


def test_grpo_refuses_a_ranker_file_it_cannot_read(tmp_path):
    broken = tmp_path / "ranker.json"
    broken.write_text('{"format": ')
    r = cli("train", "grpo", "--out", tmp_path / "run", "--ranker", broken, timeout=60)
    user_error(r, f"--ranker {broken}", "cannot read the ranker model", code=2)


def test_report_names_the_steps_file_and_line_and_checks_its_plot(tmp_path):
    steps = tmp_path / "steps.jsonl"
    good = json.dumps({"kind": "step", "step": 1, "step_s": 2.0})
    cases = [
        ("[1]\n", "steps.jsonl:2: not a JSON object"),
        ("{not json\n", "steps.jsonl:2: not valid JSON"),
        ('{"kind": "step"}\n', "steps.jsonl:2: a step record without"),
    ]
    for content, needle in cases:
        steps.write_text(good + "\n" + content)
        user_error(cli("train", "report", tmp_path), needle, "cudaperf train", code=2)
    # files of other kinds (a task file, eval results, an empty file) once reported 0 steps
    for content in ("", '{"id": "t/c2cuda/x", "kind": "c2cuda"}\n', '{"task_id": "x"}\n'):
        steps.write_text(content)
        user_error(cli("train", "report", steps), "no record of a training run", code=2)
    steps.write_text(good + "\n")
    user_error(cli("train", "report", steps, "--plot", tmp_path / "c.jpg"), ".png", code=2)
    sft = [{"run": "sft", "kind": "step", "step": 1, "step_s": 2.0}]
    sft.append({"run": "sft", "kind": "trainer", "step": 1, "loss": 1.5})
    steps.write_text("".join(json.dumps(r) + "\n" for r in sft))  # once an empty GRPO table
    user_error(cli("train", "report", steps), "is an SFT run", "report.json", code=2)
    roll = {"kind": "rollout", "step": 0, "rows": 2, "processes": 1}
    roll["eval_phases_s"] = {"call": 1.25, "compile": 3.5}
    steps.write_text(json.dumps(roll) + "\n" + good + "\n")
    r = cli("train", "report", steps)
    assert r.returncode == 0, r.stderr
    assert "by phase" in r.stderr and "1.25" in r.stderr and "3.5" in r.stderr


def _files(folder):
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


@pytest.mark.parametrize("trainer", ["sft", "grpo"])
def test_a_folder_holding_a_run_is_refused_and_left_as_it_was(tmp_path, trainer):
    run = tmp_path / "run"
    (run / "final").mkdir(parents=True)
    (run / "final" / "adapter_model.safetensors").write_bytes(b"trained")
    (run / "steps.jsonl").write_text('{"kind": "step", "step": 1}\n')
    before = _files(run)
    r = cli("train", trainer, "--out", run, timeout=60)
    user_error(
        r, f"--out {run} holds a run", "final/", "--resume", "--overwrite", "another --out", code=2
    )
    r = cli("train", trainer, "--out", run, "--resume", "--overwrite", timeout=60)
    user_error(r, "--resume and --overwrite", code=2)
    # --overwrite with a value no run can use: refused before anything is removed
    bad = ["--epochs", "0"] if trainer == "sft" else ["--num-generations", "3"]
    r = cli(
        "train",
        trainer,
        "--out",
        run,
        "--overwrite",
        "--tasks",
        write_task_file(tmp_path),
        *bad,
        timeout=60,
    )
    user_error(r, bad[0], code=2)
    assert _files(run) == before


def test_grpo_overwrite_reaches_the_trainer_and_the_cli_removes_nothing(tmp_path, monkeypatch):
    """The trainer removes the run it replaces, after its inputs are checked (as SFT does): a
    CLI that cleared first would lose the run when the tasks then fail to load."""
    from typer.testing import CliRunner

    from cudaperf.cli import app
    from cudaperf.train import grpo

    run = tmp_path / "run"
    (run / "checkpoint-4").mkdir(parents=True)
    (run / "checkpoint-4" / "trainer_state.json").write_text("{}")
    (run / "steps.jsonl").write_text("{}\n")
    (run / "notes.txt").write_text("mine")
    seen = {}

    def fake(opts):
        seen["files"] = sorted(p.name for p in opts.out.iterdir())
        seen["overwrite"] = opts.overwrite
        return {"steps": 0, "seconds": 0.0, "final": str(opts.out / "final")}

    monkeypatch.setattr(grpo, "run_grpo", fake)
    args = ["train", "grpo", "--out", str(run), "--tasks", str(write_task_file(tmp_path))]
    res = CliRunner().invoke(app, [*args, "--overwrite"])
    assert res.exit_code == 0, res.output
    assert seen == {"files": ["checkpoint-4", "notes.txt", "steps.jsonl"], "overwrite": True}


def test_grpo_gradient_checkpointing_is_on_unless_turned_off(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from cudaperf.cli import app
    from cudaperf.train import grpo

    seen = []

    def fake(opts):
        seen.append(opts.gradient_checkpointing)
        return {"steps": 0, "seconds": 0.0, "final": str(opts.out / "final")}

    monkeypatch.setattr(grpo, "run_grpo", fake)
    args = ["train", "grpo", "--tasks", str(write_task_file(tmp_path)), "--out"]
    for i, extra in enumerate(([], ["--no-gradient-checkpointing"])):
        res = CliRunner().invoke(app, [*args, str(tmp_path / f"run{i}"), *extra])
        assert res.exit_code == 0, res.output
    assert seen == [True, False]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    pytest.importorskip("trl")
    return make_tiny_model(tmp_path_factory.mktemp("tiny"))


def _step_rows(path) -> list[int]:
    if not path.is_file():
        return []
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.endswith("}")]
    return [r["step"] for r in rows if r.get("kind") == "step"]


def test_ctrl_c_saves_a_checkpoint_exits_130_and_resume_continues(tmp_path, tiny):
    """The issue's case: Ctrl-C after the first step exited 0 with final/ and no checkpoint,
    so --resume refused to continue."""
    run = tmp_path / "run"
    args = [
        "train",
        "sft",
        "--out",
        run,
        "--model",
        tiny,
        "--tasks",
        write_task_file(tmp_path),
        "--epochs",
        "8",  # 40 steps (one epoch: 5): still running when the Ctrl-C after the first arrives
        "--batch-size",
        "1",
        "--lora-r",
        "2",
        "--val-families",
        "0",
        "--holdout-share",
        "0",
    ]
    p = start(*args)
    wait_for(lambda: _step_rows(run / "steps.jsonl") or p.poll() is not None, 120, "a step")
    _, _, err = interrupt(p, limit_s=60)
    assert p.returncode == 130, err[-3000:]
    assert "Traceback" not in err and "continue with the same command and --resume" in err
    saved = [c for c in run.glob("checkpoint-*") if (c / "trainer_state.json").is_file()]
    assert len(saved) == 1 and f"saved {saved[0]}" in err
    assert not (run / "final").exists() and not (run / "report.json").exists()
    before = _files(run)
    user_error(cli(*args, timeout=60), "holds a run", "--resume", code=2)
    assert _files(run) == before
    r = cli(*args, "--resume", timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    rep = json.loads(r.stdout)
    assert rep["resumed_from"] == str(saved[0]) and rep["steps"] == 40  # 5 rows x 8 epochs
    assert _step_rows(run / "steps.jsonl") == list(range(1, 41))  # each step once


def test_report_reads_a_run_whose_last_line_is_cut(tmp_path):
    """A run stopped mid-write (or one still running) leaves steps.jsonl with a cut last line,
    which the report's reader skips (train.curves); the check before it refused the run."""
    steps = tmp_path / "steps.jsonl"
    good = json.dumps({"kind": "step", "step": 1, "step_s": 2.0})
    steps.write_text(good + "\n" + good[:20])
    r = cli("train", "report", tmp_path)
    assert r.returncode == 0, r.stderr
    assert "last line is cut short" in r.stderr and "Traceback" not in r.stderr
    assert json.loads(r.stdout)
