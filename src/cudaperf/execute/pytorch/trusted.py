"""PyTorch→CUDA candidates, trusted side: the worker process that holds the answer.

The candidate is imported and run only in a separate, spawned process (`torch_child`, driven
through `torch_proc.CandidateProcess`). This process holds the task module, the reference
`Model`, every reference output and the secret salt; the candidate's process never does. It
sees only what it needs to run: the candidate's code, `get_init_inputs()`, the parameter
seed (a hash of the salt, so that `ModelNew` gets the reference's parameters), and the input
and output *buffers*, which this process owns (CUDA IPC from a private memory pool, so no
other tensor of this process shares their allocation; shared memory on the CPU).

Per config, with the task module's size constants overridden by the config:
1. Correctness trials. Each trial draws fresh inputs from a seed the candidate cannot see
   into a private tensor, runs the reference on a copy, writes the values into the *same*
   shared input buffers (pointer-keyed caches return stale data), poisons the output buffers,
   asks for one forward, and compares the copied outputs here (`rt.compare_outputs`).
   Inputs changed by the candidate are rejected; so is an output that shares memory with an
   input when the reference's does not (the inputs are bit-flipped and the outputs copied
   again: an alias changes).
   Inputs that separate functions: trials alternate between the task's own `get_inputs()`
   and a *signed, wider* distribution with the same shapes and dtypes (`signed_wide`), so a
   copy kernel fails a ReLU whose own inputs are `torch.rand`. Integer and bool tensors
   (indices, masks) are kept as drawn. The signed distribution is used only where the
   reference stays finite on it (else that config uses its own distribution only); there the
   bound relative to the expected values has each output's RMS as its floor (sums cancel on
   signed inputs: `rt.compare_outputs`, the rule of `execute.inputs.compare`).
2. Timing, trial by trial: fresh inputs into the same buffers before every timed trial (no
   memoising on a content probe), then one call timed in the candidate's process next to
   the launch (L2 flush, events, wall clock, device-wide sync). Cross-checks: work escaping
   the events (`sanity.escape_message`, bound scaled by the kernel time and the measured
   overhead of an empty timed call), the roofline, the timers' integrity, and this
   process's own clock around a burst of calls (`sanity.outside_clock_message`).
3. An output check on fresh inputs right after timing. 4. The profiler share of the candidate's
   own kernels (first timed config); the kernels seen launching go to `ExecResult.launched`.
5. Baselines: eager and `torch.compile` of `Model`, timed here on private inputs, cached.
A failing config does not stop the others from being checked (untimed); a crash, CUDA error
or hang of the candidate's process ends the job, and the process is discarded after every
job, so a sticky CUDA error never reaches the next candidate.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from collections.abc import Callable

import torch

from cudaperf.execute.held_out import JobFold, visible_first, visible_output
from cudaperf.execute.protocol import BaselinesRequest, ChildJob, JobReply, TorchRequest
from cudaperf.execute.pytorch import runtime as rt
from cudaperf.execute.pytorch.baselines import baselines, device_id
from cudaperf.execute.pytorch.proc import CandidateProcess, ChildError, take_child
from cudaperf.execute.pytorch.shared import SharedBuffers, mutated, same_bits
from cudaperf.execute.sanity import escape_message, outside_clock_message, roofline_message
from cudaperf.execute.types import ConfigResult, Status, Timing
from cudaperf.tasks.model import InputConfig, Task

__all__ = ["judge_profile", "run_torch_job", "signed_wide", "time_baselines"]

log = logging.getLogger(__name__)

_OWN, _SIGNED = "own", "signed"
_CUDA_ERROR = ("CUDA error", "cudaError", "illegal memory access", "device-side assert")


class _Fail(Exception):
    """A check failed: carries the status and message for this config; `trusted`: False when
    the message quotes what the candidate's process sent (withheld on a held-out config)."""

    def __init__(self, status: Status, message: str, trusted: bool = True):
        super().__init__(message)
        self.status, self.message, self.trusted = status, message, trusted


