"""Run management shared by SFT and GRPO: the per-step JSONL log, the time budget, saving.

- `StepLog`: a `TrainerCallback` that appends every record the trainer logs (loss, learning
  rate, TRL's reward metrics), one `step` record per step (its seconds, and the optimizer
  step's alone) and every record the rollout adds (`StepLog.add`) to `<out>/steps.jsonl`, one
  JSON object per line, flushed as written (a crash keeps them). A record's `samples` (the
  rollout's replies: task, turn, status, score, text) go to `<out>/completions.jsonl` instead,
  one line per reply with the record's step, so the log of numbers stays small and the replies
  behind them can still be read. Only the main process writes. A run resumed from
  checkpoint-N first sets aside what a process that died after that checkpoint wrote
  (`set_aside_after`), so the log holds each step once.
- `FiniteUpdates`: skips an optimizer update whose gradients are not all finite (a NaN or an
  infinity in one reaches every weight through the gradient clipping and ends the run at its
  next sampling: arm A seed 1 of the ablation, step 41, 2026-12-07) and records it.
- `TimeBudget`: saves a checkpoint and stops training before a step that would not end, with
  the saves after it, inside `budget_s` from the run's start (model loading and GRPO's
  `prepare` count: the save lands before an outside wall-clock limit of `budget_s`); under
  several processes they `agree` (any one's stop stops all at the same step).
- `train_until_stopped`: trains, and on Ctrl-C saves a resumable `checkpoint-N` and raises
  `RunInterrupted` (the CLI exits 130).
- `save_final`: the trained model (or adapter) and tokenizer under `<out>/final`, large files
  optionally in pieces (`train.pieces`).
"""

from __future__ import annotations

import json
import logging
import signal
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

from transformers import TrainerCallback

from cudaperf.fields import wall_budget_problem
from cudaperf.jsonl import append_lines, replace_text
from cudaperf.train.layout import checkpoint_step, last_checkpoint
from cudaperf.train.pieces import split_large_files

log = logging.getLogger(__name__)

__all__ = [
    "FiniteUpdates",
    "RunInterrupted",
    "StepLog",
    "TimeBudget",
    "last_checkpoint",
    "save_final",
    "set_aside_after",
    "train_until_stopped",
]


class StepLog(TrainerCallback):
    """Appends trainer logs, step records and rollout records to `<out>/steps.jsonl`; only
    the main process writes (`main`; under several processes the rollout gathers its records
    to the main process first). The optimizer step is timed between device synchronisations,
    so its seconds are the GPU's, not only the launch's."""

    def __init__(
        self, out: str | Path, run: str = "", main: bool = True, resumes: str | None = None
    ) -> None:
        self.path = Path(out) / "steps.jsonl"
        self.samples_path = Path(out) / "completions.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.run = run
        self.main = main
        self.resumes = resumes  # the checkpoint-N this run resumes: set aside what followed it
        self._step_t = self._opt_t = time.perf_counter()
        self._opt_s = 0.0

    def add(self, record: dict) -> None:
        """Append one record (a dict of JSON-able values); nothing on other processes."""
        if not self.main:
            return
        if self.resumes is not None:  # before this process's first record, on the main one
            set_aside_after(self.path.parent, checkpoint_step(self.resumes))
            self.resumes = None
        samples = record.get("samples")
        if samples is not None:
            record = {k: v for k, v in record.items() if k != "samples"}
            step = record.get("step")
            append_lines(self.samples_path, [json.dumps({"step": step, **s}) for s in samples])
        append_lines(self.path, [json.dumps({"run": self.run, **record})])

    def on_step_begin(self, args, state, control, **kw):
        self._step_t = time.perf_counter()
        self._opt_s = 0.0

    def on_pre_optimizer_step(self, args, state, control, **kw):
        _synchronize()
        self._opt_t = time.perf_counter()

    def on_optimizer_step(self, args, state, control, **kw):
        _synchronize()
        self._opt_s += time.perf_counter() - self._opt_t

    def on_step_end(self, args, state, control, **kw):
        if state.is_world_process_zero:
            self.add(
                {
                    "kind": "step",
                    "step": state.global_step,
                    "step_s": round(time.perf_counter() - self._step_t, 3),
                    "optimizer_s": round(self._opt_s, 3),
                }
            )

    def on_log(self, args, state, control, logs=None, **kw):
        if logs and state.is_world_process_zero:
            clean = {k: v for k, v in logs.items() if isinstance(v, int | float | str)}
            self.add({"kind": "trainer", "step": state.global_step, "epoch": state.epoch, **clean})


