"""Shared pieces of the PyTorch→CUDA families (registers no family).

- `native_module`: the candidate file of cudaperf's native form (`ModelNew` building its
  parameters exactly as `Model` does, then `load_cuda(CUDA_SRC)`; forward allocates outputs
  and calls the extern "C" launchers on tensor pointers).
- `REDUCE`: warp and block reductions (sum, max) every thread of which gets the result.
- `ELTWISE`: element-wise operators as (torch statement on y, CUDA expression of v).
- `reference_template`: the template of a reference file (imports, sizes, `class Model`).
- `torch_configs`: the small / medium / large / heldout configs of a torch task;
  `row_configs` those of a (batch_size, dim) row task, `ROW_SHAPES` its large shapes.
"""

from __future__ import annotations

import random
import re
import textwrap

from cudaperf.datagen.base import cfg, fill
from cudaperf.tasks.model import Distribution, InputConfig

__all__ = [
    "ELTWISE",
    "REDUCE",
    "ROW_SHAPES",
    "Chain",
    "draw_chain",
    "native_module",
    "reference_template",
    "row_configs",
    "torch_configs",
]

_REF_HEAD = '''
"""$doc"""

import torch
import torch.nn as nn

'''

_PY = '''
"""$doc"""

import torch
import torch.nn as nn

from cudaperf.execute.native import load_cuda

CUDA_SRC = r"""$cuda"""


class ModelNew(nn.Module):
    def __init__(self$init_args):
        super().__init__()
$init_body        self.lib = load_cuda(CUDA_SRC)

    def forward(self$fwd_args):
$fwd_body'''


def reference_template(sizes: dict[str, str], body: str) -> str:
    """The template of a reference file (KernelBench's form): the docstring `$doc`, the torch
    imports, one module-level `name = $placeholder` line per item of `sizes`, then
    `class Model(nn.Module)` with the docstring again, followed by `body` (from the blank line
    before `__init__` on: the methods, `get_inputs`, `get_init_inputs`)."""
    lines = "".join(f"{name} = ${ph}\n" for name, ph in sizes.items())
    return _REF_HEAD + lines + '\n\nclass Model(nn.Module):\n    """$doc"""\n' + body


def _indent(body: str, spaces: int) -> str:
    lines = textwrap.dedent(body.strip("\n")).splitlines()
    return "".join((" " * spaces + ln if ln.strip() else "") + "\n" for ln in lines)


def native_module(
    doc: str, cuda: str, init_args: str, init_body: str, fwd_args: str, fwd_body: str
) -> str:
    """A native-form candidate. `init_args`/`fwd_args` start with ", " (or are empty);
    `init_body` must create the parameters in the reference's order with the same calls."""
    return fill(
        _PY,
        doc=doc,
        cuda=cuda,
        init_args=init_args,
        init_body=_indent(init_body, 8) if init_body.strip() else "",
        fwd_args=fwd_args,
        fwd_body=_indent(fwd_body, 8),
    )


REDUCE = r"""
#define FULL_MASK 0xffffffffu
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, o));
    return v;
}
// Block-wide sum and max (blockDim.x a multiple of 32): warp shuffles, then one value per
// warp through shared memory; every thread returns the block's result.
__device__ float block_sum(float v) {
    __shared__ float part[32];
    __shared__ float total;
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    if (lane == 0) part[w] = v;
    __syncthreads();
    if (w == 0) {
        v = warp_sum(lane < nw ? part[lane] : 0.0f);
        if (lane == 0) total = v;
    }
    __syncthreads();
    return total;
}
__device__ float block_max(float v) {
    __shared__ float part[32];
    __shared__ float total;
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_max(v);
    if (lane == 0) part[w] = v;
    __syncthreads();
    if (w == 0) {
        v = warp_max(lane < nw ? part[lane] : -INFINITY);
        if (lane == 0) total = v;
    }
    __syncthreads();
    return total;
}
"""

# name -> (torch statement assigning y, CUDA expression of v); $a / $b are drawn constants.
ELTWISE: dict[str, tuple[str, str]] = {
    "scale": ("y = y * $a", "v * ${a}f"),
    "shift": ("y = y + $a", "v + ${a}f"),
    "relu": ("y = torch.relu(y)", "fmaxf(v, 0.0f)"),
    "sigmoid": ("y = torch.sigmoid(y)", "1.0f / (1.0f + expf(-v))"),
    "tanh": ("y = torch.tanh(y)", "tanhf(v)"),
    "silu": ("y = torch.nn.functional.silu(y)", "v / (1.0f + expf(-v))"),
    "swish_beta": ("y = y * torch.sigmoid(y * $a)", "v / (1.0f + expf(-v * ${a}f))"),
    "gelu_tanh": (
        'y = torch.nn.functional.gelu(y, approximate="tanh")',
        "0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)))",
    ),
    "gelu_erf": ("y = torch.nn.functional.gelu(y)", "0.5f * v * (1.0f + erff(v * 0.70710678f))"),
    "leaky_relu": ("y = torch.nn.functional.leaky_relu(y, $a)", "(v > 0.0f ? v : ${a}f * v)"),
    "clamp": ("y = torch.clamp(y, $a, $b)", "fminf(fmaxf(v, ${a}f), ${b}f)"),
    "softsign": ("y = y / (1 + y.abs())", "v / (1.0f + fabsf(v))"),
    "square": ("y = y * y", "v * v"),
    "gauss": ("y = torch.exp(-y * y)", "expf(-v * v)"),
    "mish": (
        "y = y * torch.tanh(torch.nn.functional.softplus(y))",
        "v * tanhf(v > 20.0f ? v : log1pf(expf(v)))",
    ),
    "abs": ("y = y.abs()", "fabsf(v)"),
}

