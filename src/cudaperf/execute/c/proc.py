"""`CProcess`: the trusted side's handle on one spawned C→CUDA candidate process (`c_child`).

The worker (`measure`) holds the salt, the cached input sets and their reference outputs; the
candidate's library is loaded only in the child. Each harness call goes through one shared
memory segment (an anonymous `memfd`, passed once per size to the child): this side writes the
call's input arrays into it, the child runs the harness on the segment's addresses (uploads,
the candidate, downloads into the segment), and this side copies what came back into its own
arrays before judging them. The segment holds only the current call's inputs and output
buffers: no reference output is ever written there, and outputs are copied out after the reply,
so a later change by the child cannot alter what was judged.

One job per child: `measure.run_job` closes it when the job ends, whatever happened, so a
sticky CUDA error, a crash or leftover state of a candidate never meets the next one, and the
worker itself never loads candidate code (its cached references survive a candidate's CUDA
error). A spare child is started at the start of each job for the next one (`child_proc.Spare`:
interpreter start-up is CPU work; the child touches the GPU only when its job's first call
loads the candidate).
"""

from __future__ import annotations

import math
import mmap
import multiprocessing
import os
import tempfile
from dataclasses import dataclass

import numpy as np

from cudaperf.execute.c.harness import IN_NO_DOWNLOAD, ROLE_CODES
from cudaperf.execute.isolation.child_proc import ChildError, Spare, SpawnedChild
from cudaperf.execute.types import PhaseClock
from cudaperf.tasks.model import InputConfig, Role, Task, eval_length

__all__ = ["CProcess", "KernelTrace", "NativeRun", "segment_bytes", "take_c_child"]

_ALIGN = 256  # bytes between the segment's arrays
_MIN_SEGMENT = 1 << 16
_COPY_BACK = (ROLE_CODES[Role.IN], ROLE_CODES[Role.OUT], ROLE_CODES[Role.INOUT])
_WRITE = (ROLE_CODES[Role.IN], ROLE_CODES[Role.INOUT], ROLE_CODES[Role.SCALAR], IN_NO_DOWNLOAD)


class NativeRun:
    """Result of one harness call (`harness.RUN_SYMBOL`)."""

    def __init__(
        self,
        rc: int,
        error: str,
        event_us: list[float],
        wall_us: list[float],
        overhead_us: float = 0.0,
        trace: KernelTrace | None = None,
    ):
        self.rc = rc  # 0 on success, else a CUDA error code (or -1)
        self.error = error  # harness message when rc != 0
        self.event_us = event_us  # per-trial event times (timing mode)
        self.wall_us = wall_us  # per-trial host wall times (timing mode)
        self.overhead_us = overhead_us  # median (wall - event) of an empty timed call
        self.trace = trace  # a traced checked call's kernel trace (`c.trace`)


@dataclass(frozen=True)
class KernelTrace:
    """What the kernel trace of one checked call saw (`c.trace`), checked for shape; `error`
    says why there is none (then the numbers are 0)."""

    wall_us: float = 0.0  # the candidate's call, as the host saw it
    device_us: float = 0.0  # union of its kernels, memsets and device-to-device copies
    kernels: int = 0  # kernels that ran in the call
    names: tuple[str, ...] = ()  # their names (at most 16)
    error: str = ""


def _kernel_trace(value) -> KernelTrace | None:
    """The child's trace as a `KernelTrace` (None when it sent none); ChildError if malformed."""
    if value is None:
        return None
    bad = ChildError("the candidate's process sent a malformed kernel trace")
    if not isinstance(value, dict):
        raise bad
    if "error" in value:
        if not isinstance(value["error"], str):
            raise bad
        return KernelTrace(error=value["error"][:300] or "no kernel trace")
    nums = [value.get(k) for k in ("wall_us", "device_us", "kernels")]
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in nums):
        raise bad
    if not all(math.isfinite(x) and x >= 0 for x in nums):
        raise bad
    names = value.get("names", [])
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise bad
    dropped = value.get("dropped", 0)
    if not isinstance(dropped, int) or isinstance(dropped, bool):
        raise bad
    if dropped > 0:  # the device time would be undercounted: no verdict from this trace
        return KernelTrace(error="more device records in one call than the trace keeps")
    wall, dev, kernels = (float(x) for x in nums)
    return KernelTrace(wall, dev, int(kernels), tuple(n[:200] for n in names[:16]))


def _numbers(v, limit: int) -> list[float]:
    if not isinstance(v, list) or len(v) > limit:
        raise ChildError("the candidate's process sent a malformed harness reply")
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
        raise ChildError("the candidate's process sent a malformed harness reply")
    return [float(x) for x in v]


def _native_run(value, trials: int) -> NativeRun:
    """The child's reply as a `NativeRun`, checked for shape and types (ChildError if not)."""
    if not isinstance(value, dict):
        raise ChildError("the candidate's process sent a malformed harness reply")
    rc, error, over = value.get("rc"), value.get("error"), value.get("overhead_us", 0.0)
    if not isinstance(rc, int) or isinstance(rc, bool) or not isinstance(error, str):
        raise ChildError("the candidate's process sent a malformed harness reply")
    if not isinstance(over, (int, float)) or isinstance(over, bool):
        raise ChildError("the candidate's process sent a malformed harness reply")
    ev = _numbers(value.get("event_us"), max(trials, 0))
    wall = _numbers(value.get("wall_us"), max(trials, 0))
    if len(wall) != len(ev):
        raise ChildError("the candidate's process sent a malformed harness reply")
    return NativeRun(rc, error[:1024], ev, wall, float(over), _kernel_trace(value.get("trace")))


