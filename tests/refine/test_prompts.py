"""Prompts: per kind, with the candidate shape, visible configs only, no implementations."""

from __future__ import annotations

import ast

import pytest

from cudaperf.execute.native import EXAMPLE
from cudaperf.refine import first_messages, next_messages, task_prompt
from cudaperf.tasks.io import load_sample

TASKS = load_sample()


@pytest.mark.parametrize("task", TASKS, ids=[t.id for t in TASKS])
def test_held_out_configs_and_implementations_never_appear(task):
    text = task_prompt(task)
    for c in task.configs:
        sizes = ", ".join(f"{k}={v}" for k, v in c.sizes.items())
        if c.held_out:
            assert f"`{c.name}`" not in text and sizes not in text
        else:
            assert f"`{c.name}`: {sizes}" in text
    for impl in task.implementations:
        body = max(impl.code.splitlines(), key=len).strip()
        assert body not in text, f"implementation {impl.id} leaked into the prompt"


def test_shape_per_kind():
    c = next(t for t in TASKS if t.id.endswith("saxpy"))
    text = task_prompt(c)
    assert c.c_prototype() in text and "```cuda" in text and "device pointers" in text
    torch = next(t for t in TASKS if t.kind.value == "torch2cuda")
    text = task_prompt(torch)
    assert "ModelNew" in text and "load_cuda" in text and "```python" in text


def test_torch_shape_shows_the_native_forms_example():
    """One example of the native form, `execute.native.EXAMPLE`: the prompt shows it whole."""
    torch = next(t for t in TASKS if t.kind.value == "torch2cuda")
    head = "```python\n# Example of the shape for a Model whose forward computes x * sigmoid(x).\n"
    assert head + EXAMPLE + "```" in task_prompt(torch)
    names = {n.name for n in ast.parse(EXAMPLE).body if isinstance(n, ast.ClassDef)}
    assert names == {"ModelNew"} and 'extern "C" void swish(' in EXAMPLE
    assert "# tensors become device pointers, ints become long long\n" in EXAMPLE


def test_next_messages_keeps_task_and_recent_exchanges():
    msgs = first_messages(TASKS[0])
    for k in range(4):
        msgs = next_messages(msgs, f"reply {k}", f"feedback {k}", keep=2)
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert msgs[-1]["content"] == "feedback 3" and msgs[2]["content"] == "reply 2"
    with pytest.raises(ValueError):
        next_messages(msgs, "r", "f", keep=0)
