from __future__ import annotations

import json
import shutil
import statistics

import pytest

from cudaperf.train.grpo import GrpoOptions, run_grpo
from tests.train.fakes import FakeEvaluator, ScriptedPolicy, reply
from tests.train.helpers import grpo_options, read_steps, write_task_file

pytest.importorskip("trl")


def test_single_turn_step_with_the_policy_generating_and_a_fake_evaluator(tmp_path, tiny):
    from dataclasses import asdict

    from cudaperf.reward import RewardConfig

    reward = RewardConfig.preset("outcome_only", ["structure_weight=0.5"])
    rep = run_grpo(grpo_options(tmp_path, tiny, reward=reward), evaluator=FakeEvaluator())
    assert rep["steps"] == 1
    # the returned report is report.json's (the H200 GPU test once failed on (0,) == [0])
    assert rep == json.loads((tmp_path / "run" / "report.json").read_text())
    assert rep["options"]["reward"] == asdict(reward)  # the whole reward, not a preset name
    roll = [r for r in read_steps(tmp_path / "run") if r["kind"] == "rollout"]
    assert roll and roll[0]["rows"] == 2 and roll[0]["completion_tokens"] > 0
    assert roll[0]["status_share"] == {"format_error": 1.0}  # a random model writes no block
    assert "samples" not in roll[0]  # the replies are in completions.jsonl, one per row
    done = (tmp_path / "run" / "completions.jsonl").read_text().splitlines()
    assert [json.loads(x)["status"] for x in done] == ["format_error", "format_error"]
    assert any(r["kind"] == "trainer" and "loss" in r for r in read_steps(tmp_path / "run"))
    assert (tmp_path / "run" / "final" / "model.safetensors").is_file()


def test_the_generation_mode_reaches_the_policys_sampling(tmp_path, tiny, monkeypatch):
    import cudaperf.generation as gen

    seen, real = [], gen.generate_ids
    monkeypatch.setattr(gen, "generate_ids", lambda *a, **k: seen.append(a[3]) or real(*a, **k))
    rep = run_grpo(grpo_options(tmp_path, tiny, generation="static"), evaluator=FakeEvaluator())
    assert rep["steps"] == 1 and seen == ["static"]
    roll = [r for r in read_steps(tmp_path / "run") if r["kind"] == "rollout"]
    assert roll[0]["rows"] == 2 and roll[0]["completion_tokens"] > 0


def test_merged_generation_weights_sample_from_a_twin_refreshed_once_a_step(
    tmp_path, tiny, monkeypatch
):
    """`--generation-weights merged`: both turns of both steps sample from one plain twin (not
    the PEFT policy), built at the first step and refreshed at the first turn of each later
    one (train.twin); without a LoRA policy the option is refused."""
    import cudaperf.generation as gen
    from cudaperf.train.twin import MergedTwin

    seen, real = [], gen.generate_ids
    monkeypatch.setattr(gen, "generate_ids", lambda *a, **k: seen.append(a[0]) or real(*a, **k))
    refreshes, real_refresh = [], MergedTwin.refresh
    monkeypatch.setattr(MergedTwin, "refresh", lambda t: refreshes.append(1) or real_refresh(t))
    opts = grpo_options(
        tmp_path,
        tiny,
        turns=2,
        num_generations=4,
        lora_r=4,
        max_steps=2,
        generation_weights="merged",
    )
    rep = run_grpo(opts, evaluator=FakeEvaluator())
    assert rep["steps"] == 2 and len(seen) == 4  # 2 steps x 2 turns
    assert len({id(m) for m in seen}) == 1 and "Peft" not in type(seen[0]).__name__
    assert len(refreshes) == 2  # built (with its first refresh) at step 1, refreshed at step 2
    with pytest.raises(ValueError, match="needs a LoRA policy"):
        grpo_options(tmp_path, tiny, generation_weights="merged")
    with pytest.raises(ValueError, match="--generation-weights 'both'"):
        grpo_options(tmp_path, tiny, lora_r=4, generation_weights="both")


