"""The GPU worker process: runs candidates' native harness on one GPU, sandboxed by limits.

Started by `sandbox.WorkerHandle` as `python -m cudaperf.execute.isolation.worker RFD WFD`; it
reads one JSON request per line from RFD and writes one JSON reply per line to WFD, both typed and
validated by `protocol` (a request that does not parse is answered with an infra_error). Its
own stdout and stderr are redirected, per job, to `output.log` in the job's temp dir (its
cwd), so nothing a candidate prints can corrupt the protocol. Limits: open files, processes
(fork bombs), CPU seconds per job, and a private network namespace where the OS allows (as
root); the file-size limit (SIGXFSZ kills a candidate that writes too much) is set in each
candidate's process, not here (`apply_limits` says why). This process is the
trusted side of both tracks: it holds the secret salt, the inputs and the reference outputs,
and never runs candidate code. Each candidate runs in a spawned process of its own, discarded
after every job (C→CUDA: `c_proc`, PyTorch→CUDA: `torch_trusted`), so a broken CUDA context or
a crash ends only that process, and a spare one is started for the next job. A reply asks for
a restart (`restart: true`, the worker exits) only after an error of the worker itself, or a
PyTorch→CUDA candidate process that died holding this process's CUDA buffers.
A candidate that hangs is handled by the parent (timeout: the worker's whole process group).
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import resource
import sys
import time
from collections.abc import Callable

from cudaperf.execute.c import trusted as measure
from cudaperf.execute.isolation import confine
from cudaperf.execute.isolation.child_proc import redirect_output
from cudaperf.execute.isolation.share import DeviceShare
from cudaperf.execute.isolation.supervise import exit_with_parent
from cudaperf.execute.protocol import (
    BaselinesRequest,
    CBaselinesRequest,
    HelloReply,
    HelloRequest,
    JobReply,
    Ready,
    TorchRequest,
    VisibleOutput,
    parse_request,
)
from cudaperf.execute.types import Status

log = logging.getLogger(__name__)

_CLONE_NEWNET = 0x40000000


def _count_user_tasks() -> int:
    uid, total = os.getuid(), 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/status") as f:
                st = dict(line.split(":", 1) for line in f if ":" in line)
            if int(st["Uid"].split()[0]) == uid:
                total += int(st["Threads"])
        except (OSError, KeyError, ValueError):
            continue
    return total


def apply_limits(max_output_mb: int, max_open_files: int, isolate_network: bool) -> dict:
    """Set the worker's resource limits; returns what could be applied. `max_output_mb` is not
    applied here: it bounds what candidate code writes, and is set in each candidate's own
    process (`confine.limit_output`, from the job request). This process is the trusted side
    and writes files the limit must not bound: RLIMIT_FSIZE also applies to `ftruncate`, so a
    worker under it could not size a call segment larger than the limit (`c_proc`), and every
    task whose largest config needs more (88% of the dataset's C→CUDA tasks at 64 MiB) failed
    every candidate with "wrote more than the output limit"."""
    applied: dict = {"fsize_mb": max_output_mb}  # the candidates' limit, set in their processes
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    n = max_open_files if hard == resource.RLIM_INFINITY else min(max_open_files, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))
    applied["nofile"] = n
    try:  # NPROC counts every task of the user; leave room for the evaluator's own (nvcc pool)
        nproc = _count_user_tasks() + 1024
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
        applied["nproc"] = nproc  # not enforced for root (CAP_SYS_RESOURCE)
    except (OSError, ValueError):
        applied["nproc"] = None
    applied["network_isolated"] = False
    if isolate_network:
        libc = ctypes.CDLL(None, use_errno=True)
        applied["network_isolated"] = libc.unshare(_CLONE_NEWNET) == 0
    return applied


def handle(raw: object, libs: measure.Libs, emit: Callable[[dict], None] | None = None) -> dict:
    """Serve one decoded request line; returns the reply's wire form and never raises. A
    malformed request, or an error of the worker itself, becomes an infra_error reply with
    `restart: true`: whatever broke (a CUDA context, a library) is not reused. `emit` sends a
    line ahead of the reply (`protocol.VisibleOutput`)."""

    def on_output(text: str) -> None:
        if emit is not None:
            emit(VisibleOutput(visible_output=text).wire())

    try:
        req = parse_request(raw)
        if isinstance(req, HelloRequest):
            return HelloReply(pid=os.getpid()).wire()
        redirect_output(req.workdir, truncate=True)
        confine.limit_cpu(req.cpu_limit_s)
        if isinstance(req, TorchRequest):  # a PyTorch→CUDA job has the GPU alone (`share`)
            with libs.share.section(exclusive=True):
                return _torch_job(req, on_output).wire()
        if isinstance(req, BaselinesRequest):  # the task's reference only, no candidate
            from cudaperf.execute.pytorch.trusted import time_baselines  # imports torch

            with libs.share.section(exclusive=True):
                return time_baselines(req).wire()
        if isinstance(req, CBaselinesRequest):  # the task's C reference only, no candidate
            return measure.time_cpu_baselines(req, libs).wire()
        return measure.run_job(req, libs, spare=True, on_output=on_output).wire()
    except Exception as e:  # noqa: BLE001 - the reply must always come back
        msg = f"{type(e).__name__}: {e}"
        return JobReply(status=Status.INFRA_ERROR, message=msg, restart=True).wire()
    finally:
        libc = ctypes.CDLL(None)
        libc.fflush(None)


def _torch_job(req: TorchRequest, on_output: Callable[[str], None]) -> JobReply:
    """A PyTorch→CUDA candidate. This process is the trusted side (`torch_trusted`): the
    candidate runs in a spawned process of its own, discarded after the job, so a sticky
    CUDA error, a crash or leftover global state of the candidate never reaches this process
    or the next candidate. A spare candidate process is started for the next job."""
    from cudaperf.execute.pytorch.trusted import run_torch_job

    t = time.perf_counter()
    reply = run_torch_job(req, spare=True, on_output=on_output)
    if not reply.phases:  # this track does not split its job (`types.PHASES`)
        reply = reply.model_copy(update={"phases": {"run": round(time.perf_counter() - t, 4)}})
    import gc

    import torch

    gc.collect()  # this job's inputs and reference outputs (several GB on KernelBench level 1)
    if torch.cuda.is_available():
        torch.cuda.ipc_collect()  # buffers the candidate's process had mapped
        torch.cuda.empty_cache()  # back to the driver, so the next candidate has the card
    return reply


def main(argv: list[str]) -> int:
    rfd, wfd = int(argv[0]), int(argv[1])
    limits = json.loads(argv[2])
    set_bytes = limits.pop("set_cache_bytes", None)  # not a resource limit: the sets' LRU bound
    fds = limits.pop("share_fds", None)  # the GPU's lock files (`share`), when it has k workers
    applied = apply_limits(**limits)
    exit_with_parent(rfd)  # a killed evaluator leaves no worker busy on the GPU
    share = DeviceShare(tuple(fds) if fds else None)
    libs = measure.Libs(max_set_bytes=set_bytes, share=share)
    with os.fdopen(rfd, "r") as rf, os.fdopen(wfd, "w") as wf:
        wf.write(json.dumps(Ready(limits=applied).wire()) + "\n")
        wf.flush()

        def send(obj: dict) -> None:
            wf.write(json.dumps(obj) + "\n")
            wf.flush()

        share.notify = send  # a wait for the GPU is said ahead of the reply (not timed)
        for line in rf:
            reply = handle(json.loads(line), libs, send)
            send(reply)
            if reply.get("restart"):
                return 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