# constants drawn for the operators that take them: name -> list of (a, b)
ELTWISE_CONSTS: dict[str, list[tuple[float, float]]] = {
    "scale": [(0.5, 0), (2.0, 0), (1.5, 0), (0.125, 0), (-1.25, 0), (3.0, 0)],
    "shift": [(0.5, 0), (-0.25, 0), (1.0, 0), (-1.5, 0), (0.1, 0)],
    "swish_beta": [(1.702, 0), (0.5, 0), (2.0, 0)],
    "leaky_relu": [(0.01, 0), (0.1, 0), (0.2, 0)],
    "clamp": [(-0.5, 0.5), (-1.0, 1.0), (0.0, 0.25), (-0.1, 2.0), (-3.0, 3.0)],
}


def eltwise(name: str, a: float = 0.0, b: float = 0.0) -> tuple[str, str]:
    """(torch statement, CUDA expression) of operator `name` with constants a, b."""
    t, c = ELTWISE[name]
    return fill(t, a=a, b=b), fill(c, a=a, b=b)


def torch_configs(
    small: dict[str, int], medium: dict[str, int], large: dict[str, int], heldout: dict[str, int]
) -> list[InputConfig]:
    """The four configs of a torch task (heldout held out), seeds 1–4 as the other families."""
    return [
        cfg("small", small, 1),
        cfg("medium", medium, 2),
        cfg("large", large, 3),
        cfg("heldout", heldout, 4, held_out=True, dist=Distribution(kind="normal")),
    ]


# The large (batch_size, dim) of a row task: 2**25 floats (128 MiB) each.
ROW_SHAPES = [(8192, 4096), (16384, 2048), (4096, 8192), (32768, 1024)]


def row_configs(
    rng: random.Random,
    large: tuple[int, int],
    medium_rows: int = 1024,
    medium_dims: tuple[int, ...] = (1024, 2048),
) -> list[InputConfig]:
    """`torch_configs` of a (batch_size, dim) row task: small 3–8 rows of an odd 257–1199
    columns, medium `medium_rows` rows of one of `medium_dims`, `large` (often one of
    `ROW_SHAPES`), heldout 500–1499 rows of 1001–5999 columns; drawn from `rng` in that order."""
    r = rng.randrange
    return torch_configs(
        {"batch_size": r(3, 9), "dim": r(257, 1200, 2)},
        {"batch_size": medium_rows, "dim": rng.choice(medium_dims)},
        {"batch_size": large[0], "dim": large[1]},
        {"batch_size": r(500, 1500), "dim": r(1001, 6000)},
    )


class Chain:
    """A drawn sequence of `ELTWISE` operators (possibly empty): the same computation as
    torch statements on a variable and as one CUDA `__device__` function of a float."""

    def __init__(self, ops: list[tuple[str, float, float]]) -> None:
        self.ops = ops  # (operator name, a, b) in application order

    def __bool__(self) -> bool:
        return bool(self.ops)

    def torch(self, var: str, indent: int = 8) -> str:
        """The statements applying the chain to `var` in place (one line each)."""
        lines = [re.sub(r"\by\b", var, eltwise(n, a, b)[0]) for n, a, b in self.ops]
        return "".join(" " * indent + ln + "\n" for ln in lines)

    def device(self, fn: str) -> str:
        """`__device__ float fn(float v)` applying the chain (the identity when empty)."""
        body = "".join(f"    v = {eltwise(n, a, b)[1]};\n" for n, a, b in self.ops)
        return f"__device__ __forceinline__ float {fn}(float v) {{\n{body}    return v;\n}}\n"

    def describe(self) -> str:
        """ "relu, then scale(2.0)" style text (empty when the chain is empty)."""
        parts = [
            n + (f"({a}, {b})" if n == "clamp" else f"({a})" if n in ELTWISE_CONSTS else "")
            for n, a, b in self.ops
        ]
        return ", then ".join(parts)


def draw_chain(rng: random.Random, lo: int, hi: int, exclude: tuple[str, ...] = ()) -> Chain:
    """Between `lo` and `hi` distinct element-wise operators (none of `exclude`), with their
    constants drawn from `ELTWISE_CONSTS`."""
    names = [n for n in ELTWISE if n not in exclude]
    ops = []
    for n in rng.sample(names, rng.randint(lo, hi)):
        a, b = rng.choice(ELTWISE_CONSTS.get(n, [(0.0, 0.0)]))
        ops.append((n, a, b))
    return Chain(ops)
