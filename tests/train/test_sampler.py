"""cudaperf.train.sampler: with `sampler="epoch"` a run stopped and resumed (mid-epoch, then
at an epoch's start) trains on the same tasks at every step as the run that never stopped;
TRL's own sampler does not (the measurement the module's docstring quotes)."""

from __future__ import annotations

import pytest

from cudaperf.train.grpo import GrpoOptions, run_grpo
from tests.train.fakes import FakeEvaluator, ScriptedPolicy, reply
from tests.train.helpers import grpo_options, read_steps, write_task_file

pytest.importorskip("trl")


def _order(out) -> list[tuple[str, ...]]:
    return [tuple(r["tasks_by_process"][0]) for r in read_steps(out, "rollout")]


@pytest.mark.parametrize("sampler, same", [("epoch", True), ("trl", False)])
def test_a_resumed_run_trains_on_the_tasks_of_the_run_that_never_stopped(
    tmp_path, tiny, sampler, same
):
    tasks = write_task_file(tmp_path)  # 5 training tasks: one epoch is 5 steps
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny))
    generate = ScriptedPolicy(first=[reply("x")], later=[reply("x")], tokenizer=tok)

    def run(out, steps, resume=False):
        opts = grpo_options(
            tmp_path,
            tiny,
            out=tmp_path / out,
            tasks=tasks,
            pool=None,
            max_steps=steps,
            max_new_tokens=4,
            seed=3,
            sampler=sampler,
            resume=resume,
        )
        run_grpo(opts, evaluator=FakeEvaluator(), generate=generate)

    run("straight", 12)
    run("chunked", 7)  # stopped inside the second epoch ...
    run("chunked", 10, resume=True)  # ... and at the start of the third
    run("chunked", 12, resume=True)
    straight, chunked = _order(tmp_path / "straight"), _order(tmp_path / "chunked")
    assert len(straight) == len(chunked) == 12 and chunked[:7] == straight[:7]
    assert (chunked == straight) is same, (sampler, straight, chunked)
    assert sorted(straight[:5]) == sorted(set(straight[:5]))  # an epoch: each task once


def test_an_unknown_sampler_is_one_line(tmp_path):
    with pytest.raises(ValueError, match=r"^--sampler 'random': use one of trl, epoch$"):
        GrpoOptions(out=tmp_path, sampler="random")
