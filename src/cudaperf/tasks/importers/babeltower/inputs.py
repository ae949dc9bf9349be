"""BabelTower test inputs: the C snippets of `consistent_cpp_inputs`, read as values.

A snippet declares arrays and scalars (`float x2[] = {1.0, 2.0};`, `int out2[4];`,
`int n2 = 3;`) and calls `wrapper(fn, arg, ...)`. `parse_test` returns, per parameter
position, the scalar value or the array (its declared length and the initial values when
given). Guaranteed: every value is a plain number; anything else (strings, structs, values
computed by code) makes the snippet unreadable, reported as a ValueError naming the token.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from dataclasses import dataclass

from cudaperf.tasks.importers.ctok import find_close, split_top, tokenize

__all__ = ["ArrayArg", "parse_test"]

_CONSTS = {
    "INT_MAX": 2**31 - 1,
    "INT_MIN": -(2**31),
    "UINT_MAX": 2**32 - 1,
    "FLT_MAX": 3.4028234663852886e38,
    "FLT_MIN": 1.1754943508222875e-38,
    "DBL_MAX": 1.7976931348623157e308,
    "M_PI": math.pi,
    "DBL_MIN": 2.2250738585072014e-308,
    "DBL_EPSILON": 2.220446049250313e-16,
    "FLT_EPSILON": 1.1920928955078125e-07,
    "LONG_MAX": 2**63 - 1,
    "LONG_MIN": -(2**63),
    "INFINITY": math.inf,
    "true": 1,
    "false": 0,
    "NULL": 0,
}
_SIZEOF = {"char": 1, "short": 2, "int": 4, "float": 4, "double": 8, "long": 8, "size_t": 8}
_OPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}
_CAST_WORDS = {"int", "float", "double", "long", "unsigned", "char", "short", "size_t", "const"}


@dataclass(frozen=True)
class ArrayArg:
    """An array passed to the function in one test."""

    length: int  # declared element count (all dimensions multiplied)
    values: tuple[float, ...] | None  # initial values (padded with zeros), None if not given


def _num(tok: str) -> str:
    t = tok.rstrip("uUlLfF") if not tok.lower().startswith("0x") else tok.rstrip("uUlL")
    return t + "0" if t.endswith(".") else t


def eval_c(toks: list[str], env: dict[str, float] | None = None) -> float:
    """Value of a constant C expression (numbers, + - * / %, casts, sizeof, known names)."""
    env = {**_CONSTS, **(env or {})}
    py: list[str] = []
    i = 0
    while i < len(toks):
        t = toks[i]
        if t == "sizeof" and i + 1 < len(toks) and toks[i + 1] == "(":
            close = find_close(toks, i + 1)
            name = " ".join(toks[i + 2 : close]).replace("unsigned ", "")
            py.append(str(_SIZEOF.get(name, 8)))
            i = close + 1
            continue
        if t == "(" and i + 1 < len(toks) and toks[i + 1] in _CAST_WORDS:
            close = find_close(toks, i)
            if all(w in _CAST_WORDS or w == "*" for w in toks[i + 1 : close]):
                i = close + 1  # a cast: value kept as is
                continue
        py.append(_num(t) if t[0].isdigit() or t[0] == "." else t)
        i += 1
    return _eval(ast.parse(" ".join(py), mode="eval").body, env)


def _eval(node: ast.AST, env: dict[str, float]) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.Name) and node.id in env:
        return env[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        a, b = _eval(node.left, env), _eval(node.right, env)
        if isinstance(node.op, ast.Div) and isinstance(a, int) and isinstance(b, int):
            return int(a / b)
        return _OPS[type(node.op)](a, b)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_eval(node.operand, env))
    raise ValueError(f"not a constant value: {ast.unparse(node)!r}")


def _initializer(toks: list[str], env: dict[str, float]) -> list[float]:
    if toks and toks[0] == "{":
        inner = toks[1 : find_close(toks, 0)]
        out: list[float] = []
        for part in split_top(inner):
            out.extend(_initializer(part, env))
        return out
    return [eval_c(toks, env)]


def _statements(toks: list[str]) -> list[list[str]]:
    out, cur, i = [], [], 0
    while i < len(toks):
        t = toks[i]
        if t in ("for", "while", "if") and not cur:
            j = find_close(toks, i + 1) + 1
            j = find_close(toks, j) + 1 if j < len(toks) and toks[j] == "{" else j
            i = j
            continue
        if t == "{" and not cur:  # a block around the whole test
            j = find_close(toks, i)
            out.extend(_statements(toks[i + 1 : j]))
            i = j + 1
            continue
        if t in ("(", "[", "{"):
            j = find_close(toks, i)
            cur.extend(toks[i : j + 1])
            i = j + 1
            continue
        if t == ";":
            out.append(cur)
            cur = []
        else:
            cur.append(t)
        i += 1
    return out + ([cur] if cur else [])


def _declare_all(st: list[str], arrays: dict, scalars: dict) -> None:
    """A declaration with one or more declarators: `float a[] = {1}, b[2], n = 3`."""
    parts = split_top(st)
    first = parts[0]
    stop = min([first.index(t) for t in ("[", "=") if t in first] + [len(first)])
    type_toks = [t for t in first[: stop - 1] if t != "*"]
    _declare(first, arrays, scalars)
    for part in parts[1:]:
        _declare(type_toks + part, arrays, scalars)


def _declare(st: list[str], arrays: dict, scalars: dict) -> None:
    eq = st.index("=") if "=" in st else len(st)
    head, init = st[:eq], st[eq + 1 :]
    dims = []
    while head and head[-1] == "]":
        open_ = len(head) - 1 - head[::-1].index("[")
        dims.insert(0, head[open_ + 1 : -1])
        head = head[:open_]
    name = head[-1]
    if not dims and "*" not in head:
        scalars[name] = eval_c(init, scalars) if init else 0
        return
    values = _initializer(init, scalars) if init else None
    count = 1
    for d in dims:
        count *= int(eval_c(d, scalars)) if d else max(1, len(values or []))
    if values is not None:
        values = (values + [0.0] * count)[:count]
    arrays[name] = ArrayArg(count, tuple(values) if values is not None else None)


def parse_test(snippet: str) -> list[float | ArrayArg]:
    """The arguments of the snippet's `wrapper(fn, ...)` call, after the function name."""
    arrays: dict[str, ArrayArg] = {}
    scalars: dict[str, float] = {}
    call = None
    for st in _statements(tokenize(snippet)):
        if st[:2] == ["wrapper", "("]:
            call = split_top(st[2 : find_close(st, 1)])[1:]
        elif len(st) >= 2 and re.fullmatch(r"[A-Za-z_]\w*", st[0]) and "(" not in st[:2]:
            _declare_all(st, arrays, scalars)
    if call is None:
        raise ValueError("no wrapper(...) call")
    args: list[float | ArrayArg] = []
    for a in call:
        if len(a) == 1 and a[0] in arrays:
            args.append(arrays[a[0]])
        elif len(a) == 2 and a[0] == "&" and a[1] in scalars:
            args.append(ArrayArg(1, (scalars[a[1]],)))
        else:
            args.append(eval_c(a, scalars))
    return args
