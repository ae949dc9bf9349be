"""The refinement loop on CPU: scripted replies, prepared ExecResults, JSONL trajectory."""

from __future__ import annotations

import pytest

from cudaperf.execute.types import Status
from cudaperf.rank.types import RankScore
from cudaperf.refine import (
    ScriptedBackend,
    SummaryRecord,
    TurnRecord,
    read_trajectory,
    refine,
    scripted_from_task,
)
from cudaperf.reward import RewardScorer
from cudaperf.tasks.io import load_sample

from .helpers import report, result

SAXPY = next(t for t in load_sample() if t.id.endswith("saxpy"))
SPEED = {"naive": 1.0, "grid_stride_vec4": 3.0}


def evaluator(jobs):
    """naive → OK 1x, vec4 → OK 3x, 'crash' → runtime error."""
    out = []
    for task, cand in jobs:
        impl = next((i for i in task.implementations if i.code.strip() == cand.code.strip()), None)
        if impl is None:
            out.append(result(Status.RUNTIME_ERROR, cand.code, task.id))
        else:
            out.append(result(Status.OK, cand.code, task.id, speedup_vs_naive=SPEED[impl.id]))
    return out


def scorer(**kw):
    return RewardScorer(
        [SAXPY], evaluator=evaluator, analyzer=lambda c: [report(0.5)], analyze="always", **kw
    )


def test_scripted_implementations_improve_and_best_is_kept(tmp_path):
    out = tmp_path / "traj.jsonl"
    seen = []
    res = refine(
        SAXPY, scripted_from_task(SAXPY), scorer(), turns=3, samples=1, out=out, on_turn=seen.append
    )
    # turn 1 naive, turn 2 vec4 (better), turn 3 vec4 again (no improvement) → stop
    assert [t.samples[0].result.speedup_vs_naive for t in res.turns] == [1.0, 3.0, 3.0]
    assert res.summary.stopped == "no improvement" and res.summary.best_turn == 2
    assert res.best_code.strip() == SAXPY.implementation("grid_stride_vec4").code.strip()
    assert len(seen) == 3
    records = read_trajectory(out)
    assert [type(r) for r in records] == [TurnRecord] * 3 + [SummaryRecord]
    second = records[1]
    assert (
        second.messages[-1]["role"] == "user" and "Correct on all" in second.messages[-1]["content"]
    )  # turn 2's prompt holds turn 1's feedback
    assert second.messages[-2]["content"] == records[0].samples[0].reply


def test_best_of_n_picks_the_highest_reward_and_format_errors_are_fed_back(tmp_path):
    naive = SAXPY.implementation("naive").code
    fast = SAXPY.implementation("grid_stride_vec4").code
    replies = ["no code", f"```cuda\n{naive}```", f"```cuda\n{fast}```", "```cuda\ncrash\n```"]
    res = refine(SAXPY, ScriptedBackend(replies), scorer(), turns=1, samples=4)
    turn = res.turns[0]
    assert turn.chosen == 2
    assert turn.samples[0].reward.status == "format_error" and "Format error" in (
        turn.samples[0].feedback
    )
    assert turn.samples[3].reward.status == "runtime_error"
    assert res.summary.stopped == "turns"


def test_ranker_screens_before_evaluation():
    naive = SAXPY.implementation("naive").code
    fast = SAXPY.implementation("grid_stride_vec4").code
    calls = []

    def ev(jobs):
        calls.extend(jobs)
        return evaluator(jobs)

    def ranker(task, code):
        return RankScore(score=0.9 if "float4" in code else 0.1, compared=1, model="r")

    sc = RewardScorer([SAXPY], evaluator=ev, analyzer=lambda c: [], ranker=ranker)
    replies = [f"```cuda\n{naive}```", f"```cuda\n{fast}```"]
    res = refine(SAXPY, ScriptedBackend(replies), sc, turns=1, samples=2, screen_keep=1)
    assert "float4" in fast and len(calls) == 1
    s0, s1 = res.turns[0].samples
    assert s0.screened and s0.result is None and s0.rank.score == 0.1
    assert not s1.screened and s1.reward.ranker > 0


def test_infra_errors_stop_the_loop_without_a_best():
    sc = RewardScorer(
        [SAXPY],
        evaluator=lambda jobs: [result(Status.INFRA_ERROR, c.code, t.id) for t, c in jobs],
        analyzer=lambda c: [],
    )
    res = refine(SAXPY, scripted_from_task(SAXPY), sc, turns=3, samples=1)
    assert res.summary.stopped == "no valid reward" and res.best_code is None


def test_invalid_arguments():
    with pytest.raises(ValueError, match="turns=0"):
        refine(SAXPY, scripted_from_task(SAXPY), scorer(), turns=0)
