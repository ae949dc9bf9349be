"""CPU stand-ins for PyTorch→CUDA jobs: a ReLU task with non-negative inputs, the request the
evaluator would send (device "cpu"), and `run`, which drives the trusted side and the spawned
candidate process for real (only the device differs from a GPU run)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from cudaperf.execute.protocol import TorchRequest
from cudaperf.execute.pytorch.trusted import run_torch_job
from cudaperf.tasks.model import Task

SALT = 918273645077

RELU_REF = """import torch
N = 1000
class Model(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x)
def get_inputs():
    return [torch.rand(N)]
def get_init_inputs():
    return []
"""

HONEST = """import torch
class ModelNew(torch.nn.Module):
    def forward(self, x):
        return torch.clamp(x, min=0.0)
"""


def relu_task(
    source: str = RELU_REF, held_out: int = 5003, tol: float = 1e-5, base: int = 1000
) -> Task:
    return Task(
        id="test/torch/relu",
        kind="torch2cuda",
        family="relu",
        entry="Model",
        source=source,
        configs=[
            {"name": "base", "sizes": {"N": base}},
            {"name": "heldout", "sizes": {"N": held_out}, "held_out": True},
        ],
        tolerance={"atol": tol, "rtol": tol},
    )


def request(code: str, workdir: str | None = None, **kw) -> dict:
    base = dict(
        code=code,
        salt=SALT,
        workdir=workdir or tempfile.mkdtemp(prefix="cudaperf-test-"),
        cpu_limit_s=60,
        output_limit_mb=64,
        warmup=1,
        trials=6,
        budget_s=0.2,
        normwise_rtol=1e-2,
        max_bandwidth_gbs=1e4,
        min_kernel_share=0.5,
        correctness_trials=3,
        torch_compile=False,
        baseline_cache=None,
        device="cpu",
    )
    return base | kw


def run(code: str, task: Task | None = None, **kw) -> tuple[dict, str]:
    """(worker reply as it goes on the pipe, what the candidate printed)."""
    req = request(code, **kw)
    reply = run_torch_job(TorchRequest(task=task or relu_task(), **req)).wire()
    log = Path(req["workdir"]) / "output.log"
    return reply, (log.read_text() if log.exists() else "")


class FakeGpuChild:
    """The candidate's process as it answers on a GPU, stood in for in this process: on the
    CPU an event time is the wall time by construction (`torch_runtime.time_once`) and there
    is no profiler, so what a GPU reports about a candidate is given here. `forward` runs for
    real on the trusted side's shared buffers (its outputs are judged as ever); `times` is
    each timed call's (event µs, wall µs), `overhead` the empty call's, `profile` the
    profiler's answer. A burst takes no time (the trusted clock sees a fast card)."""

    def __init__(self, forward, times=(50.0, 52.0), overhead=5.0, profile=None):
        self.forward, self.times, self.overhead = forward, list(times), overhead
        self.profile = profile or {"share": None, "note": "no profiler", "launched": None}
        self.inputs: list = []
        self.outs: list = []
        self.last: list = []
        self.asked: list[str] = []

    def alive(self) -> bool:
        return True

    def close(self) -> None:
        pass

    def flush(self) -> None:
        self.asked.append("flush")

    def _copy_out(self) -> None:
        for buf, g in zip(self.outs, self.last, strict=True):
            buf.copy_(g)

    def ask(self, kind: str, arg=None):
        self.asked.append(kind)
        if kind == "probe":
            return float(arg[0].double().sum().item())
        if kind == "config":
            self.inputs, self.outs = list(arg["inputs"]), list(arg["outs"])
        elif kind == "call":
            import torch

            self.last = [torch.as_tensor(self.forward(*self.inputs))]
            self._copy_out()
            return [[list(g.shape), str(g.dtype)] for g in self.last]
        elif kind == "recopy":
            self._copy_out()
        elif kind == "trial":
            return list(self.times)
        elif kind == "calibrate":
            return self.overhead
        elif kind == "timers":
            return ""
        elif kind == "profile":
            return dict(self.profile)
        return None  # job, warmup, burst, ping, release


def run_fake(child: FakeGpuChild, task: Task | None = None, **kw) -> dict:
    """The trusted side's reply for a candidate whose process is `child` (`run`'s request)."""
    from unittest import mock

    from cudaperf.execute.pytorch import trusted as torch_trusted

    req = request("# the candidate runs in FakeGpuChild", **kw)
    with mock.patch.object(torch_trusted, "take_child", lambda spare: child):
        return run_torch_job(TorchRequest(task=task or relu_task(), **req)).wire()
