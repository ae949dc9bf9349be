from __future__ import annotations

import pytest

from cudaperf.reward import RewardScorer
from cudaperf.train.rollout import MultiTurnRollout, RolloutOptions, discounted_returns
from tests.train.fakes import FakeEvaluator, ScriptedPolicy, reply
from tests.train.helpers import sample_c_tasks

GOOD = reply('__global__ void k() {}\nextern "C" void f() {}')
BAD = reply("this does not compile")
WRONG = reply("__global__ void k() {} // WRONG")


def _rollout(tasks, turns=2, gamma=0.4):
    ev = FakeEvaluator()
    scorer = RewardScorer(tasks, evaluator=ev, analyzer=lambda code: [])
    return MultiTurnRollout(tasks, scorer, RolloutOptions(turns=turns, gamma=gamma)), ev


def _prompts(tasks, g):
    from cudaperf.refine.prompts import first_messages

    return [first_messages(t) for t in tasks for _ in range(g)]


def test_discounted_returns():
    assert discounted_returns([1.0, 0.0, 2.0], 0.5) == [1.5, 1.0, 2.0]
    assert discounted_returns([1.0, None, 2.0], 0.5) == [1.0 + 0.25 * 2.0, None, 2.0]
    assert discounted_returns([3.0], 0.4) == [3.0]


def test_one_row_per_incoming_row_groups_kept_and_returns_discounted():
    tasks = sample_c_tasks()[:2]
    roll, ev = _rollout(tasks, turns=2, gamma=0.4)
    policy = ScriptedPolicy(first=[BAD, WRONG], later=[GOOD])
    out = roll.run(_prompts(tasks, 4), 4, policy)
    n = 8
    for key, vals in out.items():
        assert vals is None or len(vals) == n, key
    assert out["logprobs"] is None
    assert out["task_id"] == [tasks[0].id] * 4 + [tasks[1].id] * 4  # groups stay together
    assert out["cudaperf_turn"] == [1, 2] * 4
    assert ev.batches == [4, 2]  # each turn one evaluator batch (identical codes scored once)
    s, r = out["cudaperf_score"], out["cudaperf_return"]
    for k in range(0, n, 2):
        assert r[k] == pytest.approx(s[k] + 0.4 * s[k + 1]) and r[k + 1] == s[k + 1]
    assert out["cudaperf_status"][:2] == ["compile_error", "ok"]
    assert out["cudaperf_status"][2:4] == ["wrong_output", "ok"]


def test_later_turns_carry_feedback_but_never_held_out_configs():
    task = next(t for t in sample_c_tasks() if any(c.held_out for c in t.configs))
    roll, _ = _rollout([task], turns=2)
    policy = ScriptedPolicy(first=[WRONG], later=[GOOD])
    roll.run(_prompts([task], 2), 2, policy)
    later = [c for c in policy.seen if len(c) > 2]
    assert later and later[0][-2]["content"] == WRONG and later[0][-1]["role"] == "user"
    text = " ".join(m["content"] for m in later[0])
    for cfg in (c for c in task.configs if c.held_out):
        assert cfg.name not in text
        for v in cfg.sizes.values():
            assert f"={v}" not in text


def test_contract_errors_are_clear():
    tasks = sample_c_tasks()[:2]
    roll, _ = _rollout(tasks, turns=2)
    policy = ScriptedPolicy(first=[GOOD], later=[GOOD])
    mixed = _prompts(tasks, 1) * 2
    with pytest.raises(ValueError, match="must be one task"):
        roll.run(mixed, 2, policy)
    with pytest.raises(ValueError, match="multiple of --turns"):
        roll.run(_prompts(tasks, 3), 3, policy)
    with pytest.raises(ValueError, match="whole groups"):
        roll.run(_prompts(tasks, 2)[:3], 2, policy)
    with pytest.raises(ValueError, match="not a task prompt"):
        roll.run([[{"role": "user", "content": "hi"}]] * 2, 2, policy)
    with pytest.raises(ValueError, match="gamma"):
        RolloutOptions(gamma=1.5)
