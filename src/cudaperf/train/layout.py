"""Where a training run puts its work: the run folder's files, and, for GRPO, where it generates,
trains and times (its GPU layout) and the evaluator it scores with.

Run folders (`check_run_folder`, `clear_run`; both trainers, called before any model loads):
a folder holds a run once it has any of `RUN_FILES` or a `checkpoint-N` folder. Such a folder
is continued only with `resume` and replaced only with `overwrite` (which removes those files
and nothing else); otherwise the new run is refused, so a run never silently writes over
another's adapter, report or checkpoints, and never appends its steps to another's log.
`holdout.json` alone is no run: it is derived from the options and rewritten by every start.

GPU numbers are nvidia-smi's indices, the ones `--eval-gpus` names and the evaluator binds its
workers to (each worker starts with CUDA_VISIBLE_DEVICES=<index>, `execute.supervise.gpu_env`).
A training process's own GPU is its torch device mapped through the CUDA_VISIBLE_DEVICES it
started with (`physical_gpu`). nvidia-smi numbers GPUs in PCI order and CUDA, by default,
fastest first: the evaluator's children are started with CUDA_DEVICE_ORDER=PCI_BUS_ID; on a
machine of different GPUs set it for the training process too, so both agree.

`plan_layout` decides, and refuses what would let timing run next to other GPU work:

- one process: timing on `--eval-gpus` (default: every GPU the evaluator sees). Where that
  includes the training GPU, timing is sequenced by the rollout itself: a turn's candidates are
  timed after its generation has ended (the tokens are on the host), and the optimizer step
  comes after the rollout (`train.rollout`).
- several processes without `--eval-gpus`: each process times on its own GPU only, so the same
  sequencing holds and no other process uses that GPU.
- several processes with `--eval-gpus` that no process trains on: every process times there;
  an evaluation batch holds `GpuLock` on those GPUs, so two processes never time at once.
- several processes with `--eval-gpus` that some process trains on: refused (another
  process's generation or update would run during the timing).
- an `--eval-gpus` index the machine does not have: refused (the evaluator would otherwise fall
  back to compile-only mode without a word).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import time
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import MISSING, asdict, dataclass, fields, is_dataclass
from pathlib import Path

from cudaperf.execute.types import sum_phases

__all__ = [
    "RUN_FILES",
    "GpuLock",
    "Layout",
    "MeteredEvaluator",
    "check_resume",
    "check_run_folder",
    "checkpoint_step",
    "clear_run",
    "last_checkpoint",
    "physical_gpu",
    "plan_layout",
    "record_options",
    "run_files",
]

# What a run writes into its folder besides checkpoint-N/ (holdout.json: see the module doc)
OPTIONS_FILE = "options.json"  # what a run was started with (`record_options`, `check_resume`)
RUN_FILES = ("steps.jsonl", "completions.jsonl", "report.json", "final", OPTIONS_FILE)


def run_files(out: str | Path) -> list[Path]:
    """The files and folders of a run in `out` (RUN_FILES and checkpoint-N/), sorted."""
    out = Path(out)
    if not out.is_dir():
        return []
    found = [out / n for n in RUN_FILES if (out / n).exists()]
    found += [p for p in out.glob("checkpoint-*") if p.is_dir()]
    return sorted(found)


def checkpoint_step(path: str | Path) -> int | None:
    """N of a `checkpoint-N` folder's path (None for another name)."""
    n = Path(path).name.split("-")[-1]
    return int(n) if n.isdigit() else None


def last_checkpoint(out: str | Path) -> str | None:
    """The newest complete `checkpoint-N` folder under `out` (None when there is none).
    Complete: it holds `trainer_state.json`, which the trainer writes after the model and
    optimizer files, so a save cut short (a process killed while saving) is passed over."""
    found = [
        p
        for p in Path(out).glob("checkpoint-*")
        if checkpoint_step(p) is not None and (p / "trainer_state.json").is_file()
    ]
    return str(max(found, key=checkpoint_step)) if found else None


def check_run_folder(out: str | Path, resume: bool, overwrite: bool) -> None:
    """Raise ValueError (one line: the folder and the fixes) when a new run would reuse a
    folder that holds a run (see the module doc), or when both `resume` and `overwrite` are
    asked. Changes nothing."""
    if resume and overwrite:
        raise ValueError(
            "--resume and --overwrite: give one (--resume continues the run in "
            "--out, --overwrite replaces it)"
        )
    found = run_files(out)
    if found and not (resume or overwrite):
        names = ", ".join(p.name + ("/" if p.is_dir() else "") for p in found[:4])
        more = f" and {len(found) - 4} more" if len(found) > 4 else ""
        raise ValueError(
            f"--out {out} holds a run ({names}{more}); add --resume to continue it, "
            "--overwrite to replace it, or give another --out"
        )