def test_gradient_checkpointing_reaches_trl_and_the_lora_update_trains(tmp_path, tiny):
    """On by default (a step of the ablation's shape ran out of memory on an 80 GB H100
    without it; tests/train/test_gpu.py measures the peak): TRL gets it, and the LoRA
    adapter still learns under it (PEFT needs its inputs to require grads)."""
    import torch
    from safetensors.torch import load_file

    from cudaperf.train.grpo import _config

    assert _config(grpo_options(tmp_path, tiny)).gradient_checkpointing is True
    off = grpo_options(tmp_path, tiny, gradient_checkpointing=False)
    assert _config(off).gradient_checkpointing is False
    opts = grpo_options(tmp_path, tiny, lora_r=4, lr=1e-2, turns=2, num_generations=4)
    rep = run_grpo(opts, evaluator=FakeEvaluator(), generate=_scripted(tiny))
    assert rep["steps"] == 1 and rep["options"]["gradient_checkpointing"] is True
    w = load_file(str(tmp_path / "run" / "final" / "adapter_model.safetensors"))
    b = [v for k, v in w.items() if "lora_B" in k]
    assert b and any(torch.count_nonzero(v) for v in b)  # lora_B starts at 0: it moved


def _scripted(tiny):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny))
    good = reply('__global__ void k(int n) {}\nextern "C" void f() {}')
    return ScriptedPolicy(first=[reply("nope"), good], later=[good], tokenizer=tok)


def test_multi_turn_step_with_compile_only_rewards_and_lora(tmp_path, tiny):
    if shutil.which("nvcc") is None:
        pytest.skip("compile-only rewards need nvcc")
    from cudaperf.execute.session import EvalSession, training_config

    session = EvalSession(training_config(compile_only=True, cache_dir=tmp_path / "cache"))
    opts = grpo_options(tmp_path, tiny, turns=2, num_generations=4, lora_r=4, pieces_mib=0.01)
    rep = run_grpo(opts, evaluator=session, generate=_scripted(tiny))
    roll = [r for r in read_steps(tmp_path / "run") if r["kind"] == "rollout"][0]
    assert rep["steps"] == 1 and roll["rows"] == 4
    assert set(roll["status_share"]) <= {"compile_error", "compiled"}
    assert roll["score_by_turn"][1] >= roll["score_by_turn"][0]
    assert roll["analyse_s"] > 0  # the turn's candidates were analysed before scoring
    final = tmp_path / "run" / "final"
    assert list(final.glob("adapter_model.safetensors.part000"))  # saved in pieces
    from cudaperf.train.models import load_policy

    assert load_policy(str(tiny), adapter=final).model is not None  # pieces join back


def test_resume_continues_from_the_last_checkpoint_and_logs_each_step_once(tmp_path, tiny):
    """A resume continues checkpoint-1; what a process that died past it had logged (step 2's
    records and replies, written here as such a process writes them) goes to
    after-checkpoint-1/, not beside the redone step 2."""
    run_grpo(grpo_options(tmp_path, tiny), evaluator=FakeEvaluator(), generate=_scripted(tiny))
    run = tmp_path / "run"
    dead = [{"kind": "rollout", "step": 1}, {"kind": "step", "step": 2}]
    dead_lines = "".join(json.dumps({"run": "grpo", **r}) + "\n" for r in dead)
    with (run / "steps.jsonl").open("a") as f:
        f.write(dead_lines)
    with (run / "completions.jsonl").open("a") as f:
        f.write('{"step": 1, "task": "dead"}\n')
    with pytest.raises(ValueError, match=r"other settings: --gamma 0\.9 \(the run: "):
        run_grpo(
            grpo_options(tmp_path, tiny, max_steps=2, gamma=0.9, resume=True),
            evaluator=FakeEvaluator(),
            generate=_scripted(tiny),
        )
    rep = run_grpo(
        grpo_options(tmp_path, tiny, max_steps=2, resume=True),
        evaluator=FakeEvaluator(),
        generate=_scripted(tiny),
    )
    assert rep["resumed_from"].endswith("checkpoint-1") and rep["steps"] == 2
    logs = read_steps(tmp_path / "run")
    for kind in ("step", "rollout"):
        steps = [r["step"] for r in logs if r["kind"] == kind]
        assert len(steps) == len(set(steps)) == 2, (kind, steps)
    done = [json.loads(x) for x in (run / "completions.jsonl").read_text().splitlines()]
    assert [x["step"] for x in done] == [0, 0, 1, 1] and "dead" not in {x["task"] for x in done}
    assert (run / "after-checkpoint-1" / "steps.jsonl").read_text() == dead_lines
    aside = (run / "after-checkpoint-1" / "completions.jsonl").read_text()
    assert aside == '{"step": 1, "task": "dead"}\n'


