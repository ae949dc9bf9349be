from __future__ import annotations

import json

import pytest

from cudaperf.train.sft import SftOptions, choose_max_length, run_sft
from tests.train.helpers import write_task_file

pytest.importorskip("trl")


def _opts(tmp_path, tiny, **kw):
    base = dict(
        out=tmp_path / "run",
        model=str(tiny),
        tasks=write_task_file(tmp_path),
        epochs=1,
        batch_size=2,
        lora_r=4,
        val_families=1,
        holdout_share=0.0,
    )
    return SftOptions(**(base | kw))


def test_one_sft_epoch_with_lora_writes_adapter_log_and_report(tmp_path, tiny):
    rep = run_sft(_opts(tmp_path, tiny))
    out = tmp_path / "run"
    assert (out / "final" / "adapter_config.json").is_file()
    assert rep["rows_trained"] >= 1 and rep["val_rows"] >= 1 and rep["eval_loss_per_epoch"]
    assert rep["max_length"] % 64 == 0
    hold = json.loads((out / "holdout.json").read_text())
    assert len(hold["val_families"]) == 1 and "histogram" not in hold["fit_families"]
    logs = [json.loads(x) for x in (out / "steps.jsonl").read_text().splitlines()]
    assert any(r["kind"] == "step" for r in logs)


def test_rows_over_the_cap_are_dropped_and_counted(tmp_path, tiny):
    rep = run_sft(_opts(tmp_path, tiny, length_quantile=0.5, lora_r=0, val_families=0))
    assert 0 < rep["dropped_over_cap"] < rep["rows"]
    assert rep["dropped_share"] == round(rep["dropped_over_cap"] / rep["rows"], 4)
    with pytest.raises(ValueError, match="max-length"):
        run_sft(_opts(tmp_path, tiny, max_length=64, lora_r=0, val_families=0, overwrite=True))


def test_full_fine_tune_resumes_from_its_checkpoint(tmp_path, tiny):
    run_sft(_opts(tmp_path, tiny, lora_r=0, val_families=0))
    with pytest.raises(ValueError, match=r"other settings: --lora-r 2 \(the run: 0\); --lr"):
        run_sft(_opts(tmp_path, tiny, lora_r=2, lr=1e-3, val_families=0, resume=True))
    rep = run_sft(_opts(tmp_path, tiny, lora_r=0, val_families=0, epochs=2, resume=True))
    assert rep["resumed_from"] and rep["resumed_from"].endswith(f"checkpoint-{rep['steps'] // 2}")
    assert (tmp_path / "run" / "final" / "model.safetensors").is_file()


def test_length_cap_from_data_and_bad_options(tmp_path, tiny):
    assert choose_max_length([10, 100, 700], 1.0) == 704
    assert choose_max_length(list(range(1, 101)), 0.5) == 64
    with pytest.raises(ValueError, match="lora-r"):
        _opts(tmp_path, tiny, lora_r=-1)
    with pytest.raises(ValueError, match="model"):
        run_sft(_opts(tmp_path, tiny, model=str(tmp_path / "missing")))


def test_loss_is_on_the_reply_only_and_it_ends_with_eos(tmp_path, tiny):
    from cudaperf.train import sft
    from cudaperf.train.data import load_training_tasks, sft_rows
    from cudaperf.train.models import load_policy

    pol = load_policy(str(tiny))
    rows = sft_rows(load_training_tasks(write_task_file(tmp_path)))
    ds, _ = sft._dataset(rows, sft._lengths(rows, pol.tokenizer), 100000)
    opts = _opts(tmp_path, tiny, lora_r=0)
    ex = sft._trainer(opts, pol, ds, None, 100000, []).train_dataset[0]
    taught = [t for t in ex["labels"] if t != -100]
    assert ex["labels"][-1] == pol.tokenizer.eos_token_id
    assert pol.tokenizer.decode(taught).startswith("Plan:")  # the prompt is not taught


def test_validation_rows_over_the_cap_leave_no_held_out_loss_but_training_rows_are_an_error():
    """The cap comes from the training rows: validation rows all over it mean an empty
    validation set (the run goes on), training rows all over it are a one-line error."""
    from cudaperf.train import sft

    rows = [{"prompt": [], "completion": []}] * 2
    ds, dropped = sft._dataset(rows, [900, 1000], 512, training=False)
    assert len(ds) == 0 and dropped == 2
    with pytest.raises(ValueError, match="every one of the 2 training rows is longer"):
        sft._dataset(rows, [900, 1000], 512)


