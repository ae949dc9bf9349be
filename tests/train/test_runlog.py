from __future__ import annotations

import pytest

from cudaperf.train.sft import SftOptions, run_sft
from tests.train.helpers import write_task_file

pytest.importorskip("trl")


def test_time_budget_saves_and_stops_after_the_first_step(tmp_path, tiny):
    opts = SftOptions(
        out=tmp_path / "run",
        model=str(tiny),
        tasks=write_task_file(tmp_path),
        epochs=3,
        batch_size=1,
        lora_r=0,
        val_families=0,
        holdout_share=0.0,
        time_budget_s=0.001,
    )
    rep = run_sft(opts)
    assert rep["stopped_by_time_budget"] and rep["steps"] == 1
    assert (tmp_path / "run" / "checkpoint-1").is_dir()  # saved before stopping
    with pytest.raises(ValueError, match="wall-budget"):
        run_sft(
            SftOptions(out=tmp_path / "r2", model=str(tiny), time_budget_s=-1, tasks=opts.tasks)
        )


def test_processes_agree_on_stopping_at_the_same_step():
    from transformers import TrainerControl, TrainerState

    from cudaperf.train.runlog import TimeBudget

    mine, theirs = TimeBudget(None), TimeBudget(3600.0)  # this process has no reason to stop
    wishes = []
    mine.agree = lambda stop: wishes.append(stop) or True  # another process's budget ran out
    control = mine.on_step_end(None, TrainerState(), TrainerControl())
    assert wishes == [False] and control.should_training_stop and control.should_save
    alone = theirs.on_step_end(None, TrainerState(), TrainerControl())
    assert mine.stopped and not alone.should_training_stop


def test_the_time_budget_counts_what_ran_before_training(monkeypatch):
    """A run that spent most of its budget loading and preparing stops after its first step
    (the budget is a wall clock from the run's start, not from the trainer's first step)."""
    from transformers import TrainerControl, TrainerState

    from cudaperf.train import runlog

    now = [1000.0]
    monkeypatch.setattr(runlog.time, "perf_counter", lambda: now[0])
    budget = runlog.TimeBudget(100.0)
    now[0] += 80.0  # loading and prepare
    budget.on_train_begin(None, TrainerState(), TrainerControl())
    now[0] += 10.0  # one step: 90 s gone, the next (10 s, x1.5) would end past 100 s
    control = budget.on_step_end(None, TrainerState(), TrainerControl())
    assert control.should_training_stop and control.should_save and budget.stopped


def _steps(budget, seconds, now):
    from transformers import TrainerControl, TrainerState

    stops = []
    for s in seconds:
        now[0] += s
        control = budget.on_step_end(None, TrainerState(), TrainerControl())
        stops.append(control.should_training_stop)
    return stops


def test_a_slow_first_step_does_not_predict_the_later_ones(monkeypatch):
    """The H200 case of 2026-12-04: a resumed process's first step took 170 s (compiling,
    drawing input sets), later ones ~94 s; a 520 s budget must not stop after two steps."""
    from cudaperf.train import runlog

    now = [0.0]
    monkeypatch.setattr(runlog.time, "perf_counter", lambda: now[0])
    budget = runlog.TimeBudget(520.0)
    now[0] += 10.0  # loading
    # 180 + 1.5*170 = 435 (go on); 274 + 1.5*94 = 415 (go on); 368 + 141 = 509 (go on);
    # 462 + 141 > 520 (stop). Predicting from the longest step (170) stopped after step 2.
    assert _steps(budget, [170.0, 94.0, 94.0, 94.0], now) == [False, False, False, True]
    assert budget.stopped and budget.expected == 94.0


def test_until_a_second_step_the_first_one_is_the_prediction(monkeypatch):
    from cudaperf.train import runlog

    now = [0.0]
    monkeypatch.setattr(runlog.time, "perf_counter", lambda: now[0])
    assert _steps(runlog.TimeBudget(430.0), [170.0], now) == [False]  # 170 + 255 = 425
    now[0] = 0.0
    assert _steps(runlog.TimeBudget(420.0), [170.0], now) == [True]


