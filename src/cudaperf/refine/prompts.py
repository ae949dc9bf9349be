"""Prompts per task kind: instructions, the candidate shape with an example, the task source,
and the visible configurations only.

Guaranteed: nothing from a held-out configuration (name or sizes) appears in a prompt, and
nothing from the task's implementations (the prompt must not give the answer away).
Messages are OpenAI-style chat dicts: `{"role": ..., "content": ...}`.
"""

from __future__ import annotations

from cudaperf.execute.native import EXAMPLE
from cudaperf.tasks.model import Role, Task, TaskKind

__all__ = ["SYSTEM", "first_messages", "next_messages", "task_prompt"]

Message = dict[str, str]

SYSTEM = (
    "You are an expert CUDA engineer. You write CUDA that is correct on every input size first "
    "and fast second. Reply with a short plan, then the complete file in one fenced code block."
)

_C_EXAMPLE = """\
```cuda
// Example of the shape for `void add(int n, const float* a, const float* b, float* c)`.
__global__ void add_kernel(int n, const float* a, const float* b, float* c) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

extern "C" void add(int n, const float* a, const float* b, float* c) {
    int block = 256;
    add_kernel<<<(n + block - 1) / block, block>>>(n, a, b, c);
}
```"""

_TORCH_EXAMPLE = (
    "```python\n# Example of the shape for a Model whose forward computes x * sigmoid(x).\n"
    + EXAMPLE
    + "```"
)

_ROLE = {
    Role.IN: "input array",
    Role.OUT: "output array (write every element)",
    Role.INOUT: "array read and written in place",
}


def _c_shape(task: Task) -> str:
    params = []
    for p in task.signature:
        if p.is_array:
            params.append(f"- `{p.name}`: {_ROLE[p.role]} of `{p.length}` `{p.ctype}` (device)")
        else:
            params.append(f"- `{p.name}`: `{p.ctype}` scalar, passed by value")
    return (
        "## What to return\n"
        "One ```cuda block with the whole .cu file. It must define exactly this host function:\n"
        f"```cuda\n{task.c_prototype()};\n```\n"
        "Array arguments are device pointers; the harness allocates, copies, synchronises and "
        "times. Your function launches your kernels and returns. Parameters:\n"
        + "\n".join(params)
        + f"\n\nThe shape, on a different function:\n{_C_EXAMPLE}"
    )


def _torch_shape(task: Task) -> str:
    return (
        "## What to return\n"
        "One ```python block with the whole file. It defines `ModelNew(nn.Module)` with the "
        f"same constructor arguments and `forward` as `{task.entry}`, computing the same result "
        "in your own CUDA kernels. Put the CUDA in a string loaded with "
        "`cudaperf.execute.native.load_cuda` (fast: no torch headers) or "
        "`torch.utils.cpp_extension.load_inline`. `forward` may allocate outputs and reshape, "
        f"but must not compute with torch ops or call the reference `{task.entry}`.\n\n"
        f"The shape, on a different module:\n{_TORCH_EXAMPLE}"
    )


def _configs(task: Task) -> str:
    rows = [
        f"- `{c.name}`: " + ", ".join(f"{k}={v}" for k, v in c.sizes.items())
        for c in task.visible_configs
    ]
    return (
        "## Input configurations\n"
        + "\n".join(rows)
        + "\nYour code is also checked on configurations you are not shown: handle any size, "
        "and do not specialise on these."
    )


def task_prompt(task: Task) -> str:
    """The first user message for `task`."""
    if task.kind is TaskKind.C2CUDA:
        intro = f"Write a fast CUDA implementation of the C function `{task.entry}` below."
        src, shape = f"## Reference (C)\n```c\n{task.source.strip()}\n```", _c_shape(task)
    else:
        intro = f"Write a fast CUDA implementation of the PyTorch module `{task.entry}` below."
        src, shape = (
            f"## Reference (PyTorch)\n```python\n{task.source.strip()}\n```",
            (_torch_shape(task)),
        )
    tol = f"Outputs must match the reference within atol={task.tolerance.atol:g}, " + (
        f"rtol={task.tolerance.rtol:g}."
    )
    desc = f"## Task\n{task.description.strip()}\n{tol}" if task.description else f"## Task\n{tol}"
    return "\n\n".join([intro, desc, src, _configs(task), shape])


def first_messages(task: Task, system: str = SYSTEM) -> list[Message]:
    """System and first user message for turn 1."""
    return [{"role": "system", "content": system}, {"role": "user", "content": task_prompt(task)}]


def next_messages(
    history: list[Message], reply: str, feedback: str, keep: int = 2
) -> list[Message]:
    """The next turn's conversation: system and task, the last `keep - 1` earlier exchanges
    of `history`, then the chosen reply and its feedback (bounds the context length)."""
    if keep < 1:
        raise ValueError(f"keep={keep}; keep at least the latest exchange (1)")
    earlier = history[2:][-2 * (keep - 1) :] if keep > 1 else []
    return [
        *history[:2],
        *earlier,
        {"role": "assistant", "content": reply},
        {"role": "user", "content": feedback},
    ]
