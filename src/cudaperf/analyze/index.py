"""Symbolic values of CUDA integer expressions, and their stride in threadIdx.x.

An expression node from tree-sitter becomes a sympy expression over the symbols `TX, TY, TZ`
(threadIdx), `BX..`, `BDX..`, `GDX..` (blockIdx, blockDim, gridDim), kernel parameters (by
name), loop-iteration counters (`iter@<byte offset>`), and opaque function applications for
what is not arithmetic (`load(...)` for a memory read, `div(a, b)` for integer division,
`select(...)`, calls). Local variables are followed to their definitions (`Scope.value`).

Guaranteed: an expression that does not depend on threadIdx has no TX/TY/TZ among its free
symbols, so `thread_dependent` never calls a thread-dependent value uniform... except through
constructs it cannot see (inline asm, values passed through memory at a uniform address).
Not guaranteed: exactness for non-affine code; `tx_stride` then returns None ("unknown").
`div(a, b)` with b >= 32 or symbolic is treated as uniform across a warp (a warp of 32
consecutive threadIdx.x rarely crosses a multiple of b), which makes `i / n` and `i % n`
2-D decompositions come out right.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import sympy as sp
from tree_sitter import Node

from cudaperf.analyze.ctypes_table import type_size

__all__ = [
    "BLOCK_IDX",
    "TX",
    "TY",
    "TZ",
    "Scope",
    "fold",
    "thread_dependent",
    "tx_stride",
    "unclamp",
    "type_size",
    "warp_values",
]

log = logging.getLogger(__name__)

TX, TY, TZ = sp.symbols("TX TY TZ", integer=True, nonnegative=True)
_BUILTIN = {
    "threadIdx": ("TX", "TY", "TZ"),
    "blockIdx": ("BX", "BY", "BZ"),
    "blockDim": ("BDX", "BDY", "BDZ"),
    "gridDim": ("GDX", "GDY", "GDZ"),
}
BLOCK_IDX = _BUILTIN["blockIdx"]
_SYMS = {n: sp.Symbol(n, integer=True, nonnegative=True) for t in _BUILTIN.values() for n in t}
_SYMS.update({"TX": TX, "TY": TY, "TZ": TZ})
_THREAD = {TX, TY, TZ}
_DIV = sp.Function("div")
_CONTROL = {
    "if_statement",
    "for_statement",
    "while_statement",
    "do_statement",
    "switch_statement",
    "conditional_expression",
    "case_statement",
}
_LOOPS = {"for_statement", "while_statement", "do_statement"}
_CLAMP = re.compile(r"min|max|clamp|clip", re.IGNORECASE)


def thread_dependent(e: sp.Expr) -> bool:
    """True when the value may differ between threads of one block."""
    return bool(e.free_symbols & _THREAD)


def unclamp(a: sp.Expr) -> sp.Expr:
    """`a` with clamps of a thread-dependent index (`min(x + 1, w - 1)`, `clampi(y + dy, 0,
    h - 1)`, `max(i - 1, 0)`: a call named like min / max / clamp / clip with exactly one
    thread-dependent argument) replaced by that argument. A clamp moves only the border
    threads' addresses, so clamped taps stay neighbours of one another."""
    for _ in range(4):  # nested clamps
        reps = {}
        for f in a.atoms(sp.Function):
            name = type(f).__name__
            if name.startswith("call_") and _CLAMP.search(name[5:]) and len(f.args) >= 2:
                dep = [x for x in f.args if thread_dependent(x)]
                if len(dep) == 1:
                    reps[f] = dep[0]
        if not reps:
            return a
        a = a.xreplace(reps)
    return a


def tx_stride(e: sp.Expr) -> sp.Expr | None:
    """The change of `e` when threadIdx.x grows by one (within a warp); None if not affine."""
    reps = {}
    for f in e.atoms(_DIV):
        a, b = f.args
        if not b.is_number or b >= 32:
            reps[f] = sp.Symbol(f"q{len(reps)}", integer=True)
    e2 = e.xreplace(reps) if reps else e
    for f in e2.atoms(sp.Function):
        if TX in f.free_symbols:
            return None
    d = sp.expand(sp.diff(e2, TX))
    if TX in d.free_symbols:
        return None
    return d


_GENERIC = {"BX": 1, "BY": 1, "BZ": 1, "BDX": 256, "BDY": 1, "BDZ": 1, "TY": 0, "TZ": 0}