def _seed(salt: int, cfg: InputConfig, trial: int) -> int:
    h = hashlib.sha256(f"{salt}:{cfg.name}:{cfg.seed}:{trial}".encode()).digest()
    return int.from_bytes(h[:8], "little") & ((1 << 63) - 1)


def _draw(ref_mod, seed: int, device: str) -> list:
    """`get_inputs()` under the default device (a level-1 input of 1.6e9 floats takes seconds
    to draw on the CPU, milliseconds on the GPU)."""
    torch.manual_seed(seed)
    with torch.device(device):
        made = ref_mod.get_inputs()
    return [x.to(device) if isinstance(x, torch.Tensor) else x for x in made]


def signed_wide(xs: list, seed: int) -> list:
    """The second input distribution: every floating tensor replaced by uniform values in
    [-2m, 2m], m = max(1, max |x|) of the task's own draw (same shape, dtype and device);
    integer and bool tensors (indices, masks) and non-tensors kept as they are."""
    out = []
    for k, x in enumerate(xs):
        if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.numel() == 0:
            out.append(x)
            continue
        m = max(1.0, float(x.detach().abs().nan_to_num(0.0, 0.0, 0.0).max().item()))
        g = torch.Generator(device=x.device).manual_seed((seed + k) & ((1 << 63) - 1))
        u = torch.rand(x.shape, generator=g, device=x.device, dtype=torch.float32)
        out.append(((u * 2 - 1) * (2 * m)).to(x.dtype))
    return out


def _finite(out) -> bool:
    try:
        return all(bool(torch.isfinite(o).all()) for o in rt.as_list(out))
    except TypeError:
        return False


def _reference(ref, xs: list, device: str):
    """The reference's outputs on a copy of `xs` (so it can neither change nor alias them)."""
    with torch.no_grad():
        out = ref(*[x.clone() if isinstance(x, torch.Tensor) else x for x in xs])
    rt.sync(device)
    return out


def _ref_aliases(ref, xs: list) -> bool:
    """Whether the reference returns (a view of) one of its own inputs."""
    with torch.no_grad():
        copies = [x.clone() if isinstance(x, torch.Tensor) else x for x in xs]
        outs = rt.as_list(ref(*copies))
    ptrs = {c.untyped_storage().data_ptr() for c in copies if isinstance(c, torch.Tensor)}
    return any(o.untyped_storage().data_ptr() in ptrs for o in outs)


