"""TRL reward functions and the verl adapter, with an injected evaluator (no GPU)."""

from __future__ import annotations

import json

import pytest

from cudaperf.execute.types import Status
from cudaperf.reward import (
    RewardScorer,
    make_compute_score,
    reward_function,
    reward_functions,
)
from cudaperf.tasks.io import load_sample

from .helpers import rank, report, result

TASKS = load_sample()
SAXPY = next(t for t in TASKS if t.id.endswith("saxpy"))
FAST = "```cuda\n// fast\n__global__ void k() {}\n```"
WRONG = "```cuda\n// wrong\n__global__ void k() {}\n```"
BROKEN = "```cuda\n// infra\n__global__ void k() {}\n```"


class FakeEvaluator:
    """Maps code markers to prepared statuses and counts how many jobs it ran."""

    def __init__(self):
        self.calls = 0

    def __call__(self, jobs):
        self.calls += len(jobs)
        out = []
        for task, cand in jobs:
            if "fast" in cand.code:
                out.append(result(Status.OK, cand.code, task.id, speedup_vs_naive=4.0))
            elif "infra" in cand.code:
                out.append(result(Status.INFRA_ERROR, cand.code, task.id))
            else:
                out.append(result(Status.WRONG_OUTPUT, cand.code, task.id))
        return out


def scorer(ev=None, **kw):
    return RewardScorer(
        TASKS,
        evaluator=ev or FakeEvaluator(),
        analyzer=lambda code: [report(0.8)],
        ranker=lambda task, code: rank(0.6),
        **kw,
    )


def test_components_share_one_evaluation_and_sum_to_total():
    ev = FakeEvaluator()
    sc = scorer(ev)
    funcs = reward_functions(sc)
    assert [f.__name__ for f in funcs] == [
        "cudaperf_outcome",
        "cudaperf_speed",
        "cudaperf_structure",
        "cudaperf_ranker",
    ]
    comps = [FAST, WRONG, "no code here", FAST]
    ids = [SAXPY.id] * 4
    cols = [f(prompts=["p"] * 4, completions=comps, task_id=ids, trainer_state=None) for f in funcs]
    totals = reward_function(sc, "total")(prompts=None, completions=comps, task_id=ids)
    assert ev.calls == 2  # FAST and WRONG once each, across five functions
    for i in range(4):
        assert sum(c[i] for c in cols) == pytest.approx(totals[i])
    assert totals[0] > totals[1] > totals[2]
    assert cols[2][1] == 0.0  # no structure bonus for the wrong candidate


def test_conversational_completions_and_short_task_ids():
    sc = scorer()
    comps = [[{"role": "assistant", "content": FAST}]]
    (r,) = reward_function(sc)(
        prompts=[[{"role": "user", "content": "p"}]], completions=comps, task_id=["c2cuda/saxpy"]
    )
    assert r > 1.0


def test_infra_error_and_evaluator_crash_give_none():
    def crash(jobs):
        raise RuntimeError("worker pool died")

    assert reward_function(scorer())(completions=[BROKEN], task_id=[SAXPY.id]) == [None]
    assert reward_function(scorer(crash))(completions=[FAST], task_id=[SAXPY.id]) == [None]


def test_missing_task_column_or_unknown_task_is_a_clear_error():
    with pytest.raises(ValueError, match="task_id"):
        reward_function(scorer())(completions=[FAST], prompt_id=[1])
    with pytest.raises(KeyError, match="not among"):
        reward_function(scorer())(completions=[FAST], task_id=["nope"])


def test_cache_is_bounded():
    ev = FakeEvaluator()
    sc = scorer(ev, cache_size=1)
    f = reward_function(sc)
    f(completions=[FAST, WRONG], task_id=[SAXPY.id] * 2)
    f(completions=[FAST], task_id=[SAXPY.id])
    assert ev.calls == 3


def test_verl_compute_score_with_task_in_extra_info():
    sc = RewardScorer([], evaluator=FakeEvaluator(), analyzer=lambda c: [])
    compute = make_compute_score(sc)
    out = compute("cudaperf", FAST, SAXPY.id, {"task": json.dumps(SAXPY.model_dump(mode="json"))})
    assert out["valid"] == 1.0 and out["score"] == pytest.approx(
        out["outcome"] + out["speed"] + out["structure"] + out["ranker"]
    )
    assert compute("cudaperf", BROKEN, SAXPY.id, None) == pytest.approx(
        {
            "score": 0.0,
            "valid": 0.0,
            "outcome": 0.0,
            "speed": 0.0,
            "structure": 0.0,
            "ranker": 0.0,
            "speedup": 0.0,
        }
    )


def test_ctrl_c_wrapped_by_a_library_stops_the_run_instead_of_becoming_infra_errors():
    """Ctrl-C inside pydantic's serializer reaches the scorer as a PydanticSerializationError;
    treating it as an evaluator failure swallowed the Ctrl-C (the run went on, exit 0)."""
    from pydantic import BaseModel, field_serializer

    from cudaperf.reward.scorer import interrupted

    class Boom(BaseModel):
        x: int = 0

        @field_serializer("x")
        def _ser(self, v):
            raise KeyboardInterrupt

    def evaluator(jobs):
        Boom().model_dump_json()  # raises PydanticSerializationError(... KeyboardInterrupt)

    sc = RewardScorer([SAXPY], evaluator=evaluator, analyzer=lambda c: [])
    with pytest.raises(KeyboardInterrupt):
        sc.score([(SAXPY.id, FAST)])
    assert not interrupted(RuntimeError("the candidate printed KeyboardInterrupt"))
