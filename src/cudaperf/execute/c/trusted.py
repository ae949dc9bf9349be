"""One candidate on every config, inside the worker: check, time, re-check, cross-check.

Per config: (1) a checked call on input set 0 (secret seed), compared with the C reference;
(2) warm-up and timed trials in the native harness; (3) a second checked call on fresh input
set 1 into the same buffers' shapes, which catches outputs cached across calls; (4) the
wall-clock cross-check (work that escapes the timing events is rejected) and a roofline check
(a time implying more input bytes per second than `max_bandwidth_gbs` is rejected). Every
config is checked, held-out ones included (after the visible ones: `held_out`); after a wrong
output the remaining configs are still checked but not timed. A CUDA error or a crash of the
candidate stops the job. A held-out config's message keeps only this side's words, without
numbers, and the candidate's output is what it printed before the first held-out call. The escape
bound uses the harness's own measured timing overhead (an empty timed call). After every config
passed, one more checked call on the largest visible config runs with its kernels traced
(`c.trace`): a correct answer the GPU did not compute (a host loop between two copies, with or
without a token kernel) is REJECTED (`sanity.host_work_message`), and the kernels seen are the
result's `launched`.

References: the input sets a job needs that the worker has not cached yet (every config's set
0 and separating set 2, and set 1 when outputs are re-checked) are drawn and run through the C
reference at the start of the job, in threads (the serial C reference and numpy release the
GIL: a task's configs cost about the slowest one's time instead of their sum). The worker keeps
them in an LRU bounded by bytes (`Libs.max_set_bytes`: `EvalConfig.set_cache_gib`, default
`_MAX_SET_BYTES`), not by count, so the references of a training run's task pool stay across
its steps when the bound holds the pool (the #17 pilot's 16 C→CUDA tasks: ~38 GiB of sets, so
the 8 GiB default redrew them every step; the training preset sizes it from host memory).

How the reference is protected on this track: by process separation, as on the PyTorch→CUDA
track (`torch_trusted`). This worker holds the salt, the cached inputs and the reference
outputs, and never loads candidate code: the candidate's library (its host code linked with the
harness) is loaded only in a spawned process of its own (`c_child`, through `c_proc`), which
gets each call's input arrays and output buffers in a shared segment and nothing else. Every
output is judged here on a private copy. So a candidate that walks its process's memory, or
runs Python in it through the interpreter's C API, finds no answer there. The static checks
(`checks.FATAL`: file, process, dynamic loading, environment, /proc and /dev, the Python C
API) refuse the obvious before anything is compiled; the worker's confinement (`confine`:
no ptrace or process_vm_readv, not dumpable) keeps the child out of this process.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from cudaperf.execute.c.proc import CProcess, NativeRun, segment_bytes, take_c_child
from cudaperf.execute.c.reference import compare, reference_finite, run_reference, time_reference
from cudaperf.execute.held_out import JobFold, held_out_message, visible_first, visible_output
from cudaperf.execute.isolation.child_proc import ChildError
from cudaperf.execute.isolation.share import DeviceShare, kill_stopped
from cudaperf.execute.protocol import CBaselinesRequest, JobReply, RunRequest
from cudaperf.execute.sanity import escape_message, host_work_message, roofline_message
from cudaperf.execute.types import ConfigResult, PhaseClock, Status, Timing
from cudaperf.tasks.inputs import make_inputs
from cudaperf.tasks.model import InputConfig, Role, Task, eval_length

__all__ = ["Libs", "prefetch_sets", "run_job", "trace_config"]

_READ = (Role.IN, Role.INOUT)  # roles whose bytes a call must read
_MAX_SETS = 4096  # cached (inputs, reference outputs) per worker, at most ...
_MAX_SET_BYTES = 8 << 30  # ... and at most this many bytes of them (the newest always stays)
_PREFETCH_THREADS = 8


class Libs:
    """What a worker keeps between jobs: loaded shared libraries, and cached inputs with their
    reference outputs (small LRU) and CPU-baseline times."""

    def __init__(self, max_set_bytes: int | None = None, share: DeviceShare | None = None) -> None:
        self.max_set_bytes = max_set_bytes  # the sets' byte bound (None: _MAX_SET_BYTES)
        self.share = share or DeviceShare()  # the GPU's turns among its workers (`share`)
        self.libs: dict[str, ctypes.CDLL] = {}
        self.sets: OrderedDict[tuple, tuple[list[np.ndarray], list[np.ndarray]]] = OrderedDict()
        self.set_bytes = 0  # bytes held in `sets`
        self.cpu: dict[tuple, list[float]] = {}

    def lib(self, path: str) -> ctypes.CDLL:
        if path not in self.libs:
            self.libs[path] = ctypes.CDLL(path, mode=os.RTLD_LOCAL | os.RTLD_NOW)
        return self.libs[path]


def _task_key(task: Task) -> str:
    return hashlib.sha256(task.model_dump_json().encode()).hexdigest()[:16]


def _draw_set(task: Task, cfg: InputConfig, index: int, salt: int, ref_lib, sep: bool):
    inputs = make_inputs(task, cfg, index, salt, separating=sep)
    return inputs, run_reference(task, ref_lib, inputs)


def _set_bytes(entry) -> int:
    return sum(a.nbytes for arrays in entry for a in arrays)


def _keep(libs: Libs, key: tuple, entry) -> None:
    """Cache one set; evict the least recently used beyond the count and byte bounds."""
    if key in libs.sets:
        libs.set_bytes -= _set_bytes(libs.sets[key])
    libs.sets[key] = entry
    libs.sets.move_to_end(key)
    libs.set_bytes += _set_bytes(entry)
    limit = _set_limit(libs)
    while len(libs.sets) > 1 and (len(libs.sets) > _MAX_SETS or libs.set_bytes > limit):
        _, old = libs.sets.popitem(last=False)
        libs.set_bytes -= _set_bytes(old)


def _set_limit(libs: Libs) -> int:
    return libs.max_set_bytes if libs.max_set_bytes is not None else _MAX_SET_BYTES


def _estimate_bytes(task: Task, cfg: InputConfig) -> int:
    """Bytes of one input set and its reference outputs (each array twice), before drawing."""
    n = 0
    for p in task.signature:
        if p.role is not Role.SCALAR:
            n += eval_length(p.length or "0", cfg.sizes) * np.dtype(p.dtype).itemsize
    return 2 * n


def _set_key(task_key: str, cfg: InputConfig, index: int, salt: int, sep: bool) -> tuple:
    """The worker cache's key of one input set (`_input_set` and `prefetch_sets` share it)."""
    return (task_key, cfg.name, index, salt, sep)