def test_the_last_step_is_not_a_budget_stop(monkeypatch):
    """A run that reached --max-steps ended on its own: its report must not say the budget
    stopped it (a 15-step chunk of the first main run, H100 2026-12-05, said so)."""
    from transformers import TrainerControl, TrainerState

    from cudaperf.train import runlog

    now = [0.0]
    monkeypatch.setattr(runlog.time, "perf_counter", lambda: now[0])
    budget = runlog.TimeBudget(100.0)
    now[0] += 90.0
    last = TrainerState(global_step=15, max_steps=15)
    control = budget.on_step_end(None, last, TrainerControl())
    assert not control.should_training_stop and not budget.stopped
    now[0] += 5.0
    before = TrainerState(global_step=14, max_steps=15)
    assert budget.on_step_end(None, before, TrainerControl()).should_training_stop


def test_a_slow_later_step_raises_the_prediction(monkeypatch):
    from cudaperf.train import runlog

    now = [0.0]
    monkeypatch.setattr(runlog.time, "perf_counter", lambda: now[0])
    budget = runlog.TimeBudget(600.0)
    # after step 3: 280 + 1.5*150 = 505 (go on); after step 4: 330 + 225 = 555 (go on);
    # after step 5: 380 + 225 > 600 (stop): the 150 s later step, not the 50 s last one
    assert _steps(budget, [30.0, 100.0, 150.0, 50.0, 50.0], now) == [False] * 4 + [True]


def test_a_records_samples_go_to_completions_jsonl_not_steps_jsonl(tmp_path):
    import json

    from cudaperf.train.runlog import StepLog

    log = StepLog(tmp_path, "grpo")
    log.add(
        {
            "kind": "rollout",
            "step": 3,
            "rows": 2,
            "samples": [{"task": "t", "turn": 1, "text": "a"}, {"task": "t", "turn": 2}],
        }
    )
    log.add({"kind": "step", "step": 4})
    steps = [json.loads(x) for x in (tmp_path / "steps.jsonl").read_text().splitlines()]
    assert [s["kind"] for s in steps] == ["rollout", "step"] and "samples" not in steps[0]
    done = [json.loads(x) for x in (tmp_path / "completions.jsonl").read_text().splitlines()]
    assert done == [
        {"step": 3, "task": "t", "turn": 1, "text": "a"},
        {"step": 3, "task": "t", "turn": 2},
    ]
    StepLog(tmp_path, "grpo", main=False).add({"kind": "rollout", "samples": [{"task": "u"}]})
    assert len((tmp_path / "completions.jsonl").read_text().splitlines()) == 2  # main only


def _jsonl(path):
    import json

    return [json.loads(x) for x in path.read_text().splitlines()]


def test_resuming_sets_aside_what_followed_the_checkpoint_in_the_logs(tmp_path):
    """The order a GRPO process writes (rollout of step s logged at s - 1), as the ablation's
    process that died after checkpoint-40 left it, a cut last line included."""
    import json

    from cudaperf.train.runlog import StepLog

    kinds = [("rollout", 39), ("step", 40), ("trainer", 40), ("rollout", 40), ("step", 41)]
    kinds += [("trainer", 41)]
    lines = [json.dumps({"kind": k, "step": s}) + "\n" for k, s in kinds]
    (tmp_path / "steps.jsonl").write_text("".join(lines) + '{"kind": "rollo')
    done = [json.dumps({"step": s, "task": t}) + "\n" for s in (39, 40) for t in "ab"]
    (tmp_path / "completions.jsonl").write_text("".join(done))
    log = StepLog(tmp_path, "grpo", resumes=str(tmp_path / "checkpoint-40"))
    log.add({"kind": "layout"})  # the resumed process's first record
    log.add({"kind": "rollout", "step": 40, "samples": [{"task": "c"}]})
    steps = [(r["kind"], r.get("step")) for r in _jsonl(tmp_path / "steps.jsonl")]
    assert steps == kinds[:3] + [("layout", None), ("rollout", 40)]
    assert [(r["step"], r["task"]) for r in _jsonl(tmp_path / "completions.jsonl")] == [
        (39, "a"),
        (39, "b"),
        (40, "c"),
    ]
    aside = tmp_path / "after-checkpoint-40"
    assert (aside / "steps.jsonl").read_text() == "".join(lines[3:]) + '{"kind": "rollo\n'
    assert (aside / "completions.jsonl").read_text() == "".join(done[2:])


