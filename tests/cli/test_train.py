"""`cudaperf train`: a run folder that cannot be made, option values no run can use, a
ranker file that cannot be read and steps files that are not one are each one line, before
any model is loaded (else a traceback, or minutes of training with the value ignored)."""

from __future__ import annotations

import json

import pytest

from tests.cli.helpers import cli, user_error


@pytest.mark.parametrize("trainer", ["sft", "grpo"])
def test_a_run_folder_that_cannot_be_made_is_refused(tmp_path, trainer):
    f = tmp_path / "plain.txt"
    f.write_text("x")
    for out, needle in ((f, "is a file"), (f / "run", "is a file, so nothing"),
                        ("/proc/cudaperf-run", "nothing can be written")):  # fmt: skip
        user_error(cli("train", trainer, "--out", out, timeout=60), "--out", needle, code=2)


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["sft", "--limit", "0"], ["'--limit'", "greater than or equal to 1"]),
        (["sft", "--pieces-mib", "0"], ["--pieces-mib 0.0", "MiB > 0"]),
        (["grpo", "--pieces-mib", "-1"], ["--pieces-mib -1.0"]),
        (["grpo", "--lr", "0"], ["--lr 0.0", "> 0"]),
        (["grpo", "--beta", "-1"], ["--beta -1.0", ">= 0"]),
        (["grpo", "--temperature", "0"], ["--temperature 0.0", "> 0"]),
        (["sft", "--model", "{tmp}"], ["--model", "holds no config.json"]),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) and v[0] in ("sft", "grpo") else "",
)
def test_values_no_run_can_use_are_refused_before_loading(tmp_path, args, needles):
    r = cli("train", *(a.format(tmp=tmp_path) for a in args), "--out", tmp_path / "run",
            timeout=60)  # fmt: skip
    user_error(r, *needles, code=2)
    assert not (tmp_path / "run").exists()


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
    steps.write_text(good + "\n")
    user_error(cli("train", "report", steps, "--plot", tmp_path / "c.jpg"), ".png", code=2)