def _input_set(
    task: Task, cfg: InputConfig, index: int, salt: int, libs: Libs, ref_lib, sep: bool = False
):
    key = _set_key(_task_key(task), cfg, index, salt, sep)
    if key not in libs.sets:
        _keep(libs, key, _draw_set(task, cfg, index, salt, ref_lib, sep))
    libs.sets.move_to_end(key)
    return libs.sets[key]


def prefetch_sets(task: Task, req: RunRequest | CBaselinesRequest, libs: Libs, ref_lib) -> int:
    """Draw and run the reference on every input set of `task` the job may need and the worker
    has not cached, in threads (module docstring); returns how many were computed."""
    tk = _task_key(task)
    want = []
    for cfg in task.configs:
        for index, sep in ((0, False), (2, True)) + (((1, False),) if req.check_after else ()):
            if _set_key(tk, cfg, index, req.salt, sep) not in libs.sets:
                want.append((cfg, index, sep))
    if len(want) < 2 or sum(_estimate_bytes(task, w[0]) for w in want) > _set_limit(libs) // 2:
        return 0  # nothing to overlap, or too large at once: `_input_set` draws each in turn
    with ThreadPoolExecutor(min(_PREFETCH_THREADS, len(want))) as ex:
        sets = list(ex.map(lambda w: _draw_set(task, w[0], w[1], req.salt, ref_lib, w[2]), want))
    for (cfg, index, sep), entry in zip(want, sets, strict=True):
        _keep(libs, _set_key(tk, cfg, index, req.salt, sep), entry)
    return len(want)


