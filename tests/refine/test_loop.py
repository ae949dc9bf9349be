"""The refinement loop on CPU: scripted replies, prepared ExecResults, JSONL trajectory."""

from __future__ import annotations

import json
import math

import pytest

from cudaperf.execute.types import Status
from cudaperf.rank.types import RankScore
from cudaperf.refine import (
    ScriptedBackend,
    SummaryRecord,
    TurnRecord,
    WeakestFirstBackend,
    first_messages,
    make_backend,
    read_trajectory,
    refine,
    refine_many,
    scripted_from_task,
    weakest_first,
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


# --- scripted weakest-first replay and lockstep refinement of several tasks ------------------

SAMPLE = {t.id: t for t in load_sample()}
MATMUL, TRANSPOSE = SAMPLE["sample/c2cuda/matmul"], SAMPLE["sample/c2cuda/transpose"]


def measured_evaluator(calls):
    """OK results whose speedup vs naive is the stored H200 geomean ratio (what the GPU
    evaluator would measure if the stored medians hold)."""

    def run(jobs):
        calls.append([t.id for t, _ in jobs])
        out = []
        for task, cand in jobs:
            impl = next(i for i in task.implementations if i.code.strip() == cand.code.strip())
            naive = task.implementation("naive")
            ratio = [
                n.median_us / m.median_us
                for n, m in zip(naive.measurements, impl.measurements, strict=True)
            ]
            sp = math.prod(ratio) ** (1 / len(ratio))
            out.append(result(Status.OK, cand.code, task.id, speedup_vs_naive=sp))
        return out

    return run


def test_weakest_first_orders_by_measured_time_then_by_strategies():
    assert [i.id for i in weakest_first(MATMUL)] == ["naive", "smem_tiled", "register_blocked"]
    assert [i.id for i in weakest_first(TRANSPOSE)] == [
        "naive",
        "smem_tiled_conflicts",
        "smem_tiled_padded",
    ]
    bare = MATMUL.model_copy(
        update={
            "implementations": [
                i.model_copy(update={"measurements": []}) for i in reversed(MATMUL.implementations)
            ]
        }
    )
    assert [i.id for i in weakest_first(bare)] == ["naive", "smem_tiled", "register_blocked"]
    assert [i.id for i in weakest_first(MATMUL, gpu="no such gpu")][0] == "naive"


def test_weakest_first_backend_replays_one_implementation_per_turn():
    be = make_backend("scripted:weakest-first", tasks=[MATMUL, SAXPY])
    assert isinstance(be, WeakestFirstBackend) and be.name == "scripted:weakest-first"
    msgs = first_messages(MATMUL)
    turns = [be.generate(msgs, 2) for _ in range(4)]
    ids = ["naive", "smem_tiled", "register_blocked", "register_blocked"]
    for replies, impl in zip(turns, ids, strict=True):
        assert len(replies) == 2 and replies[0] == replies[1]
        assert f"`{impl}`" in replies[0] and "```cuda" in replies[0]
    assert "`naive`" in be.generate(first_messages(SAXPY), 1)[0]  # counted per task
    with pytest.raises(ValueError, match="not built with"):
        be.generate(first_messages(TRANSPOSE), 1)
    assert make_backend("scripted:weakest-first", task=SAXPY).order == {
        SAXPY.id: ["naive", "grid_stride_vec4"]
    }
    with pytest.raises(ValueError, match="use one of"):
        make_backend("scripted:best-first", task=SAXPY)


def test_refine_many_runs_tasks_in_lockstep_with_rising_rewards(tmp_path):
    calls = []
    sc = RewardScorer(
        [MATMUL, SAXPY],
        evaluator=measured_evaluator(calls),
        analyzer=lambda c: [report(0.5)],
        analyze="always",
    )
    be = make_backend("scripted:weakest-first", tasks=[MATMUL, SAXPY])
    done = []
    out = tmp_path / "traj.jsonl"
    mm, sx = refine_many([MATMUL, SAXPY], be, sc, turns=4, samples=2, out=out, on_done=done.append)
    # one evaluator batch per turn for every task still running; a repeated candidate (saxpy's
    # turn 3, matmul's turn 4) and a turn's duplicate samples come from the scorer's cache
    assert calls == [[MATMUL.id, SAXPY.id], [MATMUL.id, SAXPY.id], [MATMUL.id]]
    totals = [t.best_total for t in mm.turns]
    assert len(totals) == 4 and totals[0] < totals[1] < totals[2] == totals[3]
    assert mm.summary.best_turn == 3 and mm.summary.stopped == "no improvement"
    assert sx.summary.best_turn == 2 and len(sx.turns) == 3
    assert [r.task_id for r in done] == [SAXPY.id, MATMUL.id]
    records = read_trajectory(out)
    assert [r.type for r in records].count("summary") == 2 and len(records) == 9


def test_refine_many_rejects_duplicate_tasks():
    with pytest.raises(ValueError, match="unique"):
        refine_many([SAXPY, SAXPY], scripted_from_task(SAXPY), scorer())


def test_a_stopped_run_resumes_where_it_stopped(tmp_path):
    """Ctrl-C after turn 1 keeps that turn; passing the trajectory back continues with turn 2
    (same conversation, no turn redone) and ends exactly as an uninterrupted run."""
    whole = refine(SAXPY, scripted_from_task(SAXPY), scorer(), turns=3, samples=1)
    out = tmp_path / "traj.jsonl"

    def stop_after_first(rec):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        refine(
            SAXPY,
            scripted_from_task(SAXPY),
            scorer(),
            turns=3,
            samples=1,
            out=out,
            on_turn=stop_after_first,
        )
    assert [type(r) for r in read_trajectory(out)] == [TurnRecord]
    backend = scripted_from_task(SAXPY)
    backend.generate(first_messages(SAXPY), 1)  # the replay is past the turn already made
    seen = []
    res = refine(
        SAXPY,
        backend,
        scorer(),
        turns=3,
        samples=1,
        out=out,
        on_turn=seen.append,
        resume=read_trajectory(out),
    )
    assert [t.turn for t in seen] == [2, 3]  # turn 1 was not made again
    assert [t.best_total for t in res.turns] == [t.best_total for t in whole.turns]
    assert res.summary.best_turn == whole.summary.best_turn == 2
    records = read_trajectory(out)
    assert [r.turn for r in records if isinstance(r, TurnRecord)] == [1, 2, 3]
    assert isinstance(records[-1], SummaryRecord) and records[-1].turns == 3
    # a finished episode is refined anew, not resumed
    again = refine(
        SAXPY, scripted_from_task(SAXPY), scorer(), turns=3, samples=1, resume=read_trajectory(out)
    )
    assert [t.turn for t in again.turns] == [1, 2, 3]


def test_the_clock_gets_generation_and_scoring_seconds_even_when_interrupted():
    import time

    naive = next(i.code for i in SAXPY.implementations if i.id == "naive")

    class Slow(ScriptedBackend):
        def generate(self, messages, n):
            time.sleep(0.2)
            return super().generate(messages, n)

    def slow_eval(jobs):
        time.sleep(0.3)
        return evaluator(jobs)

    sc = RewardScorer([SAXPY], evaluator=slow_eval, analyzer=lambda c: [], analyze="always")
    clock: dict[str, float] = {}
    refine_many([SAXPY], Slow([f"```cuda\n{naive}\n```"]), sc, turns=2, samples=1, clock=clock)
    assert set(clock) == {"generate_s", "score_s"}
    assert 0.4 <= clock["generate_s"] < 0.4 + 0.25  # two turns' generation, not scoring
    assert 0.3 <= clock["score_s"] < 0.6 + 0.25  # a repeated candidate comes from the cache

    def interrupted(jobs):
        time.sleep(0.3)
        raise KeyboardInterrupt

    sc = RewardScorer([SAXPY], evaluator=interrupted, analyzer=lambda c: [], analyze="always")
    clock = {}
    with pytest.raises(KeyboardInterrupt):
        refine_many([SAXPY], Slow([f"```cuda\n{naive}\n```"]), sc, turns=2, clock=clock)
    assert clock["generate_s"] >= 0.2 and clock["score_s"] >= 0.3  # the cut turn's seconds


class Draws:
    """A new reply at every draw, as a sampling model gives: a regenerated turn differs."""

    name = "draws"

    def __init__(self, start: int = 0) -> None:
        self.k, self.asked = start, []

    def generate(self, messages, n):
        self.asked.append(messages)
        naive = SAXPY.implementation("naive").code
        self.k += n
        return [f"```cuda\n// draw {self.k - j}\n{naive}\n```" for j in range(n)]


def _stop_in_turn_2(out, pending):
    """Two tasks, 2 turns of 2 samples, Ctrl-C in turn 2's evaluator batch."""
    calls = []

    def stop_in_turn_2(jobs):
        calls.append(jobs)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return evaluator(jobs)

    sc = RewardScorer(
        [SAXPY, MATMUL], evaluator=stop_in_turn_2, analyzer=lambda c: [], analyze="always"
    )
    with pytest.raises(KeyboardInterrupt):
        refine_many(
            [SAXPY, MATMUL], Draws(), sc, turns=2, samples=2, patience=2, out=out, pending=pending
        )


def _resume(out, pending, backend, clock=None):
    sc = RewardScorer([SAXPY, MATMUL], evaluator=evaluator, analyzer=lambda c: [], analyze="always")
    return refine_many(
        [SAXPY, MATMUL],
        backend,
        sc,
        turns=2,
        samples=2,
        patience=2,
        out=out,
        pending=pending,
        resume=read_trajectory(out),
        clock=clock,
    )


def test_replies_generated_before_a_stop_in_scoring_are_scored_on_resume(tmp_path):
    """Ctrl-C while turn 2 is scored: the turn's replies stay in the pending file, and the
    resumed run scores exactly those (no new draw), records them and drops the file; a task
    whose set is missing is generated again, alone."""
    out, pending = tmp_path / "traj.jsonl", tmp_path / "pending.jsonl"
    _stop_in_turn_2(out, pending)
    assert [r.turn for r in read_trajectory(out)] == [1, 1]
    held = {}
    for line in pending.read_text().splitlines():
        doc = json.loads(line)
        held[doc["task_id"]] = doc["replies"]
    assert set(held) == {SAXPY.id, MATMUL.id} and all(len(r) == 2 for r in held.values())
    stale = {"key": "k", "task_id": SAXPY.id, "turn": 1, "model": "draws", "replies": ["x", "y"]}
    with pending.open("a") as fh:  # a set of a turn already recorded (a stop before settling)
        fh.write(json.dumps(stale) + "\n")

    backend, clock = Draws(start=100), {}
    resumed = _resume(out, pending, backend, clock)
    assert backend.asked == []  # nothing generated again
    assert clock["reused_sets"] == 2
    for res in resumed:
        assert [s.reply for s in res.turns[-1].samples] == held[res.task_id]
    assert not pending.exists()
    assert [r.turn for r in read_trajectory(out) if isinstance(r, TurnRecord)] == [1, 1, 2, 2]

    # only MATMUL's set left: SAXPY's turn 2 is drawn again, alone
    out2, pending2 = tmp_path / "traj2.jsonl", tmp_path / "pending2.jsonl"
    _stop_in_turn_2(out2, pending2)
    (kept,) = [x for x in pending2.read_text().splitlines() if MATMUL.id in x]
    pending2.write_text(kept + "\n")
    backend = Draws(start=100)
    resumed = _resume(out2, pending2, backend)
    assert len(backend.asked) == 1 and SAXPY.description[:20] in json.dumps(backend.asked)
    assert [s.reply for s in resumed[1].turns[-1].samples] == json.loads(kept)["replies"]
    assert "draw 10" in resumed[0].turns[-1].samples[0].reply  # drawn now (101, 102)
    assert not pending2.exists()
