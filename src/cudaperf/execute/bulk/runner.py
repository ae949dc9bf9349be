"""The GPU runner of `cudaperf data measure`: one process per GPU, many implementations each.

Started by `bulk.drive.GpuDriver` (a `supervise.LineChild`) as
`python -m cudaperf.execute.bulk.runner RFD WFD RUNTIME_LIB` with CUDA_VISIBLE_DEVICES naming
one GPU. It reads one JSON request per line from fd RFD (a task, its implementations' batch
libraries, its prepared configs, the settings) and writes JSON events to fd WFD; its stdout and
stderr are a log file, so nothing an implementation prints reaches the protocol. Events:
`ready` (device name), `begin` (implementation, config) before each implementation runs,
`result` (one ConfigResult), `done` (task finished), `fatal` (an error outside any
implementation's call: the task's remaining work is an infra error).

Per task and config: the prepared inputs are uploaded once ("pristine") and the expected
outputs once. Per implementation: pristine in/inout arrays are copied device-to-device into
working buffers and out arrays are poisoned with 0xFF bytes (NaN), the implementation is
called once and the device synchronised, outputs are compared on the device with the rule of
`cudaperf.execute.c.reference.compare` and `in` arrays checked for modification; then, if it has
been correct so far, it is timed (`cp_time`: warm-up, trials with an L2 flush before each),
checked against the wall clock and the roofline (`cudaperf.execute.sanity`), and checked again
after timing on restored inputs (catches state corrupted by repeated calls). After a wrong
output an implementation is still checked on later configs but not timed, as in the
evaluator. After a CUDA error the runner reports it and exits: the orchestrator starts a new
runner (a context that saw an illegal address is never trusted again).
"""

from __future__ import annotations

import ctypes
import json
import math
import os
import sys
import time

import numpy as np

from cudaperf.execute.bulk.runtime import CudaFault, Runtime
from cudaperf.execute.c.reference import Comparison
from cudaperf.execute.isolation.supervise import exit_with_parent
from cudaperf.execute.sanity import escape_message, roofline_message
from cudaperf.execute.types import ConfigResult, Status, Timing
from cudaperf.tasks.model import Role, Task

__all__ = ["ConfigBuffers", "Runner", "device_compare", "main"]


class ConfigBuffers:
    """Device buffers of one task config: pristine inputs, expected outputs, working set."""

    def __init__(self, rt: Runtime, task: Task, cfg: dict):
        self.rt, self.task, self.cfg = rt, task, cfg
        self.arrays = cfg["arrays"]
        self.pristine: dict[int, int] = {}
        self.want: dict[int, int] = {}
        self.work: dict[int, int] = {}
        self.nbytes: dict[int, int] = {}
        self._scalars: list[np.ndarray] = []  # keep the values alive while args point at them
        try:
            self._upload()
        except BaseException:
            self.free()
            raise
        ptrs = []
        for i, a in enumerate(self.arrays):
            if a["role"] == "scalar":
                v = np.array(a["value"], dtype=a["dtype"])
                self._scalars.append(v)
                ptrs.append(v.ctypes.data)
            else:
                ptrs.append(self.work[i])
        self.args = (ctypes.c_void_p * max(len(ptrs), 1))(*ptrs)
        self.read_bytes = sum(
            self.nbytes[i]
            for i, a in enumerate(self.arrays)
            if a["role"] in ("in", "inout") and not a.get("partial")
        )

    def _upload(self) -> None:
        for i, a in enumerate(self.arrays):
            if a["role"] == "scalar":
                continue
            self.nbytes[i] = a["n"] * np.dtype(a["dtype"]).itemsize
            self.work[i] = self.rt.malloc(self.nbytes[i])
            if "input" in a:
                self.pristine[i] = self._put(a["input"], self.nbytes[i])
            if "want" in a:
                self.want[i] = self._put(a["want"], self.nbytes[i])

    def _put(self, path: str, nbytes: int) -> int:
        host = np.load(path, mmap_mode="r", allow_pickle=False) if nbytes else np.empty(0)
        if host.nbytes != nbytes:
            raise ValueError(f"{path}: {host.nbytes} bytes, expected {nbytes}")
        ptr = self.rt.malloc(nbytes)
        if nbytes:
            self.rt.h2d(ptr, host)
        del host
        return ptr

    def restore(self) -> None:
        """Working buffers := pristine inputs; out arrays poisoned with 0xFF bytes."""
        for i, a in enumerate(self.arrays):
            if a["role"] in ("in", "inout"):
                self.rt.d2d(self.work[i], self.pristine[i], self.nbytes[i])
            elif a["role"] == "out":
                self.rt.memset(self.work[i], 0xFF, self.nbytes[i])

    def free(self) -> None:
        for d in (self.pristine, self.want, self.work):
            for ptr in d.values():
                try:
                    self.rt.free(ptr)
                except CudaFault:
                    pass
            d.clear()


