"""`run_grpo`: multi-turn GRPO with TRL's `GRPOTrainer` and the unified reward.

The prompts are the training pool's first prompts (training-split families, minus the
families and tasks `train.data.split_training` holds out, so an SFT run and a GRPO run with
the same holdout settings never train on the held-out tasks). Each step takes
`groups_per_step` tasks × `num_generations` rows; the rollout (`train.rollout`) turns a
task's rows into `num_generations / turns` chains of `turns` turns through
`refine.episode`, scored by one persistent evaluator (`execute.session.EvalSession`, the
`TRAINING` preset, on the GPUs `train.layout.plan_layout` gives), the structural analyzer (a
turn's candidates at once in a process pool, `reward.analyzers`) and the ranker, with the reward
`opts.reward` (a `RewardConfig`: a preset, `unified` or `outcome_only`, with any field changed;
`report.json` records all of it under `options.reward`). The reward function
(`train.rewards.TurnReturn`) returns each turn's discounted return.

Before the first step the pool's naive implementations are evaluated once (`prepare`): the
per-task baselines are then cached, so a step pays for compiling and timing candidates only.
The `prepare` row of `steps.jsonl` names the pool tasks whose naive implementation did not
pass (`naive_not_ok`): a verified kernel failing the check makes that task's rewards suspect.

Run folder: `holdout.json`, `steps.jsonl` (the layout, rollout statistics with the step-time
breakdown, and trainer logs per step), `checkpoint-N/` (every `save_steps`; `resume=True`
continues from the newest), `final/` and `report.json`.

Under `accelerate launch --num_processes N` (or torchrun) each process gets whole groups: TRL's
`RepeatSampler` puts the `num_generations` copies of a prompt next to each other and the
dataloader hands each process `per_device_train_batch_size` = groups_per_step ×
num_generations consecutive rows, so every group is generated, evaluated and advantaged in one
process (the rollout refuses a split group), and the processes' prompts of a step differ. Each
process scores its own groups with its own evaluator (so nothing is evaluated twice), the pool's
naive implementations are prepared once, shared out between the processes (the others read
them from the result cache), the rollout records are gathered into one `steps.jsonl` row per
step written by the main process, and only the main process saves checkpoints' model files,
`final/` and the report (the trainer saves each process's RNG state with a checkpoint).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from cudaperf.fields import check_numbers, wall_budget_problem
from cudaperf.fields import option as _o
from cudaperf.reward.config import RewardConfig
from cudaperf.train.data import load_training_tasks, split_training, write_manifest
from cudaperf.train.rollout import RolloutOptions
from cudaperf.train.sampler import SAMPLERS, epoch_seeded_trainer

log = logging.getLogger(__name__)

__all__ = ["GrpoOptions", "prompt_dataset", "run_grpo", "training_pool"]


@dataclass(frozen=True)
class GrpoOptions:
    """Everything `run_grpo` needs; validated on creation. Each field's `metadata["help"]` is
    the text of its `cudaperf train grpo` option, whose default is the field's."""

    out: Path = field(metadata={"help": "Run folder (checkpoints, steps.jsonl, final/)."})
    model: str = _o("smollm2", "smollm2 (bundled SmolLM2-135M-Instruct), a HF name or a path.")
    adapter: Path | None = _o(None, "LoRA adapter to continue (e.g. the SFT run's final/).")
    tasks: Path = _o(Path("data/tasks.jsonl.gz"), "Task file (training split used).")
    splits: Path | None = _o(None, "splits.json (default: beside the task file).")
    kinds: tuple[str, ...] = _o(("c2cuda",), "Only these task kinds (c2cuda, torch2cuda).")
    pool: int | None = _o(64, "Training tasks in the pool (a seeded choice; CLI 0 or None: all).")
    pool_fits: bool = _o(
        False,
        "Pool only tasks whose fastest implementation, as the SFT reply, fits in "
        "--max-new-tokens under the policy's tokenizer (a policy imitating its SFT targets is "
        "then not cut off).",
    )
    reward: RewardConfig = _o(
        RewardConfig(), "The reward: levels, weights and transforms (--preset, --reward)."
    )
    ranker: str = _o("default", "Ranker term: default (packaged), none, or a ranker file/folder.")
    turns: int = _o(2, "Turns per chain.")
    gamma: float = _o(0.4, "Discount of later turns' scores.")
    num_generations: int = _o(8, "Rows per task group (chains x turns).")
    groups_per_step: int = _o(2, "Tasks per step.")
    max_steps: int = _o(30, "Training steps.")
    max_new_tokens: int = _o(1024, "Tokens per reply.")
    temperature: float = _o(1.0, "Sampling temperature (> 0: GRPO samples its replies).")
    generation: str = _o(
        "auto", "cudaperf.generation mode: auto, dynamic, static, compile, continuous."
    )
    generation_weights: str = _o(
        "adapter",
        "What samples: adapter (the policy, LoRA layers unmerged) or merged (a plain twin "
        "with the LoRA update merged in, refreshed each step; one more copy of the weights).",
    )
    lr: float = _o(1e-5, "Learning rate (constant).")
    beta: float = _o(0.0, "KL coefficient to the reference model (0: none, no reference copy).")
    lora_r: int = _o(0, "New LoRA adapter rank (0: train all weights or the given adapter).")
    gradient_checkpointing: bool = _o(
        True,
        "Recompute each layer's activations in the backward pass instead of keeping them "
        "(TRL's default; same gradients). Without it a step of 4 groups x 8 rows of up to "
        "~4k tokens ran out of memory on an 80 GB H100 (SmolLM2-135M, 2026-12-05).",
    )
    save_steps: int = _o(10, "Save a checkpoint every N steps.")
    val_families: int = _o(3, "Training families held out whole (the SFT run's holdout).")
    holdout_share: float = _o(0.05, "Share of other families' tasks held out.")
    seed: int | None = _o(
        None,
        "Prompt order, sampling and the evaluator's input salt (fixed per seed, so a "
        "resume redraws nothing); unset: order and sampling as 0, salt secret and random.",
    )
    split_seed: int = _o(0, "Holdout and pool: the SFT run's --seed (checked).")
    sampler: str = _o(
        "trl",
        "Prompt order: trl (TRL's sampler; a resumed run draws other batches than one that "
        "never stopped) or epoch (each epoch's order from the seed and the epoch alone, "
        "however often the run was resumed: train.sampler).",
    )
    eval_gpus: tuple[int, ...] | None = _o(
        None, "GPUs for timing (nvidia-smi indices, e.g. 1 or 1,2; train.layout)."
    )
    eval_workers_per_gpu: int = _o(
        1,
        "C→CUDA candidates checked at once per timing GPU (their checks overlap; timing, "
        "traces and baselines take the GPU alone: execute.isolation.share).",
    )
    canaries: int = _o(0, "Pool tasks whose naive kernel is re-timed (see --canary-every).")
    canary_every: int = _o(
        10,
        "Time the canaries at steps 0, N, 2N, ... (1: every step; one timing costs ~10 s "
        "on an H200).",
    )
    compile_only: bool = _o(False, "Rewards from compiling only (CPU machines, smoke runs).")
    prepare: bool = _o(True, "Evaluate the pool's naive implementations before step 1.")
    wall_budget_s: float | None = _o(
        None,
        "Seconds from the start, loading included. A step cannot be cut short, so a step "
        "starts only when it and the saves after it are expected to end inside the budget (from "
        "the slowest step after the first and the slowest save so far); else the run saves a "
        "checkpoint and stops. The first step always runs.",
    )
    pieces_mib: float | None = _o(
        None, "Save final files larger than this (MiB) in pieces, e.g. 15."
    )
    resume: bool = _o(
        False, "Continue from the newest checkpoint in --out (Ctrl-C saves one and exits 130)."
    )
    overwrite: bool = _o(
        False,
        "Replace the run in --out: its checkpoints, final/, logs and report are removed "
        "once the inputs are loaded and checked (a refusal leaves them as they were).",
    )
    extra: dict = _o({}, "More GRPOConfig fields (expert use).")

    def __post_init__(self) -> None:
        object.__setattr__(self, "out", Path(self.out))
        object.__setattr__(self, "tasks", Path(self.tasks))
        check_numbers(self, seeds=("seed", "split_seed"))
        if not isinstance(self.reward, RewardConfig):
            raise ValueError(
                f"reward={self.reward!r}: give a RewardConfig (e.g. "
                "RewardConfig.preset('outcome_only'))"
            )
        if self.sampler not in SAMPLERS:
            raise ValueError(f"--sampler {self.sampler!r}: use one of {', '.join(SAMPLERS)}")
        if self.turns < 1:  # else the episode's rules named their own fields
            raise ValueError(f"--turns {self.turns}: use >= 1 (1: one reply per chain)")
        RolloutOptions(
            self.turns,
            self.gamma,
            generation=self.generation,  # validates them
            canary_every=self.canary_every,
            generation_weights=self.generation_weights,
        )
        if self.generation_weights == "merged" and self.lora_r == 0 and self.adapter is None:
            raise ValueError(
                "--generation-weights merged needs a LoRA policy (--lora-r or --adapter); "
                "full fine-tuning samples from the model itself (adapter)"
            )
        if self.num_generations < 2 or self.num_generations % self.turns:
            raise ValueError(
                f"--num-generations {self.num_generations}: use >= 2 and a multiple of "
                f"--turns {self.turns} (each group is chains x turns of one task)"
            )
        for name in (
            "groups_per_step",
            "max_steps",
            "max_new_tokens",
            "save_steps",
            "eval_workers_per_gpu",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} {getattr(self, name)}: use >= 1")
        if not self.lr > 0:
            raise ValueError(f"--lr {self.lr}: use a learning rate > 0 (e.g. 1e-5)")
        if self.beta < 0:
            raise ValueError(
                f"--beta {self.beta}: the KL coefficient is >= 0 (0: no reference model)"
            )
        if not self.temperature > 0:
            raise ValueError(
                f"--temperature {self.temperature}: GRPO samples its replies; use "
                "a value > 0 (e.g. 1.0)"
            )
        if self.eval_gpus is not None and (not self.eval_gpus or min(self.eval_gpus) < 0):
            raise ValueError(f"--eval-gpus {self.eval_gpus}: give GPU indices such as 1 or 1,2")
        if self.canaries < 0:
            raise ValueError(f"--canaries {self.canaries}: use 0 (none) or more tasks")
        if self.lora_r < 0:  # before the run folder exists (as SftOptions checks it)
            raise ValueError(f"--lora-r {self.lora_r}: use >= 1, or 0 for full fine-tuning")
        if self.pool is not None and self.pool < 1:
            raise ValueError(f"--pool {self.pool}: use >= 1 (or leave it out for all tasks)")
        if problem := wall_budget_problem(self.wall_budget_s):
            raise ValueError(problem)