def _span(nbytes: int) -> int:
    return -(-max(int(nbytes), 1) // _ALIGN) * _ALIGN


def _slots(arrays: list[np.ndarray]) -> tuple[list[tuple[int, int]], int]:
    out, off = [], 0
    for a in arrays:
        out.append((off, int(a.nbytes)))
        off += _span(a.nbytes)
    return out, max(off, _MIN_SEGMENT)


def segment_bytes(task: Task, cfg: InputConfig) -> int:
    """The segment one call on `cfg` needs (`_slots` of its arrays), from the signature."""
    n = 0
    for p in task.signature:
        item = np.dtype(p.dtype).itemsize
        n += _span(
            item if p.role is Role.SCALAR else eval_length(p.length or "0", cfg.sizes) * item
        )
    return max(n, _MIN_SEGMENT)


def _memfd() -> int:
    try:
        return os.memfd_create("cudaperf-call", os.MFD_CLOEXEC)
    except (AttributeError, OSError):  # no memfd here: an unlinked file in the private /tmp
        fd, path = tempfile.mkstemp(prefix="cudaperf-call-")
        os.unlink(path)
        return fd


class CProcess(SpawnedChild):
    """A fresh interpreter running `c_child.child_main`, with one shared segment."""

    def __init__(self) -> None:
        from cudaperf.execute.c.child import child_main

        super().__init__(multiprocessing.get_context("spawn"), child_main)
        self.mm: mmap.mmap | None = None
        self.size = 0

    def start_job(
        self, task: Task, lib: str, workdir: str, cpu_limit_s: int, output_limit_mb: int
    ) -> None:
        """Map a segment for the task's largest config, then load the candidate's library. In
        that order: no file descriptor has to reach the child after candidate code has run
        there (its constructors or calls may leak descriptors up to the open-file limit).
        The segment is sized here, in the trusted process, which has no file-size limit; the
        child's limit (`output_limit_mb`, set before the library loads) bounds only what the
        candidate writes."""
        self._segment(max(segment_bytes(task, cfg) for cfg in task.configs))
        self.output_mb = output_limit_mb
        msg = {
            "lib": lib,
            "workdir": workdir,
            "cpu_limit_s": cpu_limit_s,
            "output_limit_mb": output_limit_mb,
        }
        self.ask("job", msg)

    def _segment(self, size: int) -> None:
        """A segment of at least `size` bytes, mapped here and in the child."""
        if size <= self.size:
            return
        from multiprocessing.reduction import send_handle

        size = max(size, 2 * self.size)
        fd = _memfd()
        try:
            os.ftruncate(fd, size)
            mm = mmap.mmap(fd, size)
            self.send("segment", size)
            try:
                send_handle(self.conn, fd, self.proc.pid)
            except OSError:
                raise ChildError(self._death(), died=True) from None
            self.reply()
        finally:
            os.close(fd)
        if self.mm is not None:
            self.mm.close()
        self.mm, self.size = mm, size

    def run(
        self,
        task: Task,
        arrays: list[np.ndarray],
        warmup: int = 0,
        trials: int = 0,
        budget_s: float = 0.0,
        download_inputs: bool = True,
        trace: str | None = None,
        into: list[np.ndarray] | None = None,
        clock: PhaseClock | None = None,
    ) -> NativeRun:
        """The harness on host `arrays` (one per parameter of `task.signature`). A checked call
        (trials 0) copies out/inout arrays, and in arrays when `download_inputs`, back into
        `into` (same shapes; default: `arrays` themselves). `trace`: the CUPTI shim's path, to
        trace the kernels of a checked call (`NativeRun.trace`). `clock` gets the seconds of
        this side's copies (`copy`) and of the child's call (`call`)."""
        clock = clock or PhaseClock()
        codes = [ROLE_CODES[p.role] for p in task.signature]
        if not download_inputs:
            codes = [IN_NO_DOWNLOAD if c == ROLE_CODES[Role.IN] else c for c in codes]
        slots, size = _slots(arrays)
        self._segment(size)
        seg = np.frombuffer(self.mm, np.uint8)
        with clock("copy"):
            for a, (off, nb), c in zip(arrays, slots, codes, strict=True):
                if c in _WRITE and nb:
                    seg[off : off + nb] = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
        msg = {
            "slots": slots,
            "codes": codes,
            "warmup": warmup,
            "trials": trials,
            "budget_s": budget_s,
            "trace": trace if trials == 0 else None,
        }
        with clock("call"):
            run = _native_run(self.ask("call", msg), trials)
        if trials == 0 and run.rc == 0:
            with clock("copy"):
                for a, (off, nb), c in zip(into or arrays, slots, codes, strict=True):
                    if c in _COPY_BACK and nb:
                        a[...] = seg[off : off + nb].view(a.dtype).reshape(a.shape)
        del seg
        return run

    def close(self) -> None:
        super().close()
        if self.mm is not None:
            try:
                self.mm.close()
            except BufferError:  # a view of it is still alive; it goes with the handle
                pass
            self.mm, self.size = None, 0


_SPARE = Spare(CProcess)


def take_c_child(spare: bool) -> CProcess:
    """A ready C→CUDA candidate process for the next job (`child_proc.Spare.take`)."""
    return _SPARE.take(spare)