def test_resume_without_optimizer_state_keeps_the_step_and_learning_rate(tmp_path, tiny):
    """A checkpoint carried between machines without optimizer.pt (bench/train_h200.sh pack)
    resumes at its step with the run's learning rate (constant schedule)."""
    run_grpo(grpo_options(tmp_path, tiny), evaluator=FakeEvaluator(), generate=_scripted(tiny))
    ck = tmp_path / "run" / "checkpoint-1"
    (ck / "optimizer.pt").unlink()
    # and a run started before --sampler existed: it ran with the default, so it resumes
    recorded = tmp_path / "run" / "options.json"
    was = json.loads(recorded.read_text())
    recorded.write_text(json.dumps({k: v for k, v in was.items() if k != "sampler"}))
    rep = run_grpo(
        grpo_options(tmp_path, tiny, max_steps=3, resume=True),
        evaluator=FakeEvaluator(),
        generate=_scripted(tiny),
    )
    assert rep["resumed_from"].endswith("checkpoint-1") and rep["steps"] == 3
    logs = read_steps(tmp_path / "run")
    rates = [r["learning_rate"] for r in logs if "learning_rate" in r]
    assert len(rates) >= 3 and set(rates) == {grpo_options(tmp_path, tiny).lr}


def test_a_restored_checkpoint_as_the_adapter_resumes_the_run(tmp_path, tiny):
    """What bench/train_h200.sh `restore` + `bgstart` do on a fresh machine: the checkpoint,
    carried without optimizer.pt, is both --adapter and the --resume point of the same run
    folder (its holdout.json beside it), and the run goes on from its step."""
    opts = grpo_options(tmp_path, tiny, lora_r=4)
    run_grpo(opts, evaluator=FakeEvaluator(), generate=_scripted(tiny))
    ck = tmp_path / "run" / "checkpoint-1"
    (ck / "optimizer.pt").unlink()
    again = grpo_options(tmp_path, tiny, lora_r=4, adapter=ck, max_steps=2, resume=True)
    rep = run_grpo(again, evaluator=FakeEvaluator(), generate=_scripted(tiny))
    assert rep["resumed_from"].endswith("checkpoint-1") and rep["steps"] == 2
    assert (tmp_path / "run" / "checkpoint-2").is_dir()