class _Config:
    """One config's trusted state: the reference, its seeds, the shared buffers."""

    def __init__(self, child: CandidateProcess, task: Task, cfg: InputConfig, req: TorchRequest):
        self.child, self.task, self.cfg, self.req = child, task, cfg, req
        self.dev, self.salt = req.device, req.salt
        self.ref_mod = rt.load_module(task.source, f"cudaperf_ref_{cfg.name}", cfg.sizes)
        init = self.ref_mod.get_init_inputs()
        pseed = _seed(self.salt, cfg, -1)
        with torch.device(self.dev):
            torch.manual_seed(pseed)
            self.ref = self.ref_mod.Model(*init).to(self.dev).eval()
        x0 = _draw(self.ref_mod, _seed(self.salt, cfg, 0), self.dev)
        self.ref_alias = _ref_aliases(self.ref, x0)
        self.bufs = SharedBuffers(x0, rt.as_list(_reference(self.ref, x0, self.dev)), self.dev)
        self.signed_ok = True
        child.ask("config", {"init": init, "seed": pseed, **self.bufs.payload()})

    def release(self) -> None:
        """The child lets go of this config's buffers first (CUDA IPC: the producer must
        outlive the consumer's use), then they are freed here."""
        try:
            if self.child.alive():
                self.child.ask("release")
        except ChildError:
            pass
        del self.bufs
        if self.dev == "cuda":
            torch.cuda.ipc_collect()

    def inputs(self, trial: int, dist: str) -> list:
        xs = _draw(self.ref_mod, _seed(self.salt, self.cfg, trial), self.dev)
        return signed_wide(xs, _seed(self.salt, self.cfg, trial) ^ 1) if dist == _SIGNED else xs

    def checked_call(self, trial: int, dist: str, alias_check: bool = False) -> tuple:
        """One forward on fresh inputs, judged here; (max_abs, max_rel) or raises _Fail."""
        xs = self.inputs(trial, dist)
        want = _reference(self.ref, xs, self.dev)
        if dist == _SIGNED and not _finite(want):
            log.info(
                "%s/%s: reference not finite on signed inputs; own distribution only",
                self.task.id,
                self.cfg.name,
            )
            self.signed_ok, dist = False, _OWN
            xs = self.inputs(trial, dist)
            want = _reference(self.ref, xs, self.dev)
        self.bufs.write_inputs(xs)
        meta = self.child.ask("call")
        bad = self.bufs.meta_message(meta)
        if bad:
            raise _Fail(Status.WRONG_OUTPUT, bad, trusted=False)  # shapes and dtypes it sent
        got = self.bufs.read_outs()
        if mutated(xs, self.bufs.inputs):
            raise _Fail(Status.REJECTED, "the candidate modified its inputs; write only outputs")
        if alias_check and not self.ref_alias:
            self.bufs.flip_inputs()
            self.child.ask("recopy")
            if not all(same_bits(a, b) for a, b in zip(got, self.bufs.read_outs(), strict=True)):
                raise _Fail(
                    Status.REJECTED,
                    (
                        "an output shares memory with an input (the reference's does not); "
                        "return a new tensor"
                    ),
                )
        tol = self.task.tolerance
        ok, mabs, mrel, msg = rt.compare_outputs(
            want, got, tol.atol, tol.rtol, self.req.normwise_rtol, signed=dist == _SIGNED
        )
        if not ok:
            where = {_OWN: "", _SIGNED: " (on signed inputs of a wider range than get_inputs())"}
            raise _Fail(Status.WRONG_OUTPUT, msg + where[dist] + self._when(trial))
        return mabs or 0.0, mrel or 0.0

    @staticmethod
    def _when(trial: int) -> str:
        if trial == 0:
            return ""
        if trial >= 2000:
            return " (after timing, on fresh inputs in the same buffers)"
        return f" (trial {trial}: new values in the same input buffers)"

    def check(self) -> tuple[float, float]:
        n = max(self.req.correctness_trials, 2)
        worst = (0.0, 0.0)
        for t in range(n):
            dist = _SIGNED if t % 2 and self.signed_ok else _OWN
            e = self.checked_call(t, dist, alias_check=t == 0)
            worst = (max(worst[0], e[0]), max(worst[1], e[1]))
        return worst

    def timed(self, profile: bool) -> dict:
        req, t_begin = self.req, time.perf_counter()
        self.child.ask("warmup", req.warmup)
        ev, wall = [], []
        for t in range(req.trials):
            self.bufs.write_inputs(self.inputs(1000 + t, _OWN))  # fresh inputs every trial
            e, w = _pair(self.child.ask("trial"))
            ev.append(e)
            wall.append(w)
            if len(ev) >= 5 and time.perf_counter() - t_begin > req.budget_s:
                break
        tampered = self.child.ask("timers")
        if tampered:
            raise _Fail(Status.REJECTED, str(tampered), trusted=False)
        self.checked_call(2000, _OWN)  # the output check after timing, on fresh inputs
        timing, wall_t = Timing.of(ev), Timing.of(wall)
        overhead = _overhead(self.child.ask("calibrate"))
        nbytes = self.bufs.input_bytes()
        hack = (
            escape_message(timing, wall_t, overhead)
            or roofline_message(nbytes, timing, req.max_bandwidth_gbs)
            or self.outside_clock(timing)
        )
        if hack:
            raise _Fail(Status.REJECTED, hack)
        launched, note = self.profile() if profile else (None, "")
        private = self.inputs(3000, _OWN)
        eager, compiled = baselines(self.task, self.cfg, self.ref, private, req, self.dev)
        return {
            "timing": timing,
            "eager_timing": eager,
            "compile_timing": compiled,
            "message": note,
            "launched": launched,
        }

    def outside_clock(self, timing: Timing) -> str:
        """This process's clock around k back-to-back calls against the reported time."""
        ping = min(_clocked(self.child, "ping") for _ in range(3))
        k = int(min(200, max(3, 2000.0 / max(timing.median_us, 1.0))))
        best = float("inf")
        for _ in range(3):  # a busy host can stretch a burst: judged on the fastest of three
            best = min(best, max(_clocked(self.child, "burst", k) - ping, 0.0) / k)
            if not outside_clock_message(best, timing):
                return ""
        return outside_clock_message(best, timing)

    def profile(self) -> tuple[list[str] | None, str]:
        return judge_profile(self.child.ask("profile"), self.req.min_kernel_share)


