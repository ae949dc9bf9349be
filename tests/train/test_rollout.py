from __future__ import annotations

import time

import pytest

from cudaperf.reward import RewardScorer
from cudaperf.train.layout import MeteredEvaluator
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
    # a turn the evaluator could not score has no return, and neither have the turns before
    # it: reading it as 0 would pay them for the evaluator's failure
    assert discounted_returns([1.0, None, 2.0], 0.5) == [None, None, 2.0]
    assert discounted_returns([1.0, 2.0, None], 0.5) == [None, None, None]
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


class _Clock:
    """Records (what, start, end) of every generation and evaluation batch."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, float, float]] = []

    def wrap(self, what: str, fn):
        def run(*a):
            t = time.perf_counter()
            out = fn(*a)
            time.sleep(0.01)
            self.spans.append((what, t, time.perf_counter()))
            return out

        return run


def test_canaries_are_timed_every_nth_step_only():
    """--canary-every 10 (the ablation protocol's watch): steps 0, 10, 20, ... time them; the
    steps between evaluate candidates only (one timing costs ~10 s of a ~65 s H200 step)."""
    tasks = sample_c_tasks()[:2]
    fake, timed = FakeEvaluator(), []

    def evaluator(jobs):
        timed.extend(c.code.splitlines()[-1] for _, c in jobs if c.id == "canary")
        return fake(jobs)

    scorer = RewardScorer(tasks, evaluator=evaluator, analyzer=lambda code: [])
    recs = []
    roll = MultiTurnRollout(
        tasks,
        scorer,
        RolloutOptions(turns=1, canary_every=10),
        on_batch=recs.append,
        canaries=tasks[:1],
    )
    gen = ScriptedPolicy(first=[GOOD], later=[GOOD])
    for step in (0, 3, 10):
        roll.run(_prompts(tasks, 2), 2, gen, step=step)
    assert ["canary" in r for r in recs] == [True, False, True]
    assert timed == ["// canary of step 0", "// canary of step 10"]
    with pytest.raises(ValueError, match="--canary-every 0"):
        RolloutOptions(canary_every=0)
    from cudaperf.train.grpo import GrpoOptions

    assert RolloutOptions().canary_every == 10  # the protocol's, by default
    assert GrpoOptions(out="x").canary_every == 10


def test_timing_is_sequenced_after_generation_and_the_step_breakdown_is_reported():
    """One GPU (--eval-gpus 0): each turn's candidates are evaluated after its generation has
    returned, never beside it; the record carries the breakdown from the metered evaluator."""
    tasks = sample_c_tasks()[:2]
    clock = _Clock()
    scorer = RewardScorer(
        tasks,
        evaluator=MeteredEvaluator(clock.wrap("eval", FakeEvaluator())),
        analyzer=lambda code: [],
    )
    recs = []
    roll = MultiTurnRollout(
        tasks,
        scorer,
        RolloutOptions(turns=2, canary_every=1),
        on_batch=recs.append,
        canaries=tasks[:1],
    )
    gen = clock.wrap("gen", ScriptedPolicy(first=[BAD, WRONG], later=[GOOD]))
    out = roll.run(_prompts(tasks, 4), 4, gen, step=3)
    kinds = [w for w, _, _ in clock.spans]
    assert kinds == ["gen", "eval", "gen", "eval", "eval"]  # the last one: the canary
    for (_, _, end), (_, start, _) in zip(clock.spans, clock.spans[1:], strict=False):
        assert start >= end
    (rec,) = recs
    assert rec["processes"] == 1 and rec["tasks_by_process"] == [[t.id for t in tasks]]
    assert rec["candidates"] == 6 and rec["cached"] == 0  # 4 + 2 (identical codes once)
    assert rec["evaluator_s"] > 0 and rec["generate_s"] > 0 and rec["canary_s"] > 0
    assert rec["canary"] == [{"task": tasks[0].id, "config": "small", "median_us": 10.5}]
    assert scorer.evaluator.take()["candidates"] == 0  # the canary is not counted
    by_task = rec["score_by_task"]  # each task's rows: its mean score, paired across visits
    assert set(by_task) == {t.id for t in tasks} and all(v["rows"] == 4 for v in by_task.values())
    samples = rec["samples"]  # every row's reply, in the rows' order
    assert [s["task"] for s in samples] == out["task_id"]
    assert [s["status"] for s in samples] == out["cudaperf_status"]
    assert [s["turn"] for s in samples] == out["cudaperf_turn"]
    assert samples[0]["text"] == BAD and samples[1]["text"] == GOOD
    for t in tasks:
        mine = [x for x, i in zip(out["cudaperf_score"], out["task_id"], strict=True) if i == t.id]
        assert by_task[t.id]["score"] == pytest.approx(sum(mine) / len(mine), abs=1e-4)


def test_under_several_processes_only_the_main_one_reports_the_gathered_record():
    tasks = sample_c_tasks()[:2]
    seen: list[list[dict]] = []
    recs: list[dict] = []

    def gather(rec):  # what the other process would have sent: the same record, its tasks
        both = [rec, {**rec, "tasks": ["other"], "rows": rec["rows"]}]
        seen.append(both)
        return both

    for main in (True, False):
        roll, _ = _rollout(tasks[:1], turns=1)
        roll.on_batch = recs.append
        roll.distribute(gather, main)
        roll.run(_prompts(tasks[:1], 2), 2, ScriptedPolicy(first=[GOOD], later=[GOOD]))
    assert len(seen) == 2 and len(recs) == 1  # both gathered, one reported
    assert recs[0]["processes"] == 2 and recs[0]["rows"] == 4
    assert recs[0]["tasks_by_process"] == [[tasks[0].id], ["other"]]


def test_each_policy_reply_is_extracted_once_with_a_prefetching_analyzer(monkeypatch):
    from tests.refine.test_episode import _count_extractions

    tasks = sample_c_tasks()[:1]
    seen = _count_extractions(monkeypatch)
    fetched: list = []

    def analyzer(code):
        return []

    analyzer.prefetch = fetched.extend
    scorer = RewardScorer(tasks, evaluator=FakeEvaluator(), analyzer=analyzer)
    roll = MultiTurnRollout(tasks, scorer, RolloutOptions(turns=1))
    roll.run(_prompts(tasks, 2), 2, ScriptedPolicy(first=[GOOD, BAD], later=[GOOD]))
    assert len(seen) == 2  # each reply extracted once
    # the rollout prefetches the turn's two codes before scoring them; the scorer then the
    # code it analyses of the correct one (its credited source: `k` is never launched)
    from cudaperf.analyze.launches import credited_source
    from cudaperf.tasks.reply import extract_candidate

    kind = tasks[0].kind
    assert fetched[:2] == [extract_candidate(r, kind).code for r in (GOOD, BAD)]
    assert fetched[2:] == [credited_source(fetched[0], None)]