def _buffers(task: Task, inputs: list[np.ndarray], download_inputs: bool) -> list[np.ndarray]:
    """Where a checked call's results land: a fresh buffer for each array the harness copies
    back (outputs, inout arrays, and inputs when they are downloaded to check they were not
    modified), the input itself otherwise (scalars, inputs the harness only reads). The
    inputs' values go to the call from `inputs` (`CProcess.run`), so these buffers need no
    copy of them: at the dataset's sizes that copy was one more pass over every array per call."""
    out = []
    for p, a in zip(task.signature, inputs, strict=True):
        back = p.role in (Role.OUT, Role.INOUT) or (p.role is Role.IN and download_inputs)
        out.append(np.empty_like(a) if back else a)
    return out


def _check(
    proc: CProcess,
    task,
    inputs,
    want,
    download_inputs: bool = True,
    held_out: bool = False,
    signed: bool = False,
    trace: str | None = None,
    clock: PhaseClock | None = None,
) -> tuple[NativeRun, object]:
    """One checked call and its comparison; `clock` gets its parts: `copy` (this side's host
    copies into and out of the call segment), `call` (the candidate process's call: uploads,
    kernels, downloads) and `compare`."""
    clock = clock or PhaseClock()
    bufs = _buffers(task, inputs, download_inputs)
    run = proc.run(
        task, inputs, download_inputs=download_inputs, trace=trace, into=bufs, clock=clock
    )
    if run.rc != 0:
        return run, None
    with clock("compare"):
        return run, compare(task, inputs, bufs, want, held_out, signed)


def _one_config(
    proc: CProcess,
    task: Task,
    cfg: InputConfig,
    req: RunRequest,
    libs: Libs,
    ref_lib,
    timed: bool,
    clock: PhaseClock,
):
    """Returns (status, ConfigResult, stop): `stop` after a CUDA error (the candidate's process
    is not used again). A candidate process that dies raises ChildError. `clock` gets the
    seconds of each phase (`types.PHASES`)."""
    base = {"config": cfg.name, "held_out": cfg.held_out}
    share = libs.share
    with share.section(proc):  # checks of several workers overlap (`share`)
        with clock("draw"):
            inputs, want = _input_set(task, cfg, 0, req.salt, libs, ref_lib)
        run, cmp = _check(proc, task, inputs, want, held_out=cfg.held_out, clock=clock)
        if run.rc != 0:
            fail = ConfigResult(**base, correct=False, message=run.error)
            return Status.RUNTIME_ERROR, fail, True
        errs = {"max_abs_err": cmp.max_abs_err, "max_rel_err": cmp.max_rel_err}
        if not cmp.correct:
            st = Status.REJECTED if cmp.inputs_modified else Status.WRONG_OUTPUT
            return st, ConfigResult(**base, correct=False, **errs, message=cmp.message), False
        sep = _separating_check(proc, task, cfg, req, libs, ref_lib, base, clock)
        if sep is not None:
            return sep
    if not timed:
        return Status.OK, ConfigResult(**base, correct=True, **errs), False
    with share.section(proc, exclusive=True):  # numbers are measured with the GPU alone
        if req.cpu_baselines is not None:  # timed in a request that ran no candidate (c.baselines)
            rec = req.cpu_baselines.get(cfg.name)
            cpu = Timing.model_validate(rec) if rec else None
        else:
            ckey = (_task_key(task), cfg.name)
            if ckey not in libs.cpu:
                with clock("cpu"):
                    libs.cpu[ckey] = time_reference(
                        task, ref_lib, inputs, req.cpu_trials, req.cpu_budget_s
                    )
            cpu = Timing.of(libs.cpu[ckey])
        with clock("time"):
            tr = proc.run(task, inputs, req.warmup, req.trials, req.budget_s)
    if tr.rc != 0 or not tr.event_us:
        msg = tr.error or "no timed trial completed"
        return Status.RUNTIME_ERROR, ConfigResult(**base, correct=True, **errs, message=msg), True
    timing = Timing.of(tr.event_us)
    res = dict(base, correct=True, **errs, timing=timing, cpu_timing=cpu)
    read = sum(
        a.nbytes
        for p, a in zip(task.signature, inputs, strict=True)
        if p.role in _READ and not p.partial_read
    )
    hack = escape_message(timing, Timing.of(tr.wall_us), tr.overhead_us) or roofline_message(
        read, timing, req.max_bandwidth_gbs
    )
    if hack:
        return Status.REJECTED, ConfigResult(**res, message=hack), False
    if req.check_after:
        with share.section(proc):
            with clock("draw"):
                inputs1, want1 = _input_set(task, cfg, 1, req.salt, libs, ref_lib)
            run, cmp = _check(proc, task, inputs1, want1, False, cfg.held_out, clock=clock)
        if run.rc != 0:
            return Status.RUNTIME_ERROR, ConfigResult(**res, message=run.error), True
        if not cmp.correct:
            msg = "after timing, on fresh inputs: " + cmp.message
            st = Status.REJECTED if cmp.inputs_modified else Status.WRONG_OUTPUT
            return st, ConfigResult(**dict(res, correct=False), message=msg), False
    return Status.OK, ConfigResult(**res), False