class FiniteUpdates(TrainerCallback):
    """Skip an optimizer update whose gradients hold a NaN or an infinity, and record it.

    The trainer clips the gradients before the update: one non-finite gradient makes the norm
    NaN and the clipping multiplies every gradient by NaN, so the update would write NaN into
    every trained weight, and the next sampling fails on the device (`device-side assert
    triggered`: an H200 run of the ablation, step 41). Here every gradient the optimizer
    would use is dropped instead (`grad = None`: the optimizer leaves that weight and its
    moments as they were), so the step counts but changes nothing; the learning goes on from
    the next step's batch. Each skip is `record`ed by the main process
    (`{"kind": "skipped_update", "step": N}`)
    and kept in `skipped` (the report's `skipped_updates`). Under several processes the
    gradients are already reduced, so every process sees the same NaN and skips the same step.
    A run whose gradients are all finite is unchanged: one check a step (one device sync)."""

    def __init__(self, record: Callable[[dict], None] | None = None) -> None:
        self.record = record
        self.skipped: list[int] = []

    def on_pre_optimizer_step(self, args, state, control, optimizer=None, model=None, **kw):
        import torch

        if optimizer is not None:
            params = [p for g in optimizer.param_groups for p in g["params"]]
        else:
            params = list(model.parameters()) if model is not None else []
        grads = [p.grad for p in params if p.grad is not None]
        if not grads:
            return
        at = grads[0].device  # one device sync for all (a model split over devices included)
        if bool(torch.stack([torch.isfinite(g).all().to(at) for g in grads]).all()):
            return
        where = nonfinite_gradients(model, params)  # before the gradients are dropped
        for p in params:
            p.grad = None
        step = state.global_step + 1  # the step whose update this was
        self.skipped.append(step)
        log.warning(
            "step %d: a gradient is not finite (%d of %d tensors, the deepest %s); "
            "this update is skipped",
            step,
            where["tensors"],
            where["of"],
            where["last"],
        )
        if self.record is not None and getattr(state, "is_world_process_zero", True):
            self.record(
                {"kind": "skipped_update", "step": step, "why": "non-finite gradient", **where}
            )


def nonfinite_gradients(model, params: list) -> dict:
    """Which gradients of `params` hold a NaN or an infinity, in the model's parameter order
    (embedding to last layer): how many tensors (`tensors`, of `of` with a gradient), how many
    hold a NaN, the first and the last of them by name, and how many finite gradients lie
    between the first non-finite one and the end (`finite_after_first`).

    Gradients flow from the loss back to the input, so where a non-finite value entered the
    backward pass, every tensor below it is non-finite and those above it stay finite: `last`
    names the deepest layer the NaN reached, the layer just above it is where to look (the
    report of a non-finite step 41 of the ablation said only that the norm was NaN). A
    parameter the model does not name (an optimizer given other tensors) is `param<i>`."""
    import torch

    named = list(model.named_parameters()) if model is not None else []
    names = {id(p): n for n, p in named}
    order = {id(p): i for i, (_, p) in enumerate(named)}
    with_grad = sorted((p for p in params if p.grad is not None), key=lambda p: order.get(id(p), 0))
    bad, nan, finite_after, first = [], 0, 0, None
    for i, p in enumerate(with_grad):
        g = p.grad
        if bool(torch.isfinite(g).all()):
            finite_after += first is not None
            continue
        name = names.get(id(p), f"param{i}")
        first = first or name
        bad.append(name)
        nan += bool(torch.isnan(g).any())
    return {
        "tensors": len(bad),
        "of": len(with_grad),
        "nan_tensors": nan,
        "first": first,
        "last": bad[-1] if bad else None,
        "finite_after_first": finite_after,
    }


