"""`run_sft`: supervised warm start on the training split through TRL's `SFTTrainer`.

Rows come from `train.data` (training-split tasks only; prompt = refine's first prompt,
completion = the fastest implementation as a reply). Loss is on the completion only (TRL's
prompt-completion format), and each completion ends with the chat template's end-of-turn
token, the tokenizer's EOS, so the model learns to stop. The length cap is chosen from the
data (`max_length="auto"`: the `length_quantile` of the tokenized rows, rounded up to 64);
rows longer than the cap are dropped rather than truncated (a cut target would lose its
closing fence and EOS), and the dropped share is reported. With `val_families > 0`, whole
training families are held out and evaluated every epoch; the checkpoint with the lowest
held-out loss is the one kept (`load_best_model_at_end`). Test families are never read.

Outputs under `out`: `holdout.json` (which families/tasks were held out), `steps.jsonl`
(trainer logs), `checkpoint-N/` (per epoch, at a time-budget stop and at Ctrl-C; `resume=True`
continues from the newest), `final/` (model or LoRA adapter + tokenizer) and `report.json`,
both written only by a run that ends without Ctrl-C. An `out` that holds a run is refused
unless `resume` or `overwrite` (`train.layout.check_run_folder`); `overwrite` removes that
run's files once the model and rows are loaded, just before the first write.
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from cudaperf.fields import check_numbers
from cudaperf.fields import option as _o
from cudaperf.train.data import load_training_tasks, sft_rows, split_training, write_manifest

log = logging.getLogger(__name__)

__all__ = ["SftOptions", "choose_max_length", "run_sft"]


@dataclass(frozen=True)
class SftOptions:
    """Everything `run_sft` needs; validated on creation. Each field's `metadata["help"]` is
    the text of its `cudaperf train sft` option, whose default is the field's."""

    out: Path = field(metadata={"help": "Run folder (checkpoints, report.json, final/)."})
    model: str = _o("smollm2", "smollm2 (bundled SmolLM2-135M-Instruct), a HF name or a path.")
    tasks: Path = _o(Path("data/tasks.jsonl.gz"), "Task file (training split used).")
    splits: Path | None = _o(None, "splits.json (default: beside the task file).")
    kinds: tuple[str, ...] = _o((), "Only these task kinds (c2cuda, torch2cuda); none: both.")
    targets: str = _o(
        "fastest",
        "fastest (each task's fastest implementation), all, or pairs (a slower reply, its "
        "feedback, then the fastest: refine's second turn).",
    )
    lora_r: int = _o(16, "LoRA rank on all linear layers; 0: full fine-tuning.")
    epochs: float = _o(2.0, "Epochs over the rows (the best epoch on held-out families is kept).")
    lr: float = _o(2e-4, "Learning rate.")
    batch_size: int = _o(8, "Rows per device step.")
    grad_accum: int = _o(1, "Gradient accumulation steps.")
    max_length: int | None = _o(None, "Token cap (default: the length_quantile of the rows).")
    length_quantile: float = _o(0.98, "Quantile of row lengths that sets the default cap.")
    val_families: int = _o(3, "Training families held out whole (choose the epoch on them).")
    holdout_share: float = _o(0.05, "Share of other families' tasks held out (unseen tasks).")
    limit: int | None = _o(None, "At most this many rows (smoke runs).")
    seed: int = _o(0, "Shuffling, the holdout and LoRA's initialisation.")
    dtype: str = _o("auto", "Model dtype: auto, bfloat16, float16 or float32.")
    time_budget_s: float | None = _o(
        None,
        "Wall-clock seconds for the whole run, loading and saves included (stops after a step).",
    )
    pieces_mib: float | None = _o(None, "Save final files larger than this (MiB) in pieces.")
    resume: bool = _o(
        False, "Continue from the newest checkpoint in --out (Ctrl-C saves one and exits 130)."
    )
    overwrite: bool = _o(
        False,
        "Replace the run in --out (its checkpoints, final/, logs and report are removed "
        "first). Without it or --resume, an --out that holds a run is refused.",
    )
    extra: dict = _o({}, "More SFTConfig fields (expert use; not on the command line).")

    def __post_init__(self) -> None:
        object.__setattr__(self, "out", Path(self.out))
        object.__setattr__(self, "tasks", Path(self.tasks))
        check_numbers(self, seeds=("seed",))
        for name in ("epochs", "lr"):
            if not getattr(self, name) > 0:
                raise ValueError(f"--{name} {getattr(self, name)}: use a value > 0")
        if self.batch_size < 1 or self.grad_accum < 1:
            raise ValueError("--batch-size and --grad-accum must be >= 1")
        if self.lora_r < 0:
            raise ValueError(f"--lora-r {self.lora_r}: use >= 1, or 0 for full fine-tuning")
        if not 0.5 <= self.length_quantile <= 1:
            raise ValueError(f"length_quantile={self.length_quantile}: use a value in [0.5, 1]")
        if self.max_length is not None and self.max_length < 16:
            raise ValueError(f"--max-length {self.max_length}: use >= 16 tokens (or auto)")


