"""CPU stand-ins for PyTorch→CUDA jobs: a ReLU task with non-negative inputs, the request the
evaluator would send (device "cpu"), and `run`, which drives the trusted side and the spawned
candidate process for real (only the device differs from a GPU run)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from cudaperf.execute.protocol import TorchRequest
from cudaperf.execute.torch_trusted import run_torch_job
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


def relu_task(source: str = RELU_REF, held_out: int = 5003, tol: float = 1e-5) -> Task:
    return Task(
        id="test/torch/relu", kind="torch2cuda", family="relu", entry="Model", source=source,
        configs=[{"name": "base", "sizes": {"N": 1000}},
                 {"name": "heldout", "sizes": {"N": held_out}, "held_out": True}],
        tolerance={"atol": tol, "rtol": tol},
    )  # fmt: skip


def request(code: str, workdir: str | None = None, **kw) -> dict:
    base = dict(
        code=code, salt=SALT, workdir=workdir or tempfile.mkdtemp(prefix="cudaperf-test-"),
        cpu_limit_s=60, warmup=1, trials=6, budget_ms=200.0, normwise_rtol=1e-2,
        max_bandwidth_gbs=1e4, min_kernel_share=0.5, correctness_trials=3, torch_compile=False,
        baseline_cache=None, device="cpu",
    )  # fmt: skip
    return base | kw


def run(code: str, task: Task | None = None, **kw) -> tuple[dict, str]:
    """(worker reply as it goes on the pipe, what the candidate printed)."""
    req = request(code, **kw)
    reply = run_torch_job(TorchRequest(task=task or relu_task(), **req)).wire()
    log = Path(req["workdir"]) / "output.log"
    return reply, (log.read_text() if log.exists() else "")