def prompt_dataset(tasks):
    """TRL rows: `prompt` = refine's first messages, `task_id`."""
    from datasets import Dataset

    from cudaperf.refine.prompts import first_messages

    return Dataset.from_list([{"prompt": first_messages(t), "task_id": t.id} for t in tasks])


def training_pool(opts: GrpoOptions, tokenizer=None):
    """(the holdout, the training pool): the choice of `opts.pool` fit-set tasks. Both depend
    on `split_seed` (and, with `pool_fits`, on `tokenizer`) only, so runs of every `seed`
    train on one pool and hold out one set. `pool_fits` needs the policy's `tokenizer`."""
    hold = training_holdout(opts)
    return hold, choose_pool(hold, opts, tokenizer)


def training_holdout(opts: GrpoOptions):
    """The `train.data.Holdout` of the training-split tasks (on `split_seed` only)."""
    return split_training(
        load_training_tasks(opts.tasks, opts.splits, opts.kinds),
        opts.val_families,
        opts.holdout_share,
        opts.split_seed,
    )


def choose_pool(hold, opts: GrpoOptions, tokenizer=None) -> list:
    """`training_pool`'s pool from the holdout `hold` (its fit set)."""
    fit = sorted(hold.fit, key=lambda t: t.id)
    if opts.pool_fits:
        if tokenizer is None:
            raise ValueError("training_pool: pool_fits needs the policy's tokenizer")
        fit = [t for t in fit if fits_in(t, tokenizer, opts.max_new_tokens)]
        if not fit:
            raise ValueError(
                f"--pool-fits: no training task's fastest implementation fits in "
                f"--max-new-tokens {opts.max_new_tokens}; raise it or leave --pool-fits out"
            )
    random.Random(opts.split_seed).shuffle(fit)
    return fit[: opts.pool] if opts.pool else fit