# Options a resumed run may change: where, how long and with what machine it runs, not what it
# trains (`epochs`, like `max_steps`, trains it longer). `adapter` is GRPO's starting weights,
# which a checkpoint supersedes (a resumed chunk passes the checkpoint it restored).
RESUMABLE = frozenset(
    {
        "out",
        "resume",
        "overwrite",
        "max_steps",
        "epochs",
        "wall_budget_s",
        "time_budget_s",
        "pieces_mib",
        "eval_gpus",
        "eval_workers_per_gpu",
        "adapter",
        "prepare",
    }
)


def _comparable(options: dict) -> dict:
    """`options` as JSON values, without RESUMABLE; a path by its file name (a run resumed on
    another machine finds the same files elsewhere)."""
    out = {}
    for k, v in options.items():
        if k in RESUMABLE:
            continue
        out[k] = v.name if isinstance(v, Path) else v  # json.dumps makes tuples lists
    return json.loads(json.dumps(out, default=str))


def record_options(out: str | Path, options: dict) -> None:
    """Write what a new run was started with into `out`/options.json."""
    path = Path(out) / OPTIONS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(_comparable(options), indent=1, sort_keys=True) + "\n")


def option_defaults(cls) -> dict:
    """The default of each field of the options dataclass `cls` that has one."""
    out = {}
    for f in fields(cls):
        if f.default is not MISSING:
            out[f.name] = f.default
        elif f.default_factory is not MISSING:
            out[f.name] = f.default_factory()
    return out


def check_resume(out: str | Path, options, defaults: dict | None = None) -> None:
    """Raise ValueError (one line naming each difference) when `options` would resume the run
    in `out` with other settings than it started with (a checkpoint of another LoRA rank fails
    deep in loading; another task file or learning rate trains something else without a
    word). A run older than options.json is not checked; an option the run's options.json
    lacks (added by a later version) is compared with its default in `defaults`, the value
    the run was started with. `options`: a dict, or the options dataclass itself, whose
    fields' defaults are then `defaults` unless given."""
    if is_dataclass(options):
        defaults = option_defaults(type(options)) if defaults is None else defaults
        options = asdict(options)
    path = Path(out) / OPTIONS_FILE
    if not path.is_file():
        return
    try:
        was = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: not readable ({e}); fix or remove it to resume") from None
    now = _comparable(options)
    was = _comparable(defaults or {}) | was  # what an older run ran with, where it is silent
    diff = [
        f"--{k.replace('_', '-')} {now.get(k)!r} (the run: {was.get(k)!r})"
        for k in sorted(set(was) | set(now))
        if was.get(k) != now.get(k)
    ]
    if diff:
        shown = "; ".join(diff[:4]) + (f"; and {len(diff) - 4} more" if len(diff) > 4 else "")
        raise ValueError(
            f"--resume: {out} was started with other settings: {shown}; resume with the "
            f"run's own ({path}), or start a new run (another --out, or --overwrite)"
        )


def clear_run(out: str | Path) -> list[Path]:
    """Remove a run's files from `out` (RUN_FILES, holdout.json, checkpoint-N/) and nothing
    else; returns what was removed."""
    gone = run_files(out)
    if (Path(out) / "holdout.json").is_file():
        gone.append(Path(out) / "holdout.json")
    for p in gone:
        if p.is_dir():
            shutil.rmtree(p)
        else:
            p.unlink()
    return gone


@dataclass(frozen=True)
class Layout:
    """One process's part of a run's GPU layout (all indices are nvidia-smi's)."""

    processes: int  # training processes (accelerate launch / torchrun), 1 without a launcher
    process: int  # this process's index
    train_gpus: tuple[int, ...]  # each process's training GPU, by process; () on CPU
    eval_gpus: tuple[int, ...] | None  # the evaluator's GPUs here (None: all it sees)
    shares_train_gpu: bool  # timing shares this process's training GPU (sequenced after it)
    lock_eval: bool  # several processes time on these GPUs: batches take turns (GpuLock)

    def record(self) -> dict:
        """The layout as a JSON-able dict (steps.jsonl's `layout` row, report.json)."""
        return {"kind": "layout", **asdict(self)}


def physical_gpu(device_index: int, visible: str | None) -> int:
    """The nvidia-smi index of torch device `cuda:<device_index>` in a process started with
    CUDA_VISIBLE_DEVICES=`visible` (None or "": every GPU, in order)."""
    if not visible:
        return device_index
    ids = [v.strip() for v in visible.split(",") if v.strip()]
    if device_index >= len(ids) or not all(v.isdigit() for v in ids):
        raise ValueError(
            f"CUDA_VISIBLE_DEVICES={visible!r} does not map cuda:{device_index} to a GPU index; "
            "give GPU numbers (such as 0,1), not UUIDs, when training with --eval-gpus"
        )
    return int(ids[device_index])