def judge_profile(got: dict, min_share: float) -> tuple[list[str] | None, str]:
    """(launched kernel names, note) from the candidate process's profile of one forward, or
    raises _Fail when its own kernels ran not at all or carry less than `min_share` of the
    GPU time (the rest is PyTorch doing the task's work). A share of None: not observed."""
    if not isinstance(got, dict):
        raise ChildError("the candidate's process sent a malformed profile")
    share, note, launched = got.get("share"), str(got.get("note", "")), got.get("launched")
    if share is not None and float(share) == 0.0:
        raise _Fail(Status.REJECTED, "none of the candidate's own kernels ran in forward")
    if share is not None and float(share) < min_share:
        raise _Fail(
            Status.REJECTED,
            (
                f"the candidate's kernels carry only {float(share):.0%} of the forward's GPU "
                "time; the rest is PyTorch doing the task's work"
            ),
        )
    names = [str(n) for n in launched] if isinstance(launched, list) else None
    return names, note


def _pair(v) -> tuple[float, float]:
    """(event µs, wall µs) of one timed call as reported; a time that is not a finite,
    non-negative number is rejected (it would poison every speedup computed from it)."""
    if not (isinstance(v, list) and len(v) == 2 and all(isinstance(x, int | float) for x in v)):
        raise ChildError("the candidate's process sent a malformed timing reply")
    if not all(math.isfinite(x) and x >= 0 for x in v):
        raise _Fail(Status.REJECTED, f"the candidate's process reported an impossible time {v}")
    return float(v[0]), float(v[1])


def _overhead(v) -> float:
    """The reported empty-call timing overhead, kept within [0, 100] µs: a forged huge one
    would switch the escape check off."""
    x = float(v) if isinstance(v, int | float) else 0.0
    return min(max(x, 0.0), 100.0) if math.isfinite(x) else 0.0


def _clocked(child: CandidateProcess, kind: str, arg=None) -> float:
    t0 = time.perf_counter()
    child.ask(kind, arg)
    return (time.perf_counter() - t0) * 1e6


def _one_config(child, task, cfg, req, timed: bool, profile: bool):
    """(ConfigResult, launched kernel names or None) or raises _Fail / ChildError."""
    c = _Config(child, task, cfg, req)
    try:
        mabs, mrel = c.check()
        res = {
            "config": cfg.name,
            "held_out": cfg.held_out,
            "correct": True,
            "max_abs_err": mabs,
            "max_rel_err": mrel,
        }
        launched = None
        if timed:
            t = c.timed(profile)
            launched = t.pop("launched")
            res.update(t)
        return ConfigResult(**res), launched
    finally:
        c.release()


def _job_message(req: TorchRequest) -> dict:
    """The candidate process's `job` message (`protocol.ChildJob`, as a plain dict)."""
    return ChildJob(
        code=req.code,
        ext_dir=req.ext_dir,
        workdir=req.workdir,
        cpu_limit_s=req.cpu_limit_s,
        output_limit_mb=req.output_limit_mb,
        device=req.device,
        kernel_names=sorted(rt.kernel_names(req.code)),
    ).wire()