def warp_values(e: sp.Expr, block_x: int = 32) -> list[int] | None:
    """Values of `e` for the 32 lanes of a warp when only integer division makes it non-affine.

    Lane l has threadIdx.x = l % block_x and threadIdx.y = l // block_x (so a 16x16 block's
    warp spans two rows).
    Other symbols get generic values (parameters 1024, blockIdx 1, blockDim.x 256, loop
    counters 0); uniform opaque terms 0. None when `e` holds a thread-dependent load, call or
    select. Used when `tx_stride` says "not affine", e.g. for `idx / 16` and `idx % 16`.
    """
    for f in e.atoms(sp.Function):
        if f.func != _DIV and f.free_symbols & {TX, TY}:
            return None
    bx = max(1, min(32, block_x))
    try:
        return [int(_num(e, (lane % bx, lane // bx))) for lane in range(32)]
    except (ZeroDivisionError, TypeError, ValueError, OverflowError):
        return None


def _num(e: sp.Expr, t: tuple[int, int]) -> float:
    """`e` for the lane with threadIdx (x, y) = `t`: other symbols get `_GENERIC` values (loop
    counters 0, the rest 1024), any node `fold` does not know is a uniform opaque term, 0."""

    def value(s: sp.Symbol) -> float:
        if s == TX or s == TY:
            return t[0] if s == TX else t[1]
        name = str(s)
        return 0 if name.startswith("iter@") else _GENERIC.get(name, 1024)

    return fold(e, value, lambda _: 0.0)


def fold(
    e: sp.Expr, value: Callable[[sp.Symbol], float], other: Callable[[sp.Expr], float]
) -> float:
    """The float value of a size or index expression: numbers, `+`, `*`, `**` and `div(a, b)`
    (C's integer division: toward zero; ZeroDivisionError for b = 0) are folded; a symbol is
    `value(symbol)` and any other node (a call, `load`, `Min`) `other(node)`, either of which
    may raise for "unknown". Shared by `warp_values` and the ranker's launch features."""
    if e.is_Number:
        return float(e)
    if e.is_Symbol:
        return value(e)
    if e.is_Add:
        return sum(fold(a, value, other) for a in e.args)
    if e.is_Mul:
        out = 1.0
        for a in e.args:
            out *= fold(a, value, other)
        return out
    if e.is_Pow:
        return fold(e.args[0], value, other) ** fold(e.args[1], value, other)
    if isinstance(e, sp.Function) and e.func == _DIV:
        return float(math.trunc(fold(e.args[0], value, other) / fold(e.args[1], value, other)))
    return other(e)


@dataclass
class Def:
    """One definition of a local variable."""

    name: str
    op: str  # "=" (declaration or assignment), "+=", "-=", "*=", "++", "--", or another op
    value: Node | None  # the right-hand side (None for ++/--)
    node: Node  # the defining declarator / assignment / update node
    scope: Node | None = None  # declarations: the block (or for statement) they are visible in


@dataclass
class Scope:
    """Local definitions of one function body, and how to evaluate expressions in it."""

    params: dict[str, str]  # parameter name → type text
    consts: dict[str, sp.Expr]  # file-level constants (#define, constexpr)
    defs: dict[str, list[Def]] = field(default_factory=dict)
    _memo: dict[tuple[int, int], sp.Expr] = field(default_factory=dict)
    _busy: set[tuple[int, int]] = field(default_factory=set)

    @classmethod
    def of(cls, body: Node, params: dict[str, str], consts: dict[str, sp.Expr]) -> Scope:
        s = cls(params, consts)
        s._collect(body)
        return s

    def _collect(self, body: Node) -> None:
        stack = [body]
        while stack:
            n = stack.pop()
            t = n.type
            if t == "init_declarator":
                d = n.child_by_field_name("declarator")
                if d is not None and d.type == "identifier":
                    val = n.child_by_field_name("value")
                    self._add(Def(d.text.decode(), "=", val, n, _block_of(n)))
            elif t == "assignment_expression":
                left = n.child_by_field_name("left")
                if left is not None and left.type == "identifier":
                    op = n.child_by_field_name("operator").text.decode()
                    self._add(Def(left.text.decode(), op, n.child_by_field_name("right"), n))
            elif t == "update_expression":
                arg = n.child_by_field_name("argument")
                if arg is not None and arg.type == "identifier":
                    op = n.child_by_field_name("operator").text.decode()
                    self._add(Def(arg.text.decode(), op, None, n))
            stack.extend(reversed(n.children))

    def _add(self, d: Def) -> None:
        self.defs.setdefault(d.name, []).append(d)

    # ---- evaluation --------------------------------------------------------------------

    def value(self, n: Node) -> sp.Expr:
        """The symbolic value of expression node `n` at its position."""
        t = n.type
        if t == "number_literal":
            return _number(n.text.decode())
        if t in ("parenthesized_expression", "cast_expression"):
            return self.value(n.named_children[-1])
        if t == "identifier":
            return self.ident(n)
        if t == "field_expression":
            return self._field(n)
        if t == "binary_expression":
            return self._binary(n)
        if t == "unary_expression":
            v = self.value(n.child_by_field_name("argument"))
            op = n.child_by_field_name("operator").text.decode()
            return -v if op == "-" else v if op == "+" else sp.Function("un" + op)(v)
        if t == "subscript_expression":
            idx = n.child_by_field_name("indices")
            args = [self.value(c) for c in (idx.named_children if idx else [])]
            return sp.Function("load")(*args) if args else sp.Symbol("load")
        if t == "conditional_expression":
            return sp.Function("select")(*[self.value(c) for c in n.named_children])
        if t == "call_expression":
            return self._call(n)
        if t == "sizeof_expression":
            size = type_size(n.text.decode()[6:].strip("() "))
            return sp.Integer(size) if size else sp.Symbol("sizeof")
        if t in ("true", "false"):
            return sp.Integer(int(t == "true"))
        return sp.Symbol(f"opaque_{t}")

    def _call(self, n: Node) -> sp.Expr:
        fn = n.child_by_field_name("function")
        name = fn.text.decode() if fn is not None else "call"
        args = n.child_by_field_name("arguments")
        vals = [self.value(c) for c in (args.named_children if args else [])]
        if fn is not None and fn.type == "template_function" and vals:  # static_cast<int>(x)
            if name.split("<")[0] in ("static_cast", "reinterpret_cast", "const_cast"):
                return vals[0]
        fname = "".join(ch if ch.isalnum() else "_" for ch in name.split("<")[0])
        return sp.Function("call_" + fname)(*vals) if vals else sp.Symbol("call_" + fname)

    def _field(self, n: Node) -> sp.Expr:
        arg, fld = n.child_by_field_name("argument"), n.child_by_field_name("field")
        base, f = arg.text.decode(), fld.text.decode() if fld else ""
        if base in _BUILTIN and f in ("x", "y", "z"):
            return _SYMS[_BUILTIN[base]["xyz".index(f)]]
        if arg.type == "identifier" and base in self.defs:
            return sp.Function("field_" + f)(self.ident(arg))
        return sp.Symbol(n.text.decode())

    def _binary(self, n: Node) -> sp.Expr:
        a = self.value(n.child_by_field_name("left"))
        b = self.value(n.child_by_field_name("right"))
        op = n.child_by_field_name("operator").text.decode()
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        if op == "/":
            return _div(a, b)
        if op == "%":
            return a - b * _div(a, b)
        if op == "<<" and b.is_Integer:
            return a * 2**b
        if op == ">>" and b.is_Integer:
            return _div(a, sp.Integer(2) ** b)
        if op == "&" and b.is_Integer and b > 0 and (int(b) + 1) & int(b) == 0:
            m = sp.Integer(int(b) + 1)
            return a - m * _div(a, m)
        return sp.Function("op" + str(abs(hash(op)) % 1000))(a, b)

    def ident(self, n: Node) -> sp.Expr:
        name = n.text.decode()
        if name == "warpSize":
            return sp.Integer(32)
        if name in self.defs:
            return self._local(name, n)
        if name in self.consts:
            return self.consts[name]
        return sp.Symbol(name, integer=True)

    def _local(self, name: str, use: Node) -> sp.Expr:
        key = (hash(name), use.start_byte)
        if key in self._memo:
            return self._memo[key]
        if key in self._busy:  # a definition that refers to itself (x = x + 1)
            return sp.Symbol(name, integer=True)
        self._busy.add(key)
        try:
            v = self._resolve(name, use)
        finally:
            self._busy.discard(key)
        self._memo[key] = v
        return v

    def _relevant(self, name: str, use: Node) -> list[Def]:
        """The declaration of `name` visible at `use` and the assignments in its scope."""
        decls = [
            d
            for d in self.defs[name]
            if d.scope is not None and d.node.start_byte < use.start_byte and _within(use, d.scope)
        ]
        if not decls:
            return [d for d in self.defs[name] if d.scope is None]
        decl = decls[-1]
        return [decl] + [
            d
            for d in self.defs[name]
            if d.scope is None
            and d.node.start_byte > decl.node.start_byte
            and _within(d.node, decl.scope)
        ]

    def _resolve(self, name: str, use: Node) -> sp.Expr:
        defs = self._relevant(name, use)
        if not defs:
            return self.consts.get(name, sp.Symbol(name, integer=True))
        loop = _header_loop(name, use, defs)
        if loop is not None:
            return self._loop_var(name, loop, defs)
        before = [d for d in defs if d.node.start_byte < use.start_byte]
        base_i = next(
            (
                i
                for i in range(len(before) - 1, -1, -1)
                if before[i].op == "=" and _encloses(before[i].node, use)
            ),
            None,
        )
        if base_i is None:
            return self._opaque(name, defs)
        base = before[base_i]
        v = self.value(base.value) if base.value is not None else sp.Symbol(name)
        for d in before[base_i + 1 :]:
            if not _encloses(d.node, use) or d.op not in ("+=", "-=", "*=", "++", "--"):
                return self._opaque(name, defs)
            v = self._apply(v, d)
        for d in defs:  # updates after the use, in a loop around both, carry over
            lp = _loop_around(d.node, use) if d.node.start_byte > use.start_byte else None
            if lp is None or _within(base.node, lp):
                continue
            if d.op not in ("+=", "-=", "++", "--"):
                return self._opaque(name, defs)
            v = v + _iter(lp) * self._apply(sp.Integer(0), d)
        return v

    def _apply(self, v: sp.Expr, d: Def) -> sp.Expr:
        if d.op in ("++", "--"):
            return v + (1 if d.op == "++" else -1)
        r = self.value(d.value)
        return v + r if d.op == "+=" else v - r if d.op == "-=" else v * r

    def _loop_var(self, name: str, loop: Node, defs: list[Def]) -> sp.Expr:
        init = next(d for d in defs if _within(d.node, loop.child_by_field_name("initializer")))
        start = self.value(init.value) if init.value is not None else sp.Symbol(name)
        upd = [d for d in defs if _within(d.node, loop.child_by_field_name("update"))]
        body = [d for d in defs if _within(d.node, loop.child_by_field_name("body"))]
        if len(upd) == 1 and not body and upd[0].op in ("+=", "-=", "++", "--"):
            step = self._apply(sp.Integer(0), upd[0])
            if not step.has(sp.Symbol(name)):
                return start + _iter(loop) * step
        return sp.Function("loopvar_" + name)(start, _iter(loop))

    def _opaque(self, name: str, defs: list[Def]) -> sp.Expr:
        vals = [self.value(d.value) for d in defs if d.value is not None][:4]
        deps = sorted({s for v in vals for s in v.free_symbols & _THREAD}, key=str)
        return sp.Function("var_" + name)(*deps) if deps else sp.Symbol("var_" + name)


def _block_of(n: Node) -> Node | None:
    """The block a declaration is visible in (a for statement for its initializer)."""
    p = n.parent
    while p is not None and p.type not in ("compound_statement", "for_statement"):
        p = p.parent
    return p


def _iter(loop: Node) -> sp.Symbol:
    return sp.Symbol(f"iter@{loop.start_byte}", integer=True, nonnegative=True)


def _number(text: str) -> sp.Expr:
    t = text.lower().rstrip("ful")
    try:
        return sp.Integer(int(t, 0))
    except ValueError:
        try:
            return sp.Float(float(t))
        except ValueError:
            return sp.Symbol("num")


def _div(a: sp.Expr, b: sp.Expr) -> sp.Expr:
    if a.is_Float or b.is_Float:
        return a / b
    if b.is_Integer and b != 0:
        q = sp.expand(a / b)
        if _integral(q):
            return q
    return _DIV(a, b)


def _integral(q: sp.Expr) -> bool:
    """Whether a polynomial has only integer coefficients (so C's `/` was exact)."""
    if q.is_Integer:
        return True
    syms = sorted(q.free_symbols, key=str)
    if not syms or q.atoms(sp.Function) or not q.is_polynomial(*syms):
        return False
    return all(c.is_Integer for c in sp.Poly(q, *syms).coeffs())


def _ancestors(n: Node) -> list[Node]:
    out = []
    p = n.parent
    while p is not None:
        out.append(p)
        p = p.parent
    return out


def _within(n: Node, outer: Node | None) -> bool:
    return outer is not None and outer.start_byte <= n.start_byte and n.end_byte <= outer.end_byte


def _encloses(d: Node, use: Node) -> bool:
    """Whether every branch or loop around definition `d` also surrounds `use`."""
    return all(_within(use, a) for a in _ancestors(d) if a.type in _CONTROL)


def _loop_around(d: Node, use: Node) -> Node | None:
    """The innermost loop that contains both `d` and `use`, if `d` is inside a loop body."""
    for a in _ancestors(d):
        if a.type in _LOOPS:
            return a if _within(use, a) else None
    return None


def _header_loop(name: str, use: Node, defs: list[Def]) -> Node | None:
    """The for-loop whose initializer defines `name` and which contains `use`, if any."""
    for a in _ancestors(use):
        if a.type == "for_statement":
            init = a.child_by_field_name("initializer")
            if any(_within(d.node, init) for d in defs):
                return a
    return None