def _separating_check(proc, task, cfg, req, libs, ref_lib, base, clock: PhaseClock):
    """Correctness on the second input distribution (`tasks.inputs.separating_distribution`), where
    the reference stays finite on it; None when it passes or does not apply."""
    with clock("draw"):
        inputs, want = _input_set(task, cfg, 2, req.salt, libs, ref_lib, sep=True)
    if not reference_finite(task, want):
        return None
    run, cmp = _check(proc, task, inputs, want, held_out=cfg.held_out, signed=True, clock=clock)
    if run.rc != 0:
        return Status.RUNTIME_ERROR, ConfigResult(**base, correct=False, message=run.error), True
    if cmp.correct:
        return None
    msg = "on signed, wider-range inputs (same shapes): " + cmp.message
    st = Status.REJECTED if cmp.inputs_modified else Status.WRONG_OUTPUT
    errs = {"max_abs_err": cmp.max_abs_err, "max_rel_err": cmp.max_rel_err}
    return st, ConfigResult(**base, correct=False, **errs, message=msg), False


def time_cpu_baselines(req: CBaselinesRequest, libs: Libs) -> JobReply:
    """Worker op `c_baselines` (`c.baselines`): the task's reference only, no candidate.
    Phase `draw` runs the reference on the task's input sets (kept in `libs` for its jobs);
    phase `time` times the serial reference on set 0 of every config and replies the records
    (`key_prefix` + config name -> Timing)."""
    task = req.task
    ref_lib = libs.lib(req.ref_lib)
    if req.phase == "draw":
        with libs.share.section():
            prefetch_sets(task, req, libs, ref_lib)
        return JobReply(status=Status.OK, new_baselines=[])
    new = []
    for cfg in task.configs:
        with libs.share.section():
            inputs, _ = _input_set(task, cfg, 0, req.salt, libs, ref_lib)
        with libs.share.section(exclusive=True):  # the host quiet, as far as workers go
            times = time_reference(task, ref_lib, inputs, req.cpu_trials, req.cpu_budget_s)
        new.append({"key": req.key_prefix + cfg.name, "timing": Timing.of(times).model_dump()})
    return JobReply(status=Status.OK, new_baselines=new)