def set_aside_after(out: str | Path, step: int) -> Path | None:
    """Move what `out`'s logs hold after checkpoint-`step` into `out/after-checkpoint-<step>/`
    (appended there, in order); returns that folder, or None when nothing followed.

    A process that died after saving checkpoint-N (its update's NaN ended the next sampling;
    a machine taken back) wrote the records of steps it never saved; a run resumed from
    checkpoint-N redoes them, and its log must hold each step once. A step's `step` and
    `trainer` records are written before its checkpoint is saved, so steps.jsonl is cut after
    the last of those with step N (kept as it is when it has none); a reply's `step` is the
    trainer's step while it was sampled, so completions.jsonl keeps the replies of step < N.
    What is set aside is kept, not deleted: it is the record of what that process did."""
    out = Path(out)
    steps, samples = out / "steps.jsonl", out / "completions.jsonl"
    cuts: dict[Path, tuple[list[str], int]] = {}  # file -> (its lines, how many it keeps)
    if steps.is_file():
        lines = _lines(steps)
        ends = [
            i
            for i, line in enumerate(lines)
            if (r := _record(line)) and r.get("kind") in ("step", "trainer") and _at(r) == step
        ]
        if ends and ends[-1] + 1 < len(lines):
            cuts[steps] = (lines, ends[-1] + 1)
    if samples.is_file():
        lines = _lines(samples)
        late = [i for i, line in enumerate(lines) if (r := _record(line)) is None or _at(r) >= step]
        if late:
            cuts[samples] = (lines, late[0])
    if not cuts:
        return None
    aside = out / f"after-checkpoint-{step}"
    for path, (lines, keep) in cuts.items():
        append_lines(aside / path.name, lines[keep:])  # a cut last line ends with a newline
        replace_text(path, "".join(line + "\n" for line in lines[:keep]))
    log.warning("resuming checkpoint-%d: what followed it in the logs went to %s", step, aside)
    return aside


def _lines(path: Path) -> list[str]:
    """The lines of `path` without their newlines (a cut last line included)."""
    text = path.read_text(encoding="utf-8")
    return text.removesuffix("\n").split("\n") if text else []


def _record(line: str) -> dict | None:
    try:
        r = json.loads(line)
    except ValueError:  # a line cut by a dying process
        return None
    return r if isinstance(r, dict) else None


def _at(record: dict) -> int:
    step = record.get("step")
    return step if isinstance(step, int) else 0


def _synchronize() -> None:
    import torch

    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


class TimeBudget(TrainerCallback):
    """Stop (saving first) before a step that would not end inside `budget_s`. A step cannot
    be cut short, so after every step the rule asks whether one more step and then stopping
    would still end inside the budget:

        elapsed + next step + stopping  <=  budget_s   (else save and stop now)

    - elapsed counts from `started` (a `time.perf_counter()` value; default: when the budget
      is made), so loading the model and GRPO's `prepare` spend the same clock as the steps;
    - the next step is predicted as the slowest of this process's later steps (a step's time
      runs from one step's end to the next: the logging, evaluation and saving between them
      included). Its first step pays once for what later steps reuse (compiling generation,
      drawing every task's input sets), so it is the prediction only until a second step has
      run: predicting from it stopped two resumed H200 calls of 520 s after 274 and 271 s, two
      steps each, when their warm steps took 94 and 81 s against first steps of 170 and 190 s
      (2026-12-04);
    - stopping costs a checkpoint save and the final save: twice the slowest checkpoint save
      seen so far (timed from the step's end to `on_save`, an evaluation there included), or
      half a step before any save was seen.

    Not guaranteed: the first step always runs (nothing is measured before it), and a step or
    save slower than every one before it can still overrun. With several processes set
    `agree` (each process's wish -> whether any process wishes it; a collective, called by
    every process after every step), so all stop at the same step."""

    def __init__(self, budget_s: float | None, started: float | None = None) -> None:
        if problem := wall_budget_problem(budget_s):
            raise ValueError(problem)
        self.budget_s = budget_s
        self.agree: Callable[[bool], bool] | None = None
        self.t0 = time.perf_counter() if started is None else started
        self._last = self.t0
        self.steps: list[float] = []  # this process's step seconds
        self.saves: list[float] = []  # seconds from a step's end to its checkpoint's on_save
        self.stopped = False

    @property
    def expected(self) -> float:
        """Seconds the next step is expected to take (the longest after the first)."""
        later = self.steps[1:] or self.steps
        return max(later, default=0.0)

    @property
    def stopping(self) -> float:
        """Seconds expected from a step's end until the run has saved and stopped."""
        return 2 * max(self.saves) if self.saves else 0.5 * self.expected

    def on_train_begin(self, args, state, control, **kw):
        # t0 stays where it was set: what ran before training (loading the model, GRPO's
        # prepare: 85 s for 8 tasks on an H200) spends the same wall clock as the steps
        self._last = time.perf_counter()

    def on_save(self, args, state, control, **kw):
        self.saves.append(time.perf_counter() - self._last)

    def on_step_end(self, args, state, control, **kw):
        now = time.perf_counter()
        self.steps.append(now - self._last)
        self._last = now
        if state.max_steps and state.global_step >= state.max_steps:
            return control  # the run ends here anyway: a finished chunk is not a budget stop
        ends = now - self.t0 + self.expected + self.stopping
        stop = self.budget_s is not None and ends > self.budget_s
        if self.agree is not None:
            stop = self.agree(stop)
        if stop:
            log.info(
                "time budget %s s: the next step would end near %.0f s; saving and "
                "stopping after step %d",
                self.budget_s,
                ends,
                state.global_step,
            )
            control.should_save = True
            control.should_training_stop = True
            self.stopped = True
        return control


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C ended training; `checkpoint` is the resumable checkpoint saved for it (None
    when none could be: no step had ended, or several processes train), `step` the steps
    done. A KeyboardInterrupt, so whatever does not know it still stops as for Ctrl-C."""

    def __init__(self, checkpoint: str | None, step: int) -> None:
        super().__init__(checkpoint, step)
        self.checkpoint = checkpoint
        self.step = step


def train_until_stopped(trainer, out: str | Path, resume: bool) -> tuple[str | None, bool]:
    """Run `trainer.train`, from the newest checkpoint in `out` when `resume`. Returns (the
    checkpoint resumed from or None, False: a run that returns was not interrupted).

    Ctrl-C (KeyboardInterrupt) raises `RunInterrupted` after saving `checkpoint-N` (N = the
    steps done), the trainer's own resumable checkpoint (model, optimizer, scheduler, RNG and
    trainer state), so `--resume` continues from step N; the micro-batches of an unfinished
    step are redone. Further Ctrl-Cs during that save are ignored. Not saved: when no step
    has ended (nothing trained), and under several processes (the save is a collective that a
    process stopped elsewhere would never join; the newest periodic checkpoint is then the
    one to resume). Not guaranteed: a Ctrl-C between the optimizer's update and the trainer's
    step count would save step N+1's weights as checkpoint-N."""
    start = last_checkpoint(out) if resume else None
    if resume and start is None:
        raise ValueError(f"resume: {out} holds no checkpoint-N folder to continue from")
    try:
        trainer.train(resume_from_checkpoint=start)
    except KeyboardInterrupt as e:
        step = trainer.state.global_step
        saved = None
        if step > 0 and trainer.accelerator.num_processes == 1:
            with _sigint_ignored():
                trainer._save_checkpoint(trainer.model, trial=None)
            saved = str(Path(out) / f"checkpoint-{step}")
            log.warning("interrupted after step %d: saved %s", step, saved)
        raise RunInterrupted(saved, step) from e
    return start, False