def test_bad_options_are_clear(tmp_path, tiny):
    with pytest.raises(ValueError, match="give a RewardConfig"):
        grpo_options(tmp_path, tiny, reward="outcome_only")  # a preset name is the CLI's business
    for kw, flag in (
        ({"lr": 0.0}, "--lr 0.0"),
        ({"beta": -1.0}, "--beta -1.0"),
        ({"temperature": 0.0}, "--temperature 0.0"),
        ({"wall_budget_s": 0.0}, "--wall-budget 0.0"),
        ({"turns": 0, "num_generations": 4}, "--turns 0: use >= 1"),
        ({"lora_r": -1}, "--lora-r -1: use >= 1"),  # before any run folder is made
    ):
        with pytest.raises(ValueError, match=flag):
            grpo_options(tmp_path, tiny, **kw)
    with pytest.raises(ValueError, match="multiple of --turns"):
        grpo_options(tmp_path, tiny, turns=2, num_generations=3)
    with pytest.raises(ValueError, match="--canaries"):
        grpo_options(tmp_path, tiny, canaries=-1)
    with pytest.raises(ValueError, match="--canary-every 0"):
        grpo_options(tmp_path, tiny, canary_every=0)
    with pytest.raises(ValueError, match="--eval-gpus"):
        grpo_options(tmp_path, tiny, eval_gpus=(-1,))
    with pytest.raises(ValueError, match="model"):
        run_grpo(grpo_options(tmp_path, tmp_path / "none"), evaluator=FakeEvaluator())
    with pytest.raises(ValueError, match="has no GPU 99"):  # not silently compile-only
        run_grpo(grpo_options(tmp_path, tiny, eval_gpus=(99,)), evaluator=FakeEvaluator())
    (tmp_path / "test_only").mkdir()
    only_test = write_task_file(tmp_path / "test_only", families=("histogram",))
    with pytest.raises(ValueError, match="training-split"):
        run_grpo(grpo_options(tmp_path, tiny, tasks=only_test))


def test_the_seed_changes_sampling_but_not_the_pool_or_the_holdout(tmp_path, tiny):
    from cudaperf.train.grpo import training_pool

    pa = training_pool(grpo_options(tmp_path, tiny, pool=2))[1]  # 2 of the 5 fit tasks
    pb = training_pool(grpo_options(tmp_path, tiny, pool=2, seed=7))[1]
    assert [t.id for t in pa] == [t.id for t in pb]
    assert training_pool(grpo_options(tmp_path, tiny, pool=2, split_seed=7))[1] != pa  # it moves it
    kw = dict(pool=3, val_families=1, holdout_share=0.3)
    ha = training_pool(grpo_options(tmp_path, tiny, **kw))[0]
    assert training_pool(grpo_options(tmp_path, tiny, seed=7, **kw))[0].manifest() == ha.manifest()
    assert (
        training_pool(grpo_options(tmp_path, tiny, split_seed=7, **kw))[0].manifest()
        != ha.manifest()
    )


def test_an_adapter_from_an_sft_run_with_another_holdout_is_refused(tmp_path, tiny):
    from cudaperf.train.data import write_manifest
    from cudaperf.train.grpo import check_same_holdout, training_pool

    kw = dict(pool=3, val_families=1, holdout_share=0.3)
    (tmp_path / "sft" / "final").mkdir(parents=True)
    write_manifest(
        training_pool(grpo_options(tmp_path, tiny, **kw))[0], tmp_path / "sft/holdout.json"
    )
    same = grpo_options(tmp_path, tiny, adapter=tmp_path / "sft" / "final", **kw)
    check_same_holdout(training_pool(same)[0], same)  # the SFT run's split: accepted
    other = grpo_options(tmp_path, tiny, adapter=tmp_path / "sft" / "final", split_seed=7, **kw)
    with pytest.raises(ValueError, match="held out other tasks.*--split-seed"):
        check_same_holdout(training_pool(other)[0], other)
    with pytest.raises(ValueError, match="held out other tasks"):  # and run_grpo checks it
        run_grpo(other, evaluator=FakeEvaluator())


