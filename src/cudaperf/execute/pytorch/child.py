"""The untrusted side of a PyTorch→CUDA evaluation: the process that imports the candidate.

Started by `torch_trusted` with the `spawn` start method (a fresh interpreter: none of the
worker's memory, so no secret salt, task module, reference outputs or request in it). It
serves one job over a `multiprocessing` connection, one message at a time:

- ``("probe", [tensor])``: the sum of a shared tensor (sent before the candidate is loaded).
- ``("job", protocol.ChildJob as a dict)``: redirect stdout/stderr to the job's `output.log`,
  limit CPU seconds and file size, load the candidate module.
- ``("config", {init, seed, inputs, outs})``: build `ModelNew(*init)` under `seed` and keep
  the trusted side's input and output buffers (CUDA IPC handles on a GPU, shared memory on the
  CPU). The trusted side writes fresh values into the same input buffers before each request.
- ``("call",)``: one forward on the kept inputs; its outputs are copied into the trusted
  side's output buffers. Replies the output metadata so the trusted side can name a shape or
  dtype mismatch; the *values* are only ever judged by the trusted side.
- ``("recopy",)``: copy the last call's outputs into the output buffers again (the trusted
  side overwrote the inputs in between: an output sharing memory with an input changes).
- ``("warmup", n)``, ``("trial",)``: untimed calls; one timed call (L2 flushed, device-wide
  sync, events and wall clock next to the launch).
- ``("calibrate",)``: the median (wall - event) of timing an empty call (timing overhead).
- ``("burst", k)``: k calls, one sync (the trusted side times it with its own clock).
- ``("profile",)``: one forward under the profiler: kernel names and the candidate's share.
- ``("timers",)``: whether the timing functions are still the original ones.
- ``("release",)``: drop this config's model and buffers (before the trusted side frees them).

Every reply is JSON ``["ok", value]`` or ``["error", message]`` (never a pickle). A candidate
can subvert anything in this process (its own timers, this loop); what it can never do is see
an answer, and every number it reports is cross-checked by the trusted side (correctness
wholly so; time by the trusted side's clock around a burst of calls, which bounds how much
faster than it really is a candidate can claim to be; the profiler's kernel share and the
launched kernel names are the one claim taken from here, backed by the static checks).
"""

from __future__ import annotations

import os
from typing import Any

from cudaperf.execute.isolation import confine
from cudaperf.execute.isolation.child_proc import redirect_output, serve

__all__ = ["child_main"]


class _State:
    def __init__(self) -> None:
        self.device = "cuda"
        self.mod = None
        self.model = None
        self.inputs: list = []
        self.outs: list = []
        self.last: list = []
        self.names: set[str] = set()
        self.flush = None


def _job(st: _State, raw: dict) -> None:
    from cudaperf.execute.protocol import ChildJob
    from cudaperf.execute.pytorch import runtime as rt

    msg = ChildJob.model_validate(raw)
    redirect_output(msg.workdir)
    confine.limit_cpu(msg.cpu_limit_s)
    confine.limit_output(msg.output_limit_mb)  # what the candidate writes (files, stdout)
    if msg.ext_dir:  # where the build pool left a load_inline candidate's extension
        os.environ["TORCH_EXTENSIONS_DIR"] = msg.ext_dir
    st.device = msg.device
    st.names = set(msg.kernel_names)
    rt.pin_precision()
    st.mod = rt.load_module(msg.code, rt.candidate_module_name(msg.code))


def _config(st: _State, msg: dict) -> None:
    import torch

    st.model = st.last = None
    st.inputs, st.outs = list(msg["inputs"]), list(msg["outs"])
    with torch.device(st.device):
        torch.manual_seed(msg["seed"])
        st.model = st.mod.ModelNew(*msg["init"]).to(st.device).eval()


def _call(st: _State) -> list | str:
    """Run the forward; copy the outputs into the trusted buffers when they fit."""
    import torch

    from cudaperf.execute.pytorch import runtime as rt

    with torch.no_grad():
        out = st.model(*st.inputs)
    rt.sync(st.device)
    try:
        got = rt.as_list(out)
    except TypeError as e:  # the trusted side reports it as a wrong output
        return str(e)
    st.last = got
    meta = [[list(g.shape), str(g.dtype)] for g in got]
    if meta == [[list(b.shape), str(b.dtype)] for b in st.outs]:
        _copy_out(st)
    return meta


def _copy_out(st: _State) -> None:
    from cudaperf.execute.pytorch import runtime as rt

    for buf, g in zip(st.outs, st.last, strict=True):
        buf.copy_(g.detach())
    rt.sync(st.device)


def _profile(st: _State) -> dict:
    from cudaperf.execute.pytorch import runtime as rt

    share, note, launched = rt.profile_share(st.model, st.inputs, st.names, st.device)
    return {"share": share, "note": note, "launched": launched}


def _serve(st: _State, kind: str, arg: Any) -> Any:
    from cudaperf.execute.pytorch import runtime as rt

    if kind == "job":
        return _job(st, arg)
    if kind == "config":
        return _config(st, arg)
    if kind == "call":
        return _call(st)
    if kind == "recopy":
        return _copy_out(st)
    if kind == "warmup":
        return rt.warm(st.model, st.inputs, int(arg), st.device)
    if kind == "trial":
        if st.flush is None:
            st.flush = rt.flush_buffer(st.device)
        return rt.time_once(st.model, st.inputs, st.flush, st.device)
    if kind == "calibrate":
        if st.flush is None:
            st.flush = rt.flush_buffer(st.device)
        return rt.overhead_us(st.flush, st.device)
    if kind == "burst":
        return rt.burst(st.model, st.inputs, int(arg), st.device)
    if kind == "profile":
        return _profile(st)
    if kind == "timers":
        return rt.timers_intact()
    if kind == "ping":
        return None
    if kind == "probe":  # before any candidate code: does sharing buffers work at all?
        return float(arg[0].double().sum().item())
    if kind == "release":  # the trusted side frees this config's buffers next
        st.model, st.inputs, st.outs, st.last = None, [], [], []
        import gc

        gc.collect()
        return None
    raise ValueError(f"unknown request {kind!r}")


def child_main(conn) -> None:
    """Serve requests until the connection closes or ``("exit",)`` arrives."""
    st = _State()
    serve(conn, lambda kind, arg: _serve(st, kind, arg))