def test_a_resume_with_nothing_after_its_checkpoint_changes_no_log(tmp_path):
    import json

    from cudaperf.train.runlog import set_aside_after

    text = "".join(json.dumps({"kind": k, "step": 2}) + "\n" for k in ("step", "trainer"))
    (tmp_path / "steps.jsonl").write_text(text)
    (tmp_path / "completions.jsonl").write_text('{"step": 1, "task": "a"}\n')
    assert set_aside_after(tmp_path, 2) is None
    assert (tmp_path / "steps.jsonl").read_text() == text
    assert not (tmp_path / "after-checkpoint-2").exists()
    # a log without step 2's records is kept whole: no cut point can be trusted
    (tmp_path / "steps.jsonl").write_text('{"kind": "step", "step": 1}\n{"kind": "x"}\n')
    assert set_aside_after(tmp_path, 2) is None
    assert len((tmp_path / "steps.jsonl").read_text().splitlines()) == 2


def test_resume_with_no_checkpoint_raises_before_training(tmp_path):
    from cudaperf.train.runlog import train_until_stopped

    class Trainer:  # training must not start: a silent new run would pass for a resumed one
        def train(self, resume_from_checkpoint=None):
            raise AssertionError("trained")

    with pytest.raises(ValueError, match="no checkpoint-N folder"):
        train_until_stopped(Trainer(), tmp_path, resume=True)


def test_processes_meet_and_destroy_their_group_after_a_run_not_after_an_interruption(
    monkeypatch,
):
    import torch.distributed as dist

    from cudaperf.train.runlog import end_processes

    calls = []

    class Acc:
        def __init__(self, n):
            self.num_processes = n

        def wait_for_everyone(self):
            calls.append("barrier")

    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "destroy_process_group", lambda: calls.append("destroy"))
    end_processes(Acc(2), interrupted=False)
    assert calls == ["barrier", "destroy"]
    calls.clear()
    end_processes(Acc(2), interrupted=True)  # one process may be stuck in a collective
    end_processes(Acc(1), interrupted=False)  # nothing to destroy
    assert calls == []


def test_the_time_to_save_is_counted_so_the_stop_ends_inside_the_budget(monkeypatch):
    """Steps of 10 s, a checkpoint save of 20 s: after step 2 (at 40 s) one more step and the
    two saves of a stop (checkpoint, final) would end at 40 + 30 + 40 = 110 s > 100 s, so the
    run stops there and ends near 80 s. Predicting 1.5 steps alone went on to step 3 (70 s)
    and, with its saves, ended at 110 s."""
    from transformers import TrainerControl, TrainerState

    from cudaperf.train import runlog

    now = [0.0]
    monkeypatch.setattr(runlog.time, "perf_counter", lambda: now[0])
    budget = runlog.TimeBudget(100.0)
    assert _steps(budget, [10.0], now) == [False]
    now[0] += 20.0  # the checkpoint save after step 1
    budget.on_save(None, TrainerState(), TrainerControl())
    assert budget.saves == [20.0] and budget.stopping == 40.0
    assert _steps(budget, [10.0], now) == [True]  # step 2 ends at 40 s (30 s since step 1)
    assert now[0] + budget.stopping <= 100.0


def test_the_budget_counts_from_the_given_start(monkeypatch):
    from cudaperf.train import runlog

    now = [50.0]
    monkeypatch.setattr(runlog.time, "perf_counter", lambda: now[0])
    # the run started at 0 s; 50 s went on loading before the budget object was made
    assert _steps(runlog.TimeBudget(100.0, started=0.0), [20.0], now) == [True]  # 70 + 30
    now[0] = 50.0
    assert _steps(runlog.TimeBudget(100.0), [20.0], now) == [False]  # 20 + 30 from 50 s


class _Interrupted:
    """A trainer whose `train` is stopped by Ctrl-C after `steps` steps."""

    def __init__(self, out, steps: int, processes: int = 1, signal_in_save: bool = False):
        from types import SimpleNamespace

        self.out, self.signal_in_save = out, signal_in_save
        self.state = SimpleNamespace(global_step=steps)
        self.accelerator = SimpleNamespace(num_processes=processes)
        self.model = object()
        self.saved = []

    def train(self, resume_from_checkpoint=None):
        raise KeyboardInterrupt

    def _save_checkpoint(self, model, trial):
        import os
        import signal

        if self.signal_in_save:  # a second Ctrl-C while the checkpoint is written
            os.kill(os.getpid(), signal.SIGINT)
        (self.out / f"checkpoint-{self.state.global_step}").mkdir()
        self.saved.append(self.state.global_step)


