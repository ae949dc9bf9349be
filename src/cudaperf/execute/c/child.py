"""The untrusted side of a C→CUDA evaluation: the process that loads the candidate's library.

Started by `c_proc.CProcess` with the `spawn` start method (a fresh interpreter: none of the
worker's memory, so no secret salt, cached input sets, reference outputs or request in it).
The candidate's host code, linked with the native harness (`harness`), runs here and only
here. Requests, one at a time (`child_proc.serve`):

- ``("job", {workdir, cpu_limit_s, output_limit_mb, lib})``: redirect stdout/stderr to the
  job's `output.log`, limit CPU seconds and file size (`confine.limit_output`: what the
  candidate writes, never the trusted side's segment), load the library (its harness entry
  `RUN_SYMBOL`).
- ``("segment", size)`` followed by a file descriptor (`multiprocessing.reduction`): map the
  trusted side's shared memory segment, where it writes each call's arrays. It holds one
  call's inputs and output buffers, never an answer.
- ``("call", {slots, codes, warmup, trials, budget_s, trace})``: one harness call on the
  arrays at `slots` ([offset, bytes] in the segment; `codes`: `harness.ROLE_CODES`, or
  `IN_NO_DOWNLOAD`). A checked call (trials 0) leaves the downloaded outputs in the segment;
  the trusted side copies them out and judges them. Replies the harness's numbers; with
  `trace` (the CUPTI shim's path, checked calls only) also the kernel trace (`c.trace`).
- ``("ping",)``: nothing (the child is up).

A candidate can subvert anything in this process (the harness's clock, this loop); what it can
never do is see an answer: correctness is judged wholly by the trusted side, on its private
copies of what came back. A CUDA error poisons only this process, which is discarded after
every job (the worker keeps its cached reference sets).
"""

from __future__ import annotations

import ctypes
import mmap
import os
from typing import Any

from cudaperf.execute.isolation import confine
from cudaperf.execute.isolation.child_proc import redirect_output, serve

__all__ = ["call_harness", "child_main"]

_ERR_LEN = 1024


def call_harness(
    fn,
    host: list[int],
    nbytes: list[int],
    codes: list[int],
    warmup: int = 0,
    trials: int = 0,
    budget_s: float = 0.0,
) -> dict:
    """One call of the harness entry `fn` on host buffers at addresses `host`: its return code,
    message, per-trial event and wall times (microseconds) and timing overhead."""
    n = len(host)
    c_host = (ctypes.c_void_p * n)(*host)
    c_bytes = (ctypes.c_longlong * n)(*nbytes)
    roles = (ctypes.c_int * n)(*codes)
    ev = (ctypes.c_float * max(trials, 1))()
    wall = (ctypes.c_double * (max(trials, 1) + 1))()  # [trials]: the timing overhead
    done, err = ctypes.c_int(0), ctypes.create_string_buffer(_ERR_LEN)
    fn.restype = ctypes.c_int
    rc = fn(
        c_host,
        c_bytes,
        roles,
        n,
        warmup,
        trials,
        ctypes.c_double(budget_s * 1e3),  # the harness's unit: ms (the C boundary)
        ev,
        wall,
        ctypes.byref(done),
        err,
        _ERR_LEN,
    )
    k = max(0, min(done.value, max(trials, 0)))
    return {
        "rc": int(rc),
        "error": err.value.decode(errors="replace"),
        "event_us": [x * 1e3 for x in ev[:k]],
        "wall_us": [x * 1e3 for x in wall[:k]],
        "overhead_us": max(wall[trials] * 1e3, 0.0) if trials > 0 else 0.0,
    }


class _State:
    def __init__(self, conn) -> None:
        self.conn = conn
        self.fn = None
        self.lib: ctypes.CDLL | None = None
        self.mm: mmap.mmap | None = None
        self.base: ctypes.Array | None = None  # exported view of `mm` (its address)

    def job(self, msg: dict) -> None:
        redirect_output(str(msg["workdir"]))
        confine.limit_cpu(int(msg["cpu_limit_s"]))
        confine.limit_output(int(msg["output_limit_mb"]))
        from cudaperf.execute.c.harness import RUN_SYMBOL

        self.lib = ctypes.CDLL(str(msg["lib"]), mode=os.RTLD_LOCAL | os.RTLD_NOW)
        self.fn = getattr(self.lib, RUN_SYMBOL)

    def segment(self, size: int) -> None:
        from multiprocessing.reduction import recv_handle

        fd = recv_handle(self.conn)
        self.base = None
        if self.mm is not None:
            self.mm.close()
        try:
            self.mm = mmap.mmap(fd, int(size))
        finally:
            os.close(fd)
        self.base = (ctypes.c_char * int(size)).from_buffer(self.mm)

    def call(self, msg: dict) -> dict:
        if self.fn is None or self.base is None:
            raise RuntimeError("no job or segment yet")
        addr = ctypes.addressof(self.base)
        slots = [(int(o), int(b)) for o, b in msg["slots"]]

        def call() -> dict:
            return call_harness(
                self.fn,
                [addr + o for o, _ in slots],
                [b for _, b in slots],
                [int(c) for c in msg["codes"]],
                int(msg["warmup"]),
                int(msg["trials"]),
                float(msg["budget_s"]),
            )

        shim = msg.get("trace")
        if not shim or int(msg["trials"]) != 0:
            return call()
        from cudaperf.execute.c.trace import traced_call

        reply, trace = traced_call(str(shim), self.lib, call)
        return dict(reply, trace=trace)


def _serve(st: _State, kind: str, arg: Any) -> Any:
    if kind == "job":
        return st.job(arg)
    if kind == "segment":
        return st.segment(arg)
    if kind == "call":
        return st.call(arg)
    if kind == "ping":
        return None
    raise ValueError(f"unknown request {kind!r}")


def child_main(conn) -> None:
    """Serve requests until the connection closes or ``("exit",)`` arrives."""
    st = _State(conn)
    serve(conn, lambda kind, arg: _serve(st, kind, arg))