def test_prepare_names_the_pool_tasks_whose_naive_implementation_fails(tmp_path):
    """`prepare_pool` evaluates each task's naive implementation once and returns the tasks
    where it ended neither ok nor compiled (here: one wrong output, one compile error)."""
    from types import SimpleNamespace

    from cudaperf.execute.api import naive_implementation
    from cudaperf.train.data import load_training_tasks
    from cudaperf.train.grpo import prepare_pool

    tasks = [
        t
        for t in load_training_tasks(write_task_file(tmp_path))
        if naive_implementation(t) is not None
    ][:3]
    assert len(tasks) == 3
    seen = []

    def evaluator(jobs):
        seen.append([t.id for t, _ in jobs])
        spoilt = [
            (t, c.model_copy(update={"code": code}))
            for (t, c), code in zip(jobs[1:3], ("WRONG", "x"), strict=True)
        ]
        return FakeEvaluator()(jobs[:1] + spoilt)  # naive kernels have __global__: ok

    secs, bad = prepare_pool(SimpleNamespace(evaluator=evaluator), tasks)
    assert seen == [[t.id for t in tasks]] and secs >= 0
    assert bad == {tasks[1].id: "wrong_output", tasks[2].id: "compile_error"}
    assert prepare_pool(SimpleNamespace(evaluator=evaluator), [])[1] == {}


