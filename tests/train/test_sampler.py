"""cudaperf.train.sampler: with `sampler="epoch"` a run stopped and resumed (mid-epoch, then
at an epoch's start) trains on the same tasks at every step as the run that never stopped;
TRL's own sampler does not (the measurement the module's docstring quotes)."""

from __future__ import annotations

import json

import pytest

from cudaperf.train.grpo import GrpoOptions, run_grpo
from tests.train.fakes import FakeEvaluator, ScriptedPolicy, reply
from tests.train.helpers import write_task_file

pytest.importorskip("trl")


def _order(out) -> list[tuple[str, ...]]:
    rows = [json.loads(x) for x in (out / "steps.jsonl").read_text().splitlines()]
    return [tuple(r["tasks_by_process"][0]) for r in rows if r["kind"] == "rollout"]


@pytest.mark.parametrize("sampler, same", [("epoch", True), ("trl", False)])
def test_a_resumed_run_trains_on_the_tasks_of_the_run_that_never_stopped(
    tmp_path, tiny, sampler, same
):
    tasks = write_task_file(tmp_path)  # 5 training tasks: one epoch is 5 steps
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny))
    generate = ScriptedPolicy(first=[reply("x")], later=[reply("x")], tokenizer=tok)

    def run(out, steps, resume=False):
        opts = GrpoOptions(
            out=tmp_path / out,
            model=str(tiny),
            tasks=tasks,
            pool=None,
            turns=1,
            num_generations=2,
            groups_per_step=1,
            max_steps=steps,
            max_new_tokens=4,
            val_families=0,
            holdout_share=0.0,
            ranker="none",
            save_steps=1,
            prepare=False,
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