def test_ctrl_c_saves_a_resumable_checkpoint_and_stops_as_interrupted(tmp_path):
    from cudaperf.train.runlog import RunInterrupted, train_until_stopped

    trainer = _Interrupted(tmp_path, steps=3, signal_in_save=True)
    try:
        train_until_stopped(trainer, tmp_path, resume=False)
    except RunInterrupted as e:
        got = e
    except KeyboardInterrupt:
        pytest.fail("a second Ctrl-C cut the checkpoint's save short")
    assert isinstance(got, KeyboardInterrupt)  # the CLI's Ctrl-C handling still applies
    assert trainer.saved == [3] and got.checkpoint == str(tmp_path / "checkpoint-3")
    assert got.step == 3
    for steps, procs in ((0, 1), (3, 2)):  # nothing trained; a save others would not join
        trainer = _Interrupted(tmp_path, steps=steps, processes=procs)
        with pytest.raises(RunInterrupted) as e:
            train_until_stopped(trainer, tmp_path, resume=False)
        assert trainer.saved == [] and e.value.checkpoint is None and e.value.step == steps


def test_finite_updates_skips_only_an_update_with_a_nan_or_an_infinity():
    from types import SimpleNamespace

    import torch

    from cudaperf.train.runlog import FiniteUpdates

    lin = torch.nn.Linear(2, 2)
    opt = torch.optim.AdamW(lin.parameters(), lr=0.1)
    seen: list[dict] = []
    guard = FiniteUpdates(seen.append)
    for step, bad in enumerate((None, float("nan"), float("inf"), None)):
        before = [p.detach().clone() for p in lin.parameters()]
        lin(torch.ones(1, 2)).sum().backward()
        if bad is not None:
            lin.bias.grad[0] = bad  # one value of one gradient
        guard.on_pre_optimizer_step(None, SimpleNamespace(global_step=step), None, optimizer=opt)
        opt.step()
        opt.zero_grad()
        moved = any(not torch.equal(a, p) for a, p in zip(before, lin.parameters(), strict=True))
        assert moved is (bad is None), step
        assert all(torch.isfinite(p).all() for p in lin.parameters())
    assert guard.skipped == [2, 3]
    assert [r["step"] for r in seen] == [2, 3] and seen[0]["kind"] == "skipped_update"
    other = FiniteUpdates(seen.append)  # another process than the main one skips, silently
    lin(torch.ones(1, 2)).sum().backward()
    lin.bias.grad[0] = float("nan")
    other.on_pre_optimizer_step(
        None, SimpleNamespace(global_step=7, is_world_process_zero=False), None, optimizer=opt
    )
    assert other.skipped == [8] and len(seen) == 2 and lin.bias.grad is None


def test_a_skipped_update_names_where_the_non_finite_gradients_are():
    """The record of a skipped update says which tensors' gradients were not finite, in the
    model's order (the deepest one brackets where the NaN entered the backward pass), and the
    warning names the deepest; an optimizer without the model still counts them."""
    from types import SimpleNamespace

    import torch

    from cudaperf.train.runlog import FiniteUpdates

    net = torch.nn.Sequential(*(torch.nn.Linear(2, 2) for _ in range(3)))
    opt = torch.optim.AdamW(reversed(list(net.parameters())), lr=0.1)  # not the model's order
    seen: list[dict] = []
    for model in (net, None):
        net(torch.ones(1, 2)).sum().backward()
        net[0].weight.grad[0, 0] = float("inf")
        net[1].weight.grad[1, 1] = float("nan")
        FiniteUpdates(seen.append).on_pre_optimizer_step(
            None, SimpleNamespace(global_step=4), None, optimizer=opt, model=model
        )
        opt.zero_grad()
    named, bare = seen
    assert named["step"] == 5 and named["tensors"] == 2 and named["of"] == 6
    assert named["nan_tensors"] == 1 and named["finite_after_first"] == 4
    assert (named["first"], named["last"]) == ("0.weight", "1.weight")
    assert bare["tensors"] == 2 and bare["nan_tensors"] == 1 and bare["first"].startswith("param")