def _lengths(rows: list[dict], tokenizer) -> list[int]:
    texts = [
        tokenizer.apply_chat_template(r["prompt"] + r["completion"], tokenize=False) for r in rows
    ]
    enc = tokenizer(texts, add_special_tokens=False)["input_ids"]
    return [len(e) for e in enc]


def choose_max_length(lengths: list[int], quantile: float) -> int:
    """The `quantile` of `lengths`, rounded up to a multiple of 64."""
    if not lengths:
        raise ValueError("no rows to choose a length cap from")
    s = sorted(lengths)
    q = s[min(len(s) - 1, math.ceil(quantile * len(s)) - 1)]
    return int(math.ceil(q / 64) * 64)


def _dataset(rows: list[dict], lengths: list[int], cap: int, training: bool = True):
    """The rows of at most `cap` tokens, and how many were dropped. No training row left is an
    error; no validation row left (`training=False`: the cap comes from the training rows) is
    an empty set."""
    from datasets import Dataset

    kept = [r for r, n in zip(rows, lengths, strict=True) if n <= cap]
    if rows and not kept and training:
        raise ValueError(
            f"every one of the {len(rows)} training rows is longer than --max-length {cap} "
            f"tokens (shortest {min(lengths)}); raise --max-length or leave it out (chosen "
            "from data)"
        )
    return Dataset.from_list(kept), len(rows) - len(kept)


def _trainer(opts: SftOptions, policy, train_ds, eval_ds, cap: int, callbacks):
    import torch
    from trl import SFTConfig, SFTTrainer

    from cudaperf.train.models import lora_config

    cuda = torch.cuda.is_available()
    has_val = eval_ds is not None and len(eval_ds) > 0
    args = SFTConfig(
        output_dir=str(opts.out),
        num_train_epochs=opts.epochs,
        learning_rate=opts.lr,
        per_device_train_batch_size=opts.batch_size,
        per_device_eval_batch_size=opts.batch_size,
        gradient_accumulation_steps=opts.grad_accum,
        max_length=cap,
        completion_only_loss=True,
        eval_strategy="epoch" if has_val else "no",
        save_strategy="epoch",
        load_best_model_at_end=has_val,
        metric_for_best_model="eval_loss",
        greater_is_better=False,
        save_total_limit=2 if has_val else 1,
        logging_steps=10,
        report_to="none",
        seed=opts.seed,
        bf16=cuda and opts.dtype in ("auto", "bfloat16"),
        use_cpu=not cuda,
        lr_scheduler_type="cosine",
        warmup_steps=0.03,
        **opts.extra,
    )
    return SFTTrainer(
        model=policy.model,
        args=args,
        train_dataset=train_ds,
        eval_dataset=eval_ds if has_val else None,
        processing_class=policy.tokenizer,
        peft_config=lora_config(opts.lora_r) if opts.lora_r else None,
        callbacks=callbacks,
    )