def device_compare(rt: Runtime, task: Task, bufs: ConfigBuffers) -> Comparison:
    """`execute.c.reference.compare` on device buffers (same rule, numbers and messages)."""
    tol = task.tolerance
    worst_abs, worst_rel, first = 0.0, 0.0, ""
    for i, p in enumerate(task.signature):
        n = bufs.arrays[i]["n"]
        if p.role is Role.IN and n > 0:
            d = rt.diff(p.dtype, bufs.pristine[i], bufs.work[i], n)
            if d.bad:
                idx = max(d.first, 0)
                msg = (
                    f"input array {p.name} was modified (first at index {idx}); "
                    "inputs are read-only"
                )
                return Comparison(False, math.inf, math.inf, msg, inputs_modified=True)
        if p.role not in (Role.OUT, Role.INOUT) or n == 0:
            continue
        st = rt.compare(p.dtype, bufs.work[i], bufs.want[i], n, tol.atol, tol.rtol)
        a, r = st.max_abs_err, st.max_rel_err
        worst_abs, worst_rel = max(worst_abs, a), max(worst_rel, r)
        if st.bad and not first:
            g, w = (
                _element(rt, p.dtype, bufs.work[i], st.first),
                _element(rt, p.dtype, bufs.want[i], st.first),
            )
            first = (
                f"{st.bad} of {n} elements of {p.name} are wrong; first at index "
                f"{st.first}: got {g.item()!r}, expected {w.item()!r} (max abs err {a:.3g}, "
                f"allowed {tol.atol:g} + {tol.rtol:g}*|expected|)"
            )
    return Comparison(not first, worst_abs, worst_rel, first)


def _element(rt: Runtime, dtype: str, ptr: int, index: int) -> np.generic:
    one = np.empty(1, dtype=dtype)
    rt.d2h(one, ptr + index * one.itemsize)
    return one[0]