def fits_in(task, tokenizer, max_new_tokens: int) -> bool:
    """Whether `task`'s SFT target (`train.data.fastest_reply`) plus its end token fits in
    `max_new_tokens` tokens."""
    from cudaperf.train.data import fastest_reply

    reply = fastest_reply(task)
    if reply is None:
        return False
    return len(tokenizer(reply, add_special_tokens=False)["input_ids"]) + 1 <= max_new_tokens


def check_same_holdout(hold, opts: GrpoOptions) -> None:
    """When `opts.adapter` comes from a `cudaperf train sft` run (its folder's parent holds the
    run's holdout.json), GRPO must hold out exactly what SFT held out: otherwise GRPO could
    train on the SFT run's unseen tasks (and the held-out evaluation would be contaminated)."""
    if opts.adapter is None:
        return
    sft = Path(opts.adapter).parent / "holdout.json"
    if not sft.is_file():
        return
    theirs = json.loads(sft.read_text(encoding="utf-8"))
    mine = hold.manifest()
    keys = ("val_families", "unseen_tasks", "fit_families")
    if any(theirs.get(k) != mine[k] for k in keys if k in theirs):
        raise ValueError(
            f"--adapter {opts.adapter}: its SFT run held out other tasks than this run would "
            f"({sft}); use the SFT run's --seed as --split-seed and its --val-families and "
            "--holdout-share"
        )