@contextmanager
def _sigint_ignored():
    """Ctrl-C is ignored inside the block (the run stops right after it anyway; a save cut
    short would leave a checkpoint that cannot be resumed). Only the main thread can set
    handlers: elsewhere the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


# After the last barrier, gloo's worker thread frees that barrier's work (and the gathers it
# waited for), and those destructors take the GIL. DDP's Reducer holds the process group, so
# its last reference goes when the trainer is freed, with the GIL held, and
# ~ProcessGroupGloo then joins that worker thread: if the worker has not finished yet, it
# waits for the GIL and the process hangs (CI, 2026-12-06: gdb showed exactly these two
# threads; pytorch/pytorch#56297 describes the class of bug). A sleep releases the GIL, so
# the worker finishes first; it needs microseconds, the pause costs once per run.
TEARDOWN_PAUSE_S = 0.5


def end_processes(acc, interrupted: bool) -> None:
    """Under several processes, after a run that was not interrupted: wait for every process,
    then destroy the process group. A process that exits with its gloo group alive can abort at
    interpreter exit ("terminate called without an active exception", SIGABRT: gloo's threads
    still hold work when the interpreter is torn down; seen once in CI under torchrun). Not
    after an interruption: a process stopped inside a collective would leave the rest waiting."""
    if acc.num_processes < 2 or interrupted:
        return
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        acc.wait_for_everyone()
        time.sleep(TEARDOWN_PAUSE_S)
        dist.destroy_process_group()


def save_final(model, tokenizer, out: str | Path, pieces_mib: float | None = None) -> Path:
    """Save `model` (a PEFT model saves its adapter only) and `tokenizer` to `<out>/final`;
    with `pieces_mib`, files over that size are split into pieces. Returns the folder."""
    final = Path(out) / "final"
    final.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(final)
    tokenizer.save_pretrained(final)
    if pieces_mib:
        split_large_files(final, pieces_mib)
    return final