def test_pool_fits_keeps_only_tasks_whose_fastest_reply_fits_in_max_new_tokens(tmp_path, tiny):
    import transformers

    from cudaperf.train.data import fastest_reply
    from cudaperf.train.grpo import fits_in, training_pool

    tok = transformers.AutoTokenizer.from_pretrained(tiny)
    every = training_pool(grpo_options(tmp_path, tiny, pool=None))[1]
    assert (
        training_pool(
            grpo_options(tmp_path, tiny, pool=None, pool_fits=True, max_new_tokens=100_000), tok
        )[1]
        == every
    )
    lens = sorted(
        len(tok(fastest_reply(t), add_special_tokens=False)["input_ids"]) + 1 for t in every
    )
    cut = lens[len(lens) // 2]  # the median task fits exactly; the longer ones do not
    assert lens.count(cut) == 1 and lens[-1] > cut
    kept = training_pool(
        grpo_options(tmp_path, tiny, pool=None, pool_fits=True, max_new_tokens=cut), tok
    )[1]
    assert len(kept) == len(lens) // 2 + 1
    assert all(fits_in(t, tok, cut) for t in kept)
    assert {t.id for t in every if fits_in(t, tok, cut)} == {t.id for t in kept}
    with pytest.raises(ValueError, match="--pool-fits: no training task"):
        training_pool(
            grpo_options(tmp_path, tiny, pool=None, pool_fits=True, max_new_tokens=2), tok
        )
    with pytest.raises(ValueError, match="tokenizer"):
        training_pool(grpo_options(tmp_path, tiny, pool_fits=True))


def _advantages(monkeypatch) -> list[list[float]]:
    """Every step's advantages as TRL computed them (its batch dict after scoring)."""
    from trl import GRPOTrainer

    seen, real = [], GRPOTrainer._generate_and_score_completions

    def spy(self, *a, **k):
        out = real(self, *a, **k)
        seen.append([float(x) for x in out["advantages"].reshape(-1)])
        return out

    monkeypatch.setattr(GRPOTrainer, "_generate_and_score_completions", spy)
    return seen


def _completions(tmp_path) -> list[dict]:
    text = (tmp_path / "run" / "completions.jsonl").read_text().splitlines()
    return [json.loads(x) for x in text]


def test_a_failure_gets_no_advantage_from_its_turn_in_a_real_step(tmp_path, tiny, monkeypatch):
    """Issue 44's repro through run_grpo: every reply a compile error (score -0.5), two turns.
    TRL's group normalisation over both turns gave -0.865 (turn 1) and +0.865 (turn 2); per
    (task, turn) every advantage is 0."""
    from transformers import AutoTokenizer

    seen = _advantages(monkeypatch)
    tok = AutoTokenizer.from_pretrained(str(tiny))
    bad = ScriptedPolicy(first=[reply("no kernel")], later=[reply("none")], tokenizer=tok)
    rep = run_grpo(
        grpo_options(tmp_path, tiny, turns=2, num_generations=4),
        evaluator=FakeEvaluator(),
        generate=bad,
    )
    assert rep["steps"] == 1 and len(seen) == 1 and len(seen[0]) == 4
    rows = _completions(tmp_path)
    assert {r["status"] for r in rows} == {"compile_error"}
    assert sorted({round(r["return"], 3) for r in rows}) == [-0.7, -0.5]  # two scales ...
    assert seen[0] == pytest.approx([0.0] * 4, abs=1e-6)  # ... and no bias from either


def test_advantages_are_each_rows_return_standardised_within_its_task_and_turn(
    tmp_path, tiny, monkeypatch
):
    """Three chains of two turns with different outcomes: each row's advantage is its
    discounted return standardised among the same turn's rows of its task. Fails when TRL
    rescales again (scale_rewards group or batch), when the reward is the turn's own score
    instead of the return, and when the return drops the speed, structure or ranker terms."""
    from transformers import AutoTokenizer

    seen = _advantages(monkeypatch)
    tok = AutoTokenizer.from_pretrained(str(tiny))
    ok = reply('__global__ void k(int n) {}\nextern "C" void f() {}')
    wrong = reply("__global__ void k(int n) {} // WRONG")
    ce = reply("no kernel")
    policy = ScriptedPolicy(first=[ok, ce, wrong], later=[ce, ok, ok], tokenizer=tok)
    opts = grpo_options(tmp_path, tiny, turns=2, num_generations=6, gamma=0.4)
    run_grpo(opts, evaluator=FakeEvaluator(), generate=policy)
    rows = _completions(tmp_path)
    assert [r["turn"] for r in rows] == [1, 2] * 3  # per chain: turn 1 then turn 2
    for first, second in zip(rows[::2], rows[1::2], strict=True):
        assert first["return"] == pytest.approx(first["score"] + 0.4 * second["score"])
    from cudaperf.reward import RewardConfig

    correct = RewardConfig.preset("unified").correct  # the outcome level of an ok row
    assert all(r["score"] > correct for r in rows if r["status"] == "ok")  # + speed (2x)
    want = []
    for r in rows:
        cell = [x["return"] for x in rows if x["turn"] == r["turn"]]
        want.append((r["return"] - statistics.mean(cell)) / (statistics.stdev(cell) + 1e-4))
    assert seen[0] == pytest.approx(want, abs=1e-4)


def test_the_seed_fixes_the_evaluators_salt_and_no_seed_keeps_it_secret(tmp_path, tiny):
    """PROTOCOL.md: seed s fixes the evaluator's input salt (a resumed process redraws
    nothing; arms of one seed see the same inputs); a run without --seed keeps the secret
    random salt the evaluator draws itself."""
    from cudaperf.train.grpo import make_scorer, seed_salt
    from tests.train.helpers import sample_c_tasks

    tasks = sample_c_tasks()[:2]

    def salt(**kw):
        opts = grpo_options(tmp_path, tiny, compile_only=True, **kw)
        return make_scorer(opts, tasks).evaluator.inner.config.seed_salt

    assert salt(seed=0) == salt(seed=0) == seed_salt(0) and seed_salt(0) is not None
    assert salt(seed=1) != salt(seed=0) and salt(seed=2) != salt(seed=1)
    assert salt() is None and GrpoOptions(out=tmp_path).seed is None


def test_the_trainer_learns_on_the_ids_generated_from_eos_included(tmp_path, tiny, monkeypatch):
    """The prompt ids TRL trains on are the ids the policy generated from (chat template
    applied once, no token dropped), and each completion keeps its EOS (the token that ends the
    reply is a decision the policy learns too)."""
    from transformers import AutoTokenizer

    import cudaperf.generation as gen

    tok = AutoTokenizer.from_pretrained(str(tiny))
    made, seen = [], []
    reply_ids = tok("Plan: none.", add_special_tokens=False)["input_ids"] + [tok.eos_token_id]

    def fake_generate(model, ids, *a, **k):
        made.append(([list(i) for i in ids], [list(reply_ids) for _ in ids]))
        return made[-1][1]

    from trl import GRPOTrainer

    real = GRPOTrainer._generate_and_score_completions

    def spy(self, *a, **k):
        out = real(self, *a, **k)
        seen.append(out)
        return out

    monkeypatch.setattr(gen, "generate_ids", fake_generate)
    monkeypatch.setattr(GRPOTrainer, "_generate_and_score_completions", spy)
    run_grpo(grpo_options(tmp_path, tiny), evaluator=FakeEvaluator())
    ((prompts, comps),), (out,) = made, seen

    def kept(ids, mask):
        return [row[m.bool()].tolist() for row, m in zip(ids, mask, strict=True)]

    assert kept(out["prompt_ids"], out["prompt_mask"]) == prompts
    assert kept(out["completion_ids"], out["completion_mask"]) == comps
    assert all(c[-1] == tok.eos_token_id for c in comps)


def test_a_folder_holding_a_run_is_refused_and_the_budget_counts_loading(
    tmp_path, tiny, monkeypatch
):
    """run_grpo itself refuses to start over a run without resume or overwrite; overwrite
    removes the run only after the inputs loaded (tasks that cannot load leave it whole); and
    its time budget counts from the start, loading and preparing the pool included (the step
    after which the run stops must still end inside the budget)."""
    import cudaperf.train.runlog as runlog

    starts, real = [], runlog.TimeBudget

    class Spy(real):
        def __init__(self, budget_s, started=None):
            starts.append(started)
            super().__init__(budget_s, started)

    monkeypatch.setattr(runlog, "TimeBudget", Spy)
    run_grpo(grpo_options(tmp_path, tiny), evaluator=FakeEvaluator())
    assert starts and starts[0] is not None  # the run's own start, not the budget's creation
    before = sorted(p.name for p in (tmp_path / "run").iterdir())
    with pytest.raises(ValueError, match="holds a run.*--resume"):
        run_grpo(grpo_options(tmp_path, tiny), evaluator=FakeEvaluator())
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == before
    with pytest.raises(ValueError, match="no such task file"):
        run_grpo(
            grpo_options(tmp_path, tiny, overwrite=True, tasks=tmp_path / "gone.jsonl"),
            evaluator=FakeEvaluator(),
        )
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == before
    (tmp_path / "run" / "notes.txt").write_text("mine")
    run_grpo(grpo_options(tmp_path, tiny, overwrite=True), evaluator=FakeEvaluator())
    assert (tmp_path / "run" / "notes.txt").read_text() == "mine"  # the user's file stays
    steps = read_steps(tmp_path / "run")
    assert [r["step"] for r in steps if r.get("kind") == "step"] == [1]  # the new run's only


def test_an_update_with_a_nan_gradient_is_skipped_and_recorded(tmp_path, tiny, monkeypatch):
    """A NaN loss (every gradient NaN, as the ablation's step 41 on an H200) leaves the
    adapter as it was, where the update would have written NaN into every LoRA weight."""
    import torch
    from safetensors.torch import load_file
    from trl import GRPOTrainer

    real = GRPOTrainer.compute_loss

    def nan_loss(self, *a, **kw):
        return real(self, *a, **kw) * float("nan")

    monkeypatch.setattr(GRPOTrainer, "compute_loss", nan_loss)
    opts = grpo_options(tmp_path, tiny, lora_r=4, lr=1e-2, turns=2, num_generations=4)
    rep = run_grpo(opts, evaluator=FakeEvaluator(), generate=_scripted(tiny))
    assert rep["steps"] == 1 and rep["skipped_updates"] == [1]
    (skip,) = read_steps(tmp_path / "run", "skipped_update")
    assert skip["step"] == 1 and skip["tensors"] == skip["of"] == skip["nan_tensors"] > 0
    assert "lora_" in skip["last"]  # named from the trainer's model: every LoRA gradient NaN
    w = load_file(str(tmp_path / "run" / "final" / "adapter_model.safetensors"))
    assert all(torch.isfinite(v).all() for v in w.values())
    b = [v for k, v in w.items() if "lora_B" in k]
    assert b and not any(torch.count_nonzero(v) for v in b)  # lora_B starts at 0: unmoved