def seed_salt(seed: int | None) -> int | None:
    """The evaluator's input salt for a run seed (bench/ablation/PROTOCOL.md: the seed fixes
    it, so a resumed process redraws nothing and arms with one seed see the same inputs); None
    for None (the evaluator then draws a secret one). The policy never sees either."""
    if seed is None:
        return None
    digest = hashlib.sha256(f"cudaperf grpo evaluator salt {int(seed)}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 62) - 1)


def make_scorer(opts: GrpoOptions, tasks, evaluator=None, layout=None):
    """The reward scorer (`reward.scorer.build_scorer`, as every command's): a persistent
    evaluator session (unless `evaluator` is given) timing on `layout.eval_gpus` (a
    `train.layout.Layout`; None: every GPU it sees), metered for the step-time breakdown and
    locked per batch when the layout says so, with the salt of `opts.seed` (`seed_salt`); the
    analyzer for every candidate in a process pool (feedback shows findings), the ranker
    `opts.ranker` names (whatever its weight: its opinion also reaches feedback and the
    continuation choice), `opts.reward`."""
    from cudaperf.execute.session import EvalSession, training_config
    from cudaperf.reward.scorer import build_scorer
    from cudaperf.train.layout import GpuLock, MeteredEvaluator

    gpus = layout.eval_gpus if layout is not None else opts.eval_gpus
    cfg = training_config(
        compile_only=True if opts.compile_only else None,
        gpus=gpus,
        seed_salt=seed_salt(opts.seed),
        workers_per_gpu=opts.eval_workers_per_gpu,
    )
    if evaluator is None:
        evaluator = EvalSession(cfg)
    lock = None
    if layout is not None and layout.lock_eval and layout.eval_gpus:
        lock = GpuLock(cfg.cache_dir / "locks", layout.eval_gpus)
    return build_scorer(tasks, opts.reward, MeteredEvaluator(evaluator, lock), opts.ranker)


def layout_of(opts: GrpoOptions, acc):
    """This process's `train.layout.Layout` under accelerator `acc` (a collective when several
    processes train: each learns every process's GPU)."""
    from accelerate.utils import gather_object

    from cudaperf.execute.build import detect_gpus
    from cudaperf.train.layout import physical_gpu, plan_layout

    own = None
    if acc.device.type == "cuda":  # the process's CUDA_VISIBLE_DEVICES maps it to nvidia-smi's
        own = physical_gpu(acc.device.index or 0, os.environ.get("CUDA_VISIBLE_DEVICES"))
    train = gather_object([own]) if acc.num_processes > 1 else [own]
    available = None if opts.compile_only else [g.index for g in detect_gpus()]
    return plan_layout(opts.eval_gpus, train, acc.process_index, available)


def prepare_pool(scorer, tasks) -> tuple[float, dict[str, str]]:
    """Evaluate each task's naive implementation once (caches its baselines); returns the
    seconds and {task id: status} of the naive implementations that ended neither `ok` nor
    `compiled` (a verified implementation failing this evaluator means the task's check is
    unreliable for honest candidates too: the run record says which). Under several processes
    each prepares its share (`tasks[i::n]`) and reads the others' from the evaluator's result
    cache, which the processes of one machine share."""
    from cudaperf.execute.api import naive_implementation
    from cudaperf.execute.types import Status

    t = time.perf_counter()
    jobs = [(task, c) for task in tasks if (c := naive_implementation(task)) is not None]
    bad = {}
    if jobs:
        for (task, _), res in zip(jobs, scorer.evaluator(jobs), strict=True):
            if res.status not in (Status.OK, Status.COMPILED):
                bad[task.id] = res.status.value
    return time.perf_counter() - t, bad


def _config(opts: GrpoOptions):
    import torch
    from trl import GRPOConfig

    cuda = torch.cuda.is_available()
    # A constant learning rate: a run resumed on another machine from a checkpoint carried
    # without its optimizer state (twice the adapter's size) keeps its learning rate. No
    # dropout (the SFT adapter's LoRA dropout included): replies are sampled from, and their
    # log-probabilities taken under, the policy itself rather than a randomly thinned copy.
    extra = {"lr_scheduler_type": "constant", "disable_dropout": True} | opts.extra
    return GRPOConfig(
        output_dir=str(opts.out),
        learning_rate=opts.lr,
        beta=opts.beta,
        per_device_train_batch_size=opts.groups_per_step * opts.num_generations,
        num_generations=opts.num_generations,
        max_completion_length=opts.max_new_tokens,
        temperature=opts.temperature,
        max_steps=opts.max_steps,
        save_steps=opts.save_steps,
        save_strategy="steps",
        logging_steps=1,
        report_to="none",
        seed=opts.seed if opts.seed is not None else 0,
        # "none": TurnReturn's values are already advantages per (task, turn); TRL only
        # subtracts each block's mean, which is 0 (train.rewards says why)
        bf16=cuda,
        use_cpu=not cuda,
        scale_rewards="none",
        gradient_checkpointing=opts.gradient_checkpointing,
        **extra,
    )


def run_grpo(opts: GrpoOptions, evaluator=None, generate=None) -> dict:
    """Train; returns (and writes to `<out>/report.json`) what was done. `evaluator` and
    `generate` replace the evaluator session and the policy's generation (tests)."""
    from trl import GRPOTrainer

    from cudaperf.train.layout import check_resume, check_run_folder, clear_run, record_options
    from cudaperf.train.models import load_policy, lora_config
    from cudaperf.train.rewards import TurnReturn
    from cudaperf.train.rollout import MultiTurnRollout
    from cudaperf.train.runlog import (
        FiniteUpdates,
        StepLog,
        TimeBudget,
        end_processes,
        last_checkpoint,
        save_final,
        train_until_stopped,
    )

    t0 = time.perf_counter()
    check_run_folder(opts.out, opts.resume, opts.overwrite)
    if opts.resume:
        check_resume(opts.out, opts)
    hold = training_holdout(opts)
    check_same_holdout(hold, opts)  # before the model loads: a refusal comes at once
    policy = load_policy(opts.model, adapter=opts.adapter)
    pool = choose_pool(hold, opts, policy.tokenizer)
    if opts.overwrite:  # as SFT: every refusal above left the folder as it was
        if gone := clear_run(opts.out):
            log.warning(
                "overwrite: removed the earlier run's %s from %s",
                ", ".join(p.name for p in gone),
                opts.out,
            )
    opts.out.mkdir(parents=True, exist_ok=True)
    # the budget counts from the start: loading and preparing the pool are inside it too
    resumes = last_checkpoint(opts.out) if opts.resume else None
    steplog = StepLog(opts.out, "grpo", resumes=resumes)
    budget = TimeBudget(opts.wall_budget_s, started=t0)
    finite = FiniteUpdates(steplog.add)
    ropts = RolloutOptions(
        opts.turns,
        opts.gamma,
        generation=opts.generation,
        canary_every=opts.canary_every,
        generation_weights=opts.generation_weights,
    )
    rollout = MultiTurnRollout(
        pool, None, ropts, generate=generate, on_batch=steplog.add, canaries=pool[: opts.canaries]
    )
    new_lora = opts.lora_r and opts.adapter is None
    trainer_class = epoch_seeded_trainer(GRPOTrainer) if opts.sampler == "epoch" else GRPOTrainer
    trainer = trainer_class(
        model=policy.model,
        reward_funcs=[TurnReturn(group_size=opts.num_generations)],
        args=_config(opts),
        train_dataset=prompt_dataset(pool),
        processing_class=policy.tokenizer,
        peft_config=lora_config(opts.lora_r) if new_lora else None,
        rollout_func=rollout,
        callbacks=[finite, steplog, budget],
    )
    acc = trainer.accelerator  # the trainer set up the processes: one evaluator per process
    layout = layout_of(opts, acc)
    steplog.main = acc.is_main_process
    if acc.num_processes > 1:
        _distribute(acc, rollout, budget)
    steplog.add(layout.record())
    if acc.is_main_process and not opts.resume:
        record_options(opts.out, asdict(opts))
    scorer = rollout.attach(make_scorer(opts, pool, evaluator, layout))
    prep_s = _prepare(opts, acc, scorer, pool, steplog)
    try:
        resume, interrupted = train_until_stopped(trainer, opts.out, opts.resume)
    finally:
        for part in (scorer.evaluator, scorer.analyzer):
            close = getattr(part, "close", None)
            if close:
                close()
    if not acc.is_main_process:  # one process writes the model, holdout and report
        end_processes(acc, interrupted)  # ... and meets this one at the end
        return {"steps": trainer.state.global_step, "process": acc.process_index}
    write_manifest(hold, opts.out / "holdout.json")
    final = save_final(trainer.model, policy.tokenizer, opts.out, opts.pieces_mib)
    report = {
        "model": opts.model,
        "adapter": str(opts.adapter) if opts.adapter else None,
        "pool_tasks": len(pool),
        "prepare_s": round(prep_s, 2),
        "steps": trainer.state.global_step,
        "stopped_by_time_budget": budget.stopped,
        "skipped_updates": finite.skipped,
        "interrupted": interrupted,
        "resumed_from": resume,
        "final": str(final),
        "seconds": round(time.perf_counter() - t0, 1),
        "layout": layout.record(),
        "options": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(opts).items()},
    }
    text = json.dumps(report, indent=1)
    (opts.out / "report.json").write_text(text + "\n", encoding="utf-8")
    end_processes(acc, interrupted)
    return json.loads(text)  # what report.json holds (tuples as lists), not a look-alike