def _probe_sharing(child: CandidateProcess, device: str) -> None:
    """Share a small buffer with the fresh child before any candidate code runs there: if
    that fails, this machine cannot share buffers and no candidate is to blame (raises)."""
    src = torch.arange(4, dtype=torch.float32, device=device)
    bufs = SharedBuffers([src], [], device)
    bufs.write_inputs([src])
    try:
        got = child.ask("probe", bufs.inputs)
    except ChildError as e:
        raise RuntimeError(f"sharing buffers with the candidate's process failed: {e}") from e
    if got != 6.0:
        raise RuntimeError(f"sharing buffers with the candidate's process failed (sum {got})")


def run_torch_job(
    req: TorchRequest, spare: bool = False, on_output: Callable[[str], None] | None = None
) -> JobReply:
    """Check and time one PyTorch→CUDA candidate on every config of `req.task`.

    `spare`: start the next job's candidate process now. Returns the worker reply: status,
    per-config results (messages of held-out configs without sizes or the candidate's text),
    message, launched, restart (True after the candidate's process died or hit a CUDA error:
    buffers it had mapped may never be released, so the worker is replaced; the candidate
    itself never ran here), and `output` (`held_out`: visible configs run first, and what the
    candidate printed before the first held-out one is all a result shows; also handed to
    `on_output` when taken). Errors of this process propagate.
    """
    task = req.task
    rt.pin_precision()
    child = take_child(spare)
    fold, launched, restart, output = JobFold(), None, False, None
    try:
        _probe_sharing(child, req.device)
        for i in visible_first(task.configs):
            cfg, stop, trusted = task.configs[i], False, True
            try:
                if not fold.started:
                    child.output_mb = req.output_limit_mb  # names the limit if it kills
                    child.ask("job", _job_message(req))
                if cfg.held_out and output is None:
                    output = visible_output(child, req.workdir, on_output)
                cr, seen = _one_config(
                    child, task, cfg, req, fold.status is Status.OK, not fold.started
                )
                st, launched = Status.OK, seen if seen is not None else launched
            except _Fail as f:
                st, msg, trusted = f.status, f.message, f.trusted
            except ChildError as e:
                st, msg, stop, trusted = Status.RUNTIME_ERROR, e.message, True, e.died
                # A child that died (or broke its CUDA context) while mapping this process's
                # buffers may never release them: a fresh worker keeps memory from leaking.
                restart = e.died or any(k in e.message for k in _CUDA_ERROR)
            if st is not Status.OK:
                cr = ConfigResult(
                    config=cfg.name, held_out=cfg.held_out, correct=False, message=msg
                )
            fold.add(i, cfg, st, cr, trusted)
            if stop:
                break
    finally:
        child.close()
    return JobReply(
        status=fold.status,
        configs=fold.configs(),
        message=fold.message,
        launched=launched,
        restart=restart,
        output=output,
    )


def time_baselines(req: BaselinesRequest) -> JobReply:
    """Worker op: time the missing baselines of every config of the request's task on private
    inputs (the trusted side's reference, parameters and input draw), reply the new records."""
    import gc

    task, dev, salt = req.task, req.device, req.salt
    rt.pin_precision()
    new: list[dict] = []
    for cfg in task.configs:
        ref_mod = rt.load_module(task.source, f"cudaperf_ref_{cfg.name}", cfg.sizes)
        init = ref_mod.get_init_inputs()
        with torch.device(dev):
            torch.manual_seed(_seed(salt, cfg, -1))
            ref = ref_mod.Model(*init).to(dev).eval()
        private = _draw(ref_mod, _seed(salt, cfg, 3000), dev)
        baselines(task, cfg, ref, private, req, dev, new)
        del ref, private
    gc.collect()
    if dev == "cuda":
        torch.cuda.empty_cache()  # the card goes back to the next candidate
    return JobReply(status=Status.OK, device_id=device_id(dev), new_baselines=new)
