"""Translate a ParEval serial baseline (C++ on std::vector) into a self-contained C function.

Only the plain-array subset is translated: `std::vector<T> const&` / `std::array<T, K>&`
parameters become `T*` (const when read only), `v.size()` becomes the array's length
expression, `std::numeric_limits<T>::max()` and friends become the `<float.h>`/`<limits.h>`
constants, `std::abs/min/max` become macros, `std::sqrt` and the other math functions their C
names, and a returned value is stored through the CUDA kernel's output pointer instead.
Everything else that needs C++ (complex numbers, structs, std algorithms and containers,
lambdas, range-for, helper functions outside the baseline) raises `Unsupported` with a reason
that names the construct, so the importer can skip the problem with it.

Guaranteed: a translation that returns uses only C tokens that were in the baseline, plus the
prelude's macros. Not guaranteed: that it compiles; the tests compile every imported one.
"""

from __future__ import annotations

import re

__all__ = ["PRELUDE", "Unsupported", "cpp_param", "translate_body"]

PRELUDE = """#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif
#define CP_ABS(x) ((x) < 0 ? -(x) : (x))
#define CP_MIN(a, b) ((a) < (b) ? (a) : (b))
#define CP_MAX(a, b) ((a) > (b) ? (a) : (b))
"""

_MATH = {
    "sqrt",
    "pow",
    "exp",
    "log",
    "log2",
    "log10",
    "sin",
    "cos",
    "tan",
    "atan",
    "atan2",
    "floor",
    "ceil",
    "round",
    "fabs",
    "fmin",
    "fmax",
    "tanh",
    "erf",
    "cbrt",
    "hypot",
}
_STD_MACRO = {"abs": "CP_ABS", "min": "CP_MIN", "max": "CP_MAX"}
_LIMITS = {
    ("double", "max"): "DBL_MAX",
    ("double", "lowest"): "(-DBL_MAX)",
    ("double", "min"): "DBL_MIN",
    ("float", "max"): "FLT_MAX",
    ("float", "lowest"): "(-FLT_MAX)",
    ("float", "min"): "FLT_MIN",
    ("int", "max"): "INT_MAX",
    ("int", "lowest"): "INT_MIN",
    ("int", "min"): "INT_MIN",
    ("size_t", "max"): "SIZE_MAX",
    ("size_t", "min"): "0",
    ("size_t", "lowest"): "0",
}
_CONTAINERS = {
    "vector",
    "queue",
    "stack",
    "deque",
    "pair",
    "map",
    "set",
    "unordered_map",
    "unordered_set",
    "string",
    "array",
    "tuple",
    "list",
}
_CPP_ONLY = {
    "auto",
    "new",
    "delete",
    "template",
    "nullptr",
    "this",
    "class",
    "namespace",
    "static_cast",
    "reinterpret_cast",
    "const_cast",
    "dynamic_cast",
    "typename",
}
_KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "do", "else"}
_TYPES = {
    "int",
    "double",
    "float",
    "char",
    "long",
    "short",
    "unsigned",
    "signed",
    "bool",
    "size_t",
    "int32_t",
    "int64_t",
    "uint32_t",
    "uint64_t",
    "const",
    "void",
}


class Unsupported(ValueError):
    """The baseline needs C++ that this translation does not cover; the message says what."""


def cpp_param(toks: list[str]) -> tuple[str, str, bool, bool]:
    """(name, element or scalar type, is a container, declared const) of one C++ parameter."""
    name = toks[-1]
    const = "const" in toks
    if "std" in toks and "<" in toks:
        kind = toks[toks.index("std") + 2]
        inner = toks[toks.index("<") + 1 : _close_angle(toks, toks.index("<"))]
        if kind not in ("vector", "array"):
            raise Unsupported(f"C++ container parameter std::{kind}")
        if "std" in inner:
            raise Unsupported(_std_reason(inner[inner.index("std") + 2]))
        elem = inner if kind == "vector" else inner[: inner.index(",")]
        return name, " ".join(t for t in elem if t != "const"), True, const
    words = [t for t in toks[:-1] if t not in ("const", "&", "NO_INLINE")]
    return name, " ".join(words), False, const


def _close_angle(toks: list[str], i: int) -> int:
    depth = 0
    for j in range(i, len(toks)):
        depth += toks[j] == "<"
        depth -= toks[j] == ">"
        if depth == 0:
            return j
    return len(toks)


def _std_reason(name: str) -> str:
    if name == "complex":
        return "complex numbers (std::complex)"
    if name in _CONTAINERS:
        return f"C++ container std::{name}"
    return f"C++ standard algorithm std::{name}"


