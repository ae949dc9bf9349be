"""PyTorch→CUDA candidates for the GPU fault tests and bench/eval_torch_faults.py: honest
native-form variants of the adversarial corpus's affine-ReLU task, and one candidate per
fault with the statuses it may end with."""

from __future__ import annotations

import json
from pathlib import Path

from cudaperf.tasks.model import Task

CORPUS = Path(__file__).parents[1] / "adversarial" / "torch"

_SHELL = '''import torch
import torch.nn as nn

from cudaperf.execute.native import load_cuda

CUDA_SRC = r"""
{includes}
__global__ void affine_relu_kernel(const float* x, float* y, long long n) {{
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    {body}
}}
extern "C" void affine_relu(const float* x, float* y, long long n) {{
    {host}
    affine_relu_kernel<<<(unsigned)((n + {block} - 1) / {block}), {block}>>>(x, y, n);
}}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.lib = load_cuda(CUDA_SRC)

    def forward(self, x):
        x = x.contiguous()
        {forward}
        y = torch.empty_like(x)
        self.lib.affine_relu(x, y, x.numel())
        return y
'''

_RIGHT = "if (i < n) y[i] = 2.0f * fmaxf(x[i], 0.0f) + 1.0f;"


def native(
    body: str = _RIGHT, host: str = "", forward: str = "pass", includes: str = "", block: int = 256
) -> str:
    """An affine-ReLU candidate in the native form with the given pieces."""
    return _SHELL.format(body=body, host=host, forward=forward, includes=includes, block=block)


def honest(i: int) -> str:
    """The i-th honest variant (block size and a tag vary, so every hash differs)."""
    return native(block=(128, 256, 512, 1024)[i % 4], host=f"/* variant {i} */")


_HANG_BODY = "long long t0 = clock64(); while (clock64() - t0 >= 0) { } if (i < n) y[i] = x[i];"

FAULTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "illegal_write": (native(body="y[i + (1LL << 40)] = x[0];"), ("runtime_error",)),
    "illegal_null_read": (
        native(body="if (i < n) y[i] = ((const float*)0)[i];"),
        ("runtime_error",),
    ),
    "misaligned_write": (
        native(body="if (i < n) *(float*)((char*)y + 1 + 4 * i) = x[i];"),
        ("runtime_error",),
    ),
    "device_assert": (
        native(includes="#include <cassert>", body="if (i < n) { assert(x[i] < -1e30f); }"),
        ("runtime_error",),
    ),
    "kernel_hang": (native(body=_HANG_BODY), ("timeout",)),
    "host_segfault": (native(host="*(volatile int*)0 = 1;"), ("runtime_error",)),
    "huge_allocation": (
        native(forward="big = torch.empty(1 << 44, device=x.device)"),
        ("runtime_error",),
    ),
    "stdout_flood": (
        native(forward="for k in range(10**8): print('flood flood flood flood', k)"),
        ("runtime_error",),
    ),
    "fork": (native(forward="import os; os.fork()"), ("rejected", "runtime_error")),
    "file_write": (
        native(forward="open('/tmp/cudaperf_fault_probe.txt', 'w').write('x')"),
        ("rejected", "runtime_error"),
    ),
}


def affine_relu_task() -> Task:
    """The adversarial corpus's affine-ReLU task (three configs, one held out)."""
    spec = json.loads((CORPUS / "expected.json").read_text())["tasks"]["affine_relu"]
    return Task(
        id="adversarial/affine_relu",
        kind="torch2cuda",
        family="affine_relu",
        entry="Model",
        source=(CORPUS / spec["module"]).read_text(),
        configs=spec["configs"],
        tolerance=spec["tolerance"],
    )