class Runner:
    """Runs tasks on the one visible GPU; `emit` writes an event."""

    def __init__(self, runtime_path: str, emit):
        self.rt = Runtime(runtime_path)
        self.emit = emit
        self.name, l2, self.total_mem = self.rt.init()
        self.flush_bytes = 2 * (l2 if l2 > 0 else 64 << 20)
        self.flush = self.rt.malloc(self.flush_bytes)
        self.libs: dict[str, ctypes.CDLL] = {}
        self.err = ctypes.create_string_buffer(1024)

    def lib(self, path: str) -> ctypes.CDLL:
        if path not in self.libs:
            lib = ctypes.CDLL(path, mode=os.RTLD_LOCAL | os.RTLD_NOW)
            lib.cp_call.restype = ctypes.c_int
            lib.cp_call.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
            lib.cp_time.restype = ctypes.c_int
            self.libs[path] = lib
        return self.libs[path]

    def run_task(self, req: dict) -> bool:
        """Every config of one task; False when the runner must exit (after a CUDA error)."""
        task = Task.model_validate(req["task"])
        s = req["settings"]
        impls = req["impls"]
        state = {im["id"]: Status.OK for im in impls}
        for cfg in req["configs"]:
            try:
                bufs = ConfigBuffers(self.rt, task, cfg)
            except (CudaFault, ValueError, OSError) as e:
                self.emit({"ev": "fatal", "message": f"config {cfg['name']}: {e}"})
                return False
            try:
                for im in impls:
                    if state[im["id"]] is Status.RUNTIME_ERROR:
                        continue
                    self.emit({"ev": "begin", "impl": im["id"], "config": cfg["name"]})
                    t0 = time.monotonic()
                    timed = state[im["id"]] is Status.OK
                    st, cr = self._one(im, task, cfg, bufs, s, timed)
                    self.emit(
                        {
                            "ev": "result",
                            "impl": im["id"],
                            "config": cfg["name"],
                            "status": st.value,
                            "result": cr.model_dump(mode="json"),
                            "seconds": time.monotonic() - t0,
                        }
                    )
                    if st is Status.RUNTIME_ERROR:
                        return False
                    if state[im["id"]] is Status.OK:
                        state[im["id"]] = st
            finally:
                bufs.free()
        self.emit({"ev": "done"})
        return True

    def _one(self, im: dict, task: Task, cfg: dict, bufs: ConfigBuffers, s: dict, timed: bool):
        base = {"config": cfg["name"], "held_out": cfg["held_out"]}
        lib = self.lib(im["lib"])
        k = im["k"]
        try:
            bufs.restore()
            if lib.cp_call(k, bufs.args, self.err, 1024) != 0:
                msg = self._msg()
                return Status.RUNTIME_ERROR, ConfigResult(**base, correct=False, message=msg)
            cmp = device_compare(self.rt, task, bufs)
        except CudaFault as e:
            return Status.RUNTIME_ERROR, ConfigResult(**base, correct=False, message=str(e))
        errs = {"max_abs_err": cmp.max_abs_err, "max_rel_err": cmp.max_rel_err}
        if not cmp.correct:
            st = Status.REJECTED if cmp.inputs_modified else Status.WRONG_OUTPUT
            return st, ConfigResult(**base, correct=False, **errs, message=cmp.message)
        if not timed:
            return Status.OK, ConfigResult(**base, correct=True, **errs)
        cpu = Timing.of(cfg["cpu_us"]) if cfg.get("cpu_us") else None
        res = dict(base, correct=True, **errs, cpu_timing=cpu)
        try:
            bufs.restore()
            ev, wall = self._time(lib, k, bufs, s)
        except CudaFault as e:
            return Status.RUNTIME_ERROR, ConfigResult(**res, message=str(e))
        if ev is None:
            return Status.RUNTIME_ERROR, ConfigResult(**res, message=wall)
        timing = Timing.of(ev)
        res["timing"] = timing
        hack = escape_message(timing, Timing.of(wall)) or roofline_message(
            bufs.read_bytes, timing, s["max_bandwidth_gbs"]
        )
        if hack:
            return Status.REJECTED, ConfigResult(**res, message=hack)
        if s["check_after"]:
            return self._check_after(lib, k, task, bufs, res)
        return Status.OK, ConfigResult(**res)

    def _check_after(self, lib, k: int, task: Task, bufs: ConfigBuffers, res: dict):
        try:
            bufs.restore()
            if lib.cp_call(k, bufs.args, self.err, 1024) != 0:
                return Status.RUNTIME_ERROR, ConfigResult(**res, message=self._msg())
            cmp = device_compare(self.rt, task, bufs)
        except CudaFault as e:
            return Status.RUNTIME_ERROR, ConfigResult(**res, message=str(e))
        if not cmp.correct:
            msg = "after timing, on the same inputs: " + cmp.message
            st = Status.REJECTED if cmp.inputs_modified else Status.WRONG_OUTPUT
            return st, ConfigResult(**dict(res, correct=False), message=msg)
        return Status.OK, ConfigResult(**res)

    def _time(self, lib, k: int, bufs: ConfigBuffers, s: dict):
        n = s["trials"]
        ev = (ctypes.c_float * n)()
        wall = (ctypes.c_double * n)()
        done = ctypes.c_int(0)
        rc = lib.cp_time(
            ctypes.c_int(k),
            bufs.args,
            ctypes.c_int(s["warmup"]),
            ctypes.c_int(n),
            ctypes.c_double(s["budget_s"] * 1e3),  # cp_time takes ms (the C boundary)
            ctypes.c_void_p(self.flush),
            ctypes.c_longlong(self.flush_bytes),
            ev,
            wall,
            ctypes.byref(done),
            self.err,
            ctypes.c_int(1024),
        )
        if rc != 0 or done.value == 0:
            return None, self._msg() or "no timed trial completed"
        m = done.value
        return [x * 1e3 for x in ev[:m]], [x * 1e3 for x in wall[:m]]

    def _msg(self) -> str:
        return self.err.value.decode(errors="replace")


def main(argv: list[str]) -> int:
    rfd, wfd, lib = int(argv[0]), int(argv[1]), argv[2]
    proto = os.fdopen(wfd, "w")
    exit_with_parent(rfd)  # a killed `data measure` leaves no runner on the GPU

    def emit(ev: dict) -> None:
        proto.write(json.dumps(ev) + "\n")
        proto.flush()

    try:
        runner = Runner(lib, emit)
    except Exception as e:  # noqa: BLE001 - the orchestrator must hear why
        emit({"ev": "fatal", "message": f"runner start-up failed: {type(e).__name__}: {e}"})
        return 1
    emit({"ev": "ready", "gpu": runner.name, "total_mem": runner.total_mem, "pid": os.getpid()})
    with os.fdopen(rfd, "r") as requests:
        for line in requests:
            req = json.loads(line)
            if req.get("op") == "exit":
                break
            try:
                keep = runner.run_task(req)
            except Exception as e:  # noqa: BLE001 - reported, then a fresh runner takes over
                emit({"ev": "fatal", "message": f"{type(e).__name__}: {e}"})
                return 1
            if not keep:
                return 0
            libc = ctypes.CDLL(None)
            libc.fflush(None)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