def _distribute(acc, rollout, budget) -> None:
    """Several processes: the rollout gathers its records to the main process, and the time
    budget stops every process at the same step."""
    from accelerate.utils import gather_object

    rollout.distribute(lambda rec: gather_object([rec]), acc.is_main_process)
    budget.agree = lambda stop: any(gather_object([bool(stop)]))


def _prepare(opts: GrpoOptions, acc, scorer, pool, steplog) -> float:
    """The pool's naive implementations, shared out between the processes (`prepare_pool`):
    each is evaluated once in all; logged once (candidates, the slowest process's seconds)."""
    from accelerate.utils import gather_object

    n, i = acc.num_processes, acc.process_index
    mine = pool[i::n] if opts.prepare else []
    secs, bad = prepare_pool(scorer, mine) if mine else (0.0, {})
    done = (secs, scorer.evaluator.take()["candidates"], bad)  # not a step's evaluation
    took = gather_object([done]) if n > 1 else [done]
    if n > 1:
        acc.wait_for_everyone()  # every share is in the result cache before step 1
    slowest = max(s for s, _, _ in took)
    not_ok = {k: v for _, _, b in took for k, v in sorted(b.items())}
    if not_ok and acc.is_main_process:
        log.warning(
            "%d of %d pool tasks' naive implementations did not pass this evaluator "
            "(their rewards are suspect): %s",
            len(not_ok),
            len(pool),
            not_ok,
        )
    steplog.add(
        {
            "kind": "prepare",
            "tasks": len(pool) if opts.prepare else 0,
            "candidates": sum(c for _, c, _ in took),
            "seconds": round(slowest, 2),
            "processes": n,
            "naive_not_ok": not_ok,
        }
    )
    return slowest