def translate_body(
    body: list[str], lengths: dict[str, str], out: str | None, params: set[str]
) -> list[str]:
    """The C tokens of a baseline body `{ ... }` (Unsupported says what blocks it).

    `lengths`: container parameter → its length expression (for `v.size()`); `out`: the
    pointer a returned value is stored through (None for a void baseline); `params`: every
    parameter name, so that tables defined outside the baseline are found.
    """
    toks = _std_names(body)
    toks = _sizes(toks, lengths)
    _check_c(toks, params)
    if out is not None:
        toks = _returns(toks, out)
    return toks


def _sizes(toks: list[str], lengths: dict[str, str]) -> list[str]:
    res: list[str] = []
    i = 0
    while i < len(toks):
        t = toks[i]
        if t in lengths and toks[i + 1 : i + 5] == [".", "size", "(", ")"]:
            res += ["(", *re.findall(r"\w+|\S", lengths[t]), ")"]
            i += 5
            continue
        if t in lengths and toks[i + 1 : i + 2] == ["."]:
            raise Unsupported(f"C++ container method .{toks[i + 2]}() on {t}")
        res.append(t)
        i += 1
    return res


def _std_names(toks: list[str]) -> list[str]:
    res: list[str] = []
    i = 0
    while i < len(toks):
        if toks[i] != "std" or toks[i + 1 : i + 2] != ["::"]:
            res.append(toks[i])
            i += 1
            continue
        name = toks[i + 2]
        if name == "numeric_limits":
            close = _close_angle(toks, i + 3)
            typ = " ".join(toks[i + 4 : close])
            which = toks[close + 2]
            if (typ, which) not in _LIMITS:
                raise Unsupported(f"std::numeric_limits<{typ}>::{which}")
            res.append(_LIMITS[typ, which])
            i = close + 5  # > :: max ( )
            continue
        if name in _STD_MACRO:
            res.append(_STD_MACRO[name])
        elif name in _MATH:
            res.append(name)
        else:
            raise Unsupported(("local " if name in _CONTAINERS else "") + _std_reason(name))
        i += 3
    return res


def _check_c(toks: list[str], params: set[str]) -> None:
    for i, t in enumerate(toks):
        if t in _CPP_ONLY:
            raise Unsupported("lambda or auto-typed local" if t == "auto" else f"C++ {t}")
        if t == "[" and toks[i - 1] in ("(", ",", "=", "return") and toks[i + 1] in "]&=":
            raise Unsupported("lambda")
        if t == "for" and ":" in toks[i + 1 : _paren_end(toks, i + 1)]:
            if "?" not in toks[i + 1 : _paren_end(toks, i + 1)]:
                raise Unsupported("range-based for loop")
        if t == "::":
            raise Unsupported(f"C++ scope {toks[i - 1]}::{toks[i + 1]}")
        if not re.fullmatch(r"[A-Za-z_]\w*", t) or t in _KEYWORDS:
            continue
        nxt = toks[i + 1] if i + 1 < len(toks) else ""
        if nxt == "(" and t not in _MATH and not t.startswith("CP_") and t not in _TYPES:
            raise Unsupported(f"calls {t}(), defined outside the baseline function")
        if nxt == "(" and t in _TYPES and toks[i - 1] != "(":
            raise Unsupported(f"C++ functional cast {t}(...)")
    declared = _declared(toks) | params
    for i, t in enumerate(toks[:-1]):
        if toks[i + 1] == "[" and re.fullmatch(r"[A-Za-z_]\w*", t) and t not in declared:
            raise Unsupported(f"uses {t}, defined outside the baseline function")


def _paren_end(toks: list[str], i: int) -> int:
    depth = 0
    for j in range(i, len(toks)):
        depth += toks[j] == "("
        depth -= toks[j] == ")"
        if depth == 0:
            return j
    return len(toks)


def _declared(toks: list[str]) -> set[str]:
    out = set()
    for i, t in enumerate(toks[1:], 1):
        typed = toks[i - 1] in _TYPES or (toks[i - 1] == "*" and toks[i - 2] in _TYPES)
        if re.fullmatch(r"[A-Za-z_]\w*", t) and typed:
            out.add(t)
    return out


def _returns(toks: list[str], out: str) -> list[str]:
    res: list[str] = []
    i = 0
    while i < len(toks):
        if toks[i] != "return":
            res.append(toks[i])
            i += 1
            continue
        end = i + 1
        depth = 0
        while end < len(toks) and not (toks[end] == ";" and depth == 0):
            depth += toks[end] in "([{"
            depth -= toks[end] in ")]}"
            end += 1
        expr = toks[i + 1 : end]
        res += ["{", "*", out, "=", "(", *expr, ")", ";", "return", ";", "}"]
        i = end + 1
    return res