def _files(folder):
    """Every file under `folder` with its bytes (a folder 'unchanged' is this unchanged)."""
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def test_a_second_run_into_a_folder_holding_one_is_refused_unless_overwrite(tmp_path, tiny):
    """The issue's case: rerunning without --resume replaced final/ and report.json and
    appended to the old steps.jsonl. Now it is refused and the folder stays byte for byte;
    overwrite replaces the whole run, so the folder tells of one run only."""
    run_sft(_opts(tmp_path, tiny, val_families=0))
    out = tmp_path / "run"
    before = _files(out)
    with pytest.raises(ValueError, match="holds a run.*--resume.*--overwrite"):
        run_sft(_opts(tmp_path, tiny, val_families=0, epochs=2))
    assert _files(out) == before
    # overwrite, but a refusal after loading (every row over the cap): nothing removed yet
    with pytest.raises(ValueError, match="max-length"):
        run_sft(_opts(tmp_path, tiny, val_families=0, max_length=64, overwrite=True))
    assert _files(out) == before
    rep = run_sft(_opts(tmp_path, tiny, val_families=0, epochs=2, overwrite=True))
    steps = [json.loads(x) for x in (out / "steps.jsonl").read_text().splitlines()]
    numbers = [r["step"] for r in steps if r["kind"] == "step"]
    assert numbers == list(range(1, rep["steps"] + 1))  # this run's steps, once each
    assert sorted(p.name for p in out.glob("checkpoint-*")) == [f"checkpoint-{rep['steps']}"]


class _CtrlC:
    """A callback pressing Ctrl-C (SIGINT to this process) at the end of step `at`."""

    def __init__(self, at: int) -> None:
        self.at = at

    def __getattr__(self, name):  # every other trainer event: nothing to do
        return lambda *a, **k: None

    def on_step_end(self, args, state, control, **kw):
        import os
        import signal

        if state.global_step == self.at:
            os.kill(os.getpid(), signal.SIGINT)


def test_ctrl_c_saves_checkpoint_n_that_resume_continues(tmp_path, tiny, monkeypatch):
    from cudaperf.train import sft
    from cudaperf.train.runlog import RunInterrupted

    make = sft._trainer
    monkeypatch.setattr(sft, "_trainer", lambda *a: make(*a[:-1], [*a[-1], _CtrlC(2)]))
    with pytest.raises(RunInterrupted) as e:
        run_sft(_opts(tmp_path, tiny, val_families=0, epochs=3, batch_size=1))
    out = tmp_path / "run"
    assert e.value.step == 2 and e.value.checkpoint == str(out / "checkpoint-2")
    assert (out / "checkpoint-2" / "trainer_state.json").is_file()
    assert (out / "checkpoint-2" / "optimizer.pt").is_file()
    assert not (out / "final").exists() and not (out / "report.json").exists()
    monkeypatch.setattr(sft, "_trainer", make)
    with (out / "steps.jsonl").open("a") as f:  # as a process that died after checkpoint-2
        f.write('{"kind": "step", "step": 3}\n')
    rep = run_sft(_opts(tmp_path, tiny, val_families=0, epochs=3, batch_size=1, resume=True))
    assert rep["resumed_from"] == str(out / "checkpoint-2") and rep["steps"] > 2
    steps = [json.loads(x) for x in (out / "steps.jsonl").read_text().splitlines()]
    assert [r["step"] for r in steps if r["kind"] == "step"] == list(range(1, rep["steps"] + 1))
    assert (
        out / "after-checkpoint-2" / "steps.jsonl"
    ).read_text() == '{"kind": "step", "step": 3}\n'


def test_the_time_budget_counts_loading_the_model(tmp_path, tiny, monkeypatch):
    """Loading is part of the budget: the budget's clock starts before the model loads (it
    used to start after, so a slow load ran past an outside limit), and a run whose loading
    took the whole budget stops after its first step."""
    import time

    from cudaperf.train import models, runlog

    load, made, loading = models.load_policy, [], []

    class Budget(runlog.TimeBudget):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            made.append(self)

    def slow_load(*a, **k):
        loading.append(time.perf_counter())
        time.sleep(2.0)
        return load(*a, **k)

    monkeypatch.setattr(models, "load_policy", slow_load)
    monkeypatch.setattr(runlog, "TimeBudget", Budget)
    rep = run_sft(_opts(tmp_path, tiny, val_families=0, epochs=3, batch_size=1, time_budget_s=2.0))
    assert made[0].t0 < loading[0]
    assert rep["stopped_by_time_budget"] and rep["steps"] == 1