def run_job(
    req: RunRequest, libs: Libs, spare: bool = False, on_output: Callable[[str], None] | None = None
) -> JobReply:
    """Check and time one candidate library on every config of `req.task`. The library runs in
    a candidate process of its own (`c_proc`), closed when the job ends; `spare` starts the
    next job's process now. The reply never asks for a worker restart: a CUDA error or a crash
    of the candidate ends only its process (RUNTIME_ERROR), and this worker keeps its sets.
    Visible configs run first (`held_out`); the candidate's output up to the first held-out
    call is the reply's `output`, also handed to `on_output` as soon as it is taken."""
    task = req.task
    ref_lib = libs.lib(req.ref_lib)
    clock = PhaseClock()
    share = libs.share
    with share.section(), clock("draw"):
        prefetch_sets(task, req, libs, ref_lib)
    fold, output = JobFold(), None
    with clock("start"):
        proc = take_c_child(spare)
    try:
        for i in visible_first(task.configs):
            cfg = task.configs[i]
            try:
                if not fold.started:
                    with share.section(proc), clock("start"):
                        proc.start_job(
                            task, req.lib, req.workdir, req.cpu_limit_s, req.output_limit_mb
                        )
                if cfg.held_out and output is None:
                    with share.section(proc):
                        output = visible_output(proc, req.workdir, on_output)
                st, cr, stop = _one_config(
                    proc, task, cfg, req, libs, ref_lib, fold.status is Status.OK, clock
                )
                trusted = st is not Status.RUNTIME_ERROR  # else the harness's text (the child's)
            except ChildError as e:
                st, stop, trusted = Status.RUNTIME_ERROR, True, e.died
                cr = ConfigResult(
                    config=cfg.name, held_out=cfg.held_out, correct=False, message=e.message
                )
            fold.add(i, cfg, st, cr, trusted)
            if stop:
                break
        trace = _Traced()
        if fold.status is Status.OK:  # (a failed job is not traced)
            with share.section(proc, exclusive=True), clock("trace"):  # its share: GPU alone
                trace = _trace_job(proc, task, req, libs, ref_lib, fold)
    finally:
        if share.active:  # stopped between sections: it could not read a request to exit
            kill_stopped(proc)
        proc.close()
    return JobReply(
        status=fold.status,
        configs=fold.configs(),
        message=fold.message,
        output=output,
        launched=trace.launched,
        device_share=trace.share,
        trace_note=trace.note,
        phases=clock.rounded(),
    )


@dataclass(frozen=True)
class _Traced:
    launched: list[str] | None = None  # kernel names the trace saw
    share: float | None = None  # device work / the call's wall time
    note: str | None = None  # None: not tried; "": traced; else why not


def trace_config(task: Task) -> int | None:
    """The config a job's kernel trace runs on: the largest visible one (where host work
    stands out most), or None when every config is held out."""
    vis = [i for i, c in enumerate(task.configs) if not c.held_out]
    return max(vis, key=lambda i: (segment_bytes(task, task.configs[i]), -i)) if vis else None


WITHHELD_AFTER = (
    "the candidate failed on a repeated call after the held-out configs ran; its own error "
    "text there is withheld (held-out sizes stay secret)"
)


def _trace_job(proc: CProcess, task: Task, req: RunRequest, libs: Libs, ref_lib, fold) -> _Traced:
    """After every config passed: one more checked call on `trace_config`, warm and traced
    (`c.trace`), its output judged again; a call whose work the GPU did not do is REJECTED
    (`sanity.host_work_message`). Changes `fold` only when the call fails or is rejected.
    The call comes after the held-out configs (so it cannot disturb their timing), when the
    candidate's process has seen their sizes: its messages keep only this side's words,
    without numbers, as a held-out config's do (`held_out`)."""
    i = trace_config(task)
    if fold.status is not Status.OK or i is None or i not in fold.results:
        return _Traced()
    if not req.trace_lib:
        return _Traced(note="no CUPTI shim here (c.trace.build_trace): host work goes unseen")
    cfg, done = task.configs[i], fold.results[i]
    after = any(c.held_out for c in task.configs)

    def fail(st: Status, message: str, trusted: bool, **update) -> _Traced:
        if after:
            message = held_out_message(message, trusted, WITHHELD_AFTER)
        fold.add(i, cfg, st, done.model_copy(update={"message": message, **update}), True)
        return _Traced()

    inputs, want = _input_set(task, cfg, 0, req.salt, libs, ref_lib)
    try:
        run, cmp = _check(proc, task, inputs, want, trace=req.trace_lib)
    except ChildError as e:
        return fail(Status.RUNTIME_ERROR, e.message, e.died)
    if run.rc != 0:
        return fail(Status.RUNTIME_ERROR, run.error, False)
    if not cmp.correct:
        st = Status.REJECTED if cmp.inputs_modified else Status.WRONG_OUTPUT
        return fail(st, "on a repeated call: " + cmp.message, True, correct=False)
    tr = run.trace
    if tr is None or tr.error:
        return _Traced(note=tr.error if tr is not None else "the candidate's process sent no trace")
    share = min(tr.device_us / tr.wall_us, 1.0) if tr.wall_us > 0 else None
    hack = host_work_message(tr.wall_us, tr.device_us, req.min_device_share)
    if hack:
        fail(Status.REJECTED, hack, True)
    return _Traced(list(tr.names), share, "")
