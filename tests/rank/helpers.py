"""Synthetic measured tasks for the ranker tests (no GPU: times are made up)."""

from __future__ import annotations

import copy

from cudaperf.tasks.model import Task
from tests.tasks.helpers import C_TASK

H200 = "NVIDIA H200"

KERNEL = """__global__ void k(int n, float a, const float* x, float* y) {{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {{
{loops}    y[i * {stride}] = a * x[i * {stride}];
  }}
}}
{pad}extern "C" void scale(int n, float a, const float* x, float* y) {{
  k<<<(n + 255) / 256, 256>>>(n, a, x, y);
}}
"""


def kernel(unroll: int = 0, stride: int = 1, pad: int = 0) -> str:
    """A scale kernel with `unroll` unrolled loops, a global stride and `pad` unused constant
    lines (code, so they count in the length statistics; comments no longer do)."""
    loops = "#pragma unroll\n    for (int j = 0; j < 4; ++j) y[i] += x[i];\n" * unroll
    pads = "".join(f"static const int pad_{j} = {j};\n" for j in range(pad))
    return KERNEL.format(loops=loops, stride=stride, pad=pads)


def task(task_id: str, family: str, impls: dict[str, tuple[str, dict]]) -> Task:
    """A C→CUDA task; `impls`: id → (code, {(config, gpu): median_us})."""
    d = copy.deepcopy(C_TASK)
    d.update(id=task_id, family=family)
    d["implementations"] = [
        {
            "id": iid,
            "code": code,
            "measurements": [
                {"gpu": gpu, "config": cfg, "median_us": us} for (cfg, gpu), us in times.items()
            ],
        }
        for iid, (code, times) in impls.items()
    ]
    return Task.model_validate(d)


def unroll_tasks(families: int = 6, per_family: int = 2) -> list[Task]:
    """Tasks where more unroll pragmas are faster (time = 10 / (1 + unroll))."""
    out = []
    for f in range(families):
        for j in range(per_family):
            impls = {
                f"u{u}": (kernel(unroll=u, pad=(f + j + u) % 3), {("small", H200): 10 / (1 + u)})
                for u in range(3)
            }
            out.append(task(f"t/fam{f}/{j}", f"fam{f}", impls))
    return out


# fam0..fam3 train, fam4 validation, fam5 test
SPLITS = {f"fam{f}": ("train" if f < 4 else "validation" if f == 4 else "test") for f in range(6)}