def run_sft(opts: SftOptions) -> dict:
    """Train; returns (and writes to `<out>/report.json`) what was done and measured."""
    from cudaperf.train.layout import check_resume, check_run_folder, clear_run, record_options
    from cudaperf.train.models import load_policy
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
    hold = split_training(
        load_training_tasks(opts.tasks, opts.splits, opts.kinds),
        opts.val_families,
        opts.holdout_share,
        opts.seed,
    )
    rows = sft_rows(hold.fit, opts.targets)[: opts.limit]
    val_rows = sft_rows(hold.val_families, "fastest")[: opts.limit]
    policy = load_policy(opts.model, opts.dtype)
    lengths = _lengths(rows, policy.tokenizer)
    cap = opts.max_length or choose_max_length(lengths, opts.length_quantile)
    train_ds, dropped = _dataset(rows, lengths, cap)
    eval_ds, val_dropped = (
        _dataset(val_rows, _lengths(val_rows, policy.tokenizer), cap, training=False)
        if val_rows
        else (None, 0)
    )
    if eval_ds is not None and not len(eval_ds):
        log.warning("every validation row is longer than --max-length %d: no held-out loss", cap)
        eval_ds = None
    if opts.overwrite:  # every refusal above left the folder as it was
        if gone := clear_run(opts.out):
            log.warning(
                "overwrite: removed the earlier run's %s from %s",
                ", ".join(p.name for p in gone),
                opts.out,
            )
    opts.out.mkdir(parents=True, exist_ok=True)
    write_manifest(hold, opts.out / "holdout.json")
    if not opts.resume:
        record_options(opts.out, asdict(opts))
    budget = TimeBudget(opts.time_budget_s, started=t0)
    steplog = StepLog(opts.out, "sft", resumes=last_checkpoint(opts.out) if opts.resume else None)
    finite = FiniteUpdates(steplog.add)
    trainer = _trainer(opts, policy, train_ds, eval_ds, cap, [finite, steplog, budget])
    resume, interrupted = train_until_stopped(trainer, opts.out, opts.resume)
    if not trainer.accelerator.is_main_process:  # one process writes the model and report
        end_processes(trainer.accelerator, interrupted)  # ... and meets this one at the end
        return {"steps": trainer.state.global_step}
    final = save_final(trainer.model, policy.tokenizer, opts.out, opts.pieces_mib)
    evals = [h for h in trainer.state.log_history if "eval_loss" in h]
    report = {
        "model": opts.model,
        "loaded": policy.path,
        "lora_r": opts.lora_r,
        "rows": len(rows),
        "rows_trained": len(train_ds),
        "max_length": cap,
        "dropped_over_cap": dropped,
        "dropped_share": round(dropped / max(1, len(rows)), 4),
        "length_p50": sorted(lengths)[len(lengths) // 2] if lengths else None,
        "val_rows": len(eval_ds) if eval_ds is not None else 0,
        "val_dropped_over_cap": val_dropped,
        "val_families": hold.manifest()["val_families"],
        "unseen_tasks": len(hold.unseen),
        "eval_loss_per_epoch": [
            {"epoch": h.get("epoch"), "eval_loss": h["eval_loss"]} for h in evals
        ],
        "best_checkpoint": trainer.state.best_model_checkpoint,
        "steps": trainer.state.global_step,
        "stopped_by_time_budget": budget.stopped,
        "skipped_updates": finite.skipped,
        "interrupted": interrupted,
        "resumed_from": resume,
        "final": str(final),
        "seconds": round(time.perf_counter() - t0, 1),
        "options": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(opts).items()},
    }
    (opts.out / "report.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    end_processes(trainer.accelerator, interrupted)
    return report
