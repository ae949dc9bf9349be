"""PyTorch→CUDA task modules: their size constants, and running them with other sizes.

A KernelBench-style module sets its sizes as module-level constants (`batch_size = 16`,
`N = 2048 * 2`) and often derives others from them (`bias_shape = (out_features,)`). A config
overrides the size constants *at their assignment*, so everything derived from them is
recomputed — overriding the namespace after execution would leave derived values stale.
"""

from __future__ import annotations

import ast
import operator
import types
from typing import Any

__all__ = ["compile_with_sizes", "exec_with_sizes", "module_constants"]

_OPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
    ast.Mod: operator.mod,
}


def _value(node: ast.AST, env: dict[str, int | float]) -> int | float | None:
    """The number an expression of literals, earlier constants and + - * / // ** % gives."""
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.Name):
        return env.get(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        v = _value(node.operand, env)
        return None if v is None else (-v if isinstance(node.op, ast.USub) else v)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        a, b = _value(node.left, env), _value(node.right, env)
        if a is None or b is None:
            return None
        try:
            return _OPS[type(node.op)](a, b)
        except (ZeroDivisionError, OverflowError):
            return None
    return None


def module_constants(src: str) -> dict[str, int | float]:
    """Module-level numeric constants, in order: `NAME = <arithmetic of literals/constants>`."""
    env: dict[str, int | float] = {}
    for node in ast.parse(src).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            t = node.targets[0]
            if isinstance(t, ast.Name):
                v = _value(node.value, env)
                if v is not None and not isinstance(v, bool):
                    env[t.id] = v
                else:
                    env.pop(t.id, None)
    return env


def compile_with_sizes(src: str, sizes: dict[str, Any], filename: str = "<task>"):
    """Code object of `src` with each `NAME = ...` for NAME in `sizes` set to that value.

    Line numbers are those of `src`. Raises ValueError naming a size the module never assigns.
    """
    tree = ast.parse(src, filename)
    seen = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            t = node.targets[0]
            if isinstance(t, ast.Name) and t.id in sizes:
                node.value = ast.copy_location(ast.Constant(sizes[t.id]), node.value)
                seen.add(t.id)
    missing = set(sizes) - seen
    if missing:
        raise ValueError(
            f"config sets {sorted(missing)}, which the module never assigns at top level; "
            "sizes must name module-level constants"
        )
    return compile(tree, filename, "exec")


def exec_with_sizes(src: str, sizes: dict[str, Any], name: str) -> types.ModuleType:
    """Execute `src` as a fresh module named `name` with `sizes` applied (see above)."""
    mod = types.ModuleType(name)
    mod.__file__ = f"<{name}>"
    exec(compile_with_sizes(src, sizes, mod.__file__), mod.__dict__)  # noqa: S102 - task code
    return mod