def plan_layout(
    eval_gpus: Sequence[int] | None,
    train_gpus: Sequence[int | None],
    process: int = 0,
    available: Sequence[int] | None = None,
) -> Layout:
    """This process's layout (the rules are in the module doc). `train_gpus`: every process's
    training GPU by process index (None for a process that trains on CPUs); `available`: the
    GPUs the machine has (None: not checked, e.g. compile-only evaluation)."""
    n = max(1, len(train_gpus))
    own = train_gpus[process] if train_gpus else None
    train = tuple(g for g in train_gpus if g is not None)
    given = tuple(eval_gpus) if eval_gpus is not None else None
    if given is not None and available is not None:
        missing = sorted(set(given) - set(available))
        if missing:
            have = ",".join(map(str, sorted(available))) or "none"
            raise ValueError(
                f"--eval-gpus {','.join(map(str, given))}: this machine has no GPU "
                f"{','.join(map(str, missing))} (nvidia-smi lists: {have}); use one of those"
            )
    if n == 1:
        shares = own is not None and (given is None or own in given)
        return Layout(1, 0, train, given, shares, lock_eval=False)
    if given is None:  # several processes: each times on its own GPU
        mine = (own,) if own is not None else None
        return Layout(n, process, train, mine, own is not None, lock_eval=False)
    clash = sorted(set(given) & set(train))
    if clash:
        who = ", ".join(f"GPU {g} (process {list(train_gpus).index(g)})" for g in clash)
        raise ValueError(
            f"--eval-gpus {','.join(map(str, given))} overlaps the training GPUs: {who}; with "
            "several processes leave --eval-gpus out (each process times on its own GPU after "
            "its own generation) or give GPUs that no process trains on"
        )
    return Layout(n, process, train, given, shares_train_gpu=False, lock_eval=True)


class GpuLock:
    """An exclusive lock on GPUs shared by the processes of one machine: one `flock`ed file per
    GPU under `folder`, taken in index order (so two holders never wait on each other). The
    kernel drops a lock when its holder dies; `waited_s` is the time the last `acquire` waited."""

    def __init__(self, folder: str | Path, gpus: Sequence[int]) -> None:
        self.folder = Path(folder).expanduser()
        self.gpus = tuple(sorted(set(gpus)))
        self._stack: ExitStack | None = None
        self.waited_s = 0.0

    def __enter__(self) -> GpuLock:
        self.folder.mkdir(parents=True, exist_ok=True)
        t = time.perf_counter()
        stack = ExitStack()
        try:
            for g in self.gpus:
                fd = os.open(self.folder / f"gpu{g}.lock", os.O_RDWR | os.O_CREAT, 0o600)
                stack.callback(os.close, fd)
                fcntl.flock(fd, fcntl.LOCK_EX)
                stack.callback(fcntl.flock, fd, fcntl.LOCK_UN)
        except BaseException:
            stack.close()
            raise
        self._stack = stack
        self.waited_s = time.perf_counter() - t
        return self

    def __exit__(self, *exc) -> None:
        if self._stack is not None:
            self._stack.close()
            self._stack = None


class MeteredEvaluator:
    """The run's evaluator (an `Evaluator`: jobs -> results in job order) with counters for the
    step-time breakdown, and the layout's `GpuLock` held around each batch when given.

    Counters since the last `take()`: `candidates` (jobs evaluated), `cached` (of them served
    from the result cache), `eval_s` (wall seconds in the evaluator, waiting excluded),
    `wait_s` (seconds waiting for another process's timing to end) and `phases` (the evaluated
    candidates' `ExecResult.phases` summed, cached ones left out: where `eval_s` went; compile
    seconds overlap, `compile_jobs` at a time)."""

    def __init__(self, inner, lock: GpuLock | None = None) -> None:
        self.inner = inner
        self.lock = lock
        self._zero()

    def _zero(self) -> None:
        self.candidates, self.cached, self.eval_s, self.wait_s = 0, 0, 0.0, 0.0
        self.phases: dict[str, float] = {}

    def __call__(self, jobs):
        if self.lock is None:
            t = time.perf_counter()
            results = self.inner(jobs)
        else:
            with self.lock:
                self.wait_s += self.lock.waited_s
                t = time.perf_counter()
                results = self.inner(jobs)
        self.eval_s += time.perf_counter() - t
        self.candidates += len(jobs)
        self.cached += sum(bool(getattr(r, "cached", False)) for r in results)
        done = [getattr(r, "phases", {}) for r in results if not getattr(r, "cached", False)]
        self.phases = sum_phases([self.phases, *done], digits=None)
        return results

    def take(self) -> dict:
        """The counters (rounded) since the last call, then reset."""
        out = {
            "candidates": self.candidates,
            "cached": self.cached,
            "evaluator_s": round(self.eval_s, 3),
            "eval_wait_s": round(self.wait_s, 3),
            "eval_phases_s": sum_phases([self.phases]),
        }
        self._zero()
        return out

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if close is not None:
            close()
