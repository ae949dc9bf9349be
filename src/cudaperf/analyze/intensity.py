"""Static arithmetic intensity: floating-point operations per byte of global traffic, per thread.

What is counted (per thread, each statement weighted by the trip counts of its loops):

- FLOPs: every `+ - * /` (and compound assignment) whose operands are floating point (a
  float literal, a float/double/half variable or parameter, an element of a float array, a
  member of a float vector type, or a call to a float math function), one each; `fma*` and
  `__fmaf_*` calls count 2; math calls (`expf`, `sqrtf`, `__expf`, `tanhf`, `fmaxf`, ...)
  count 1. `a * b + c` is 2, as Nsight Compute counts an FFMA.
- Bytes: every global access of `access.find_accesses` moves its element size; read-modify-
  write (`x[i] += ...`, atomics) moves it twice. Loads (or stores) of one array in the same
  loop body whose addresses are a small thread-invariant distance apart (at most 128 bytes,
  or at most 8 thread / block steps: a stencil's `in[i - 1]`, `in[i]`, `in[i + nx]`) touch
  the same cache lines as their neighbours, so such a cluster counts once: a naive stencil
  moves one input and one output element per point, not 2r + 2 (before, its intensity was
  2r + 1 times too low and below that of the shared-memory version it outruns). A load in a
  window loop (known trip count T <= 32, address moving by a thread-invariant step s that
  adjacent threads' windows overlap: their distance is q * s with 0 < |q| < T, as in
  `for (dx...) in[(y + dy) * w + x + dx]`) counts once per window, not T times; a gather
  such as `idx[2 * i + j]`, j < 2, does not (q = T). Clamped coordinates (`min`, `max`,
  `clamp*`, `clip*` calls with one thread-dependent argument) count as unclamped here and in
  the coalescing class. Caches are otherwise ignored.
- Trip counts: a `for` loop with constant start (or a start that is a constant plus the
  thread index, as in a block-cooperative `for (k = threadIdx.x; k < TILE; k += 128)`
  staging loop: the mean over the threads that share it, (TILE - start) / step, is used),
  bound and step (`+=`, `-=`, `++`, `--`, `*=2`,
  `>>=1`, ...) has a known trip count; every other loop (symbolic bounds, `while`, `do`)
  is assumed to run `unknown_trip_count` times and `intensity_exact` becomes 0.

Not counted: integer arithmetic, work inside called `__device__` functions, shared-memory
traffic, and whether the compiler removes or fuses operations.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

import sympy as sp
from tree_sitter import Node

from cudaperf.analyze.access import Access, alias_definitions
from cudaperf.analyze.index import BLOCK_IDX, TX, TY, TZ, Scope, thread_dependent, unclamp
from cudaperf.analyze.parse import Kernel

__all__ = ["Intensity", "LoopWeights", "estimate_intensity", "trip_count"]

_FLOAT_TYPES = re.compile(
    r"\b(float\d?|double\d?|half2?|__half2?|__nv_bfloat162?|bfloat16|scalar_t|accscalar_t)\b"
)
_MATH = re.compile(
    r"^(__)?(exp|exp2|exp10|log|log2|log10|sqrt|rsqrt|sin|cos|tan|tanh|sinh|cosh|pow|fmax|fmin"
    r"|fabs|erf|ceil|floor|rint|round|fdivide|frcp|fsqrt_rn|fdiv_rn|fadd_rn|fmul_rn|h\w+)f?"
    r"(_rn|_rz|_ru|_rd)?$"
)
_FMA = re.compile(r"^(__)?fma(f)?(_rn|_rz|_ru|_rd)?$|^__fmaf_\w+$|^__hfma2?$")
_ARITH = {"+", "-", "*", "/"}
_COMPOUND = {"+=", "-=", "*=", "/="}


@dataclass(frozen=True)
class Intensity:
    """The static estimate for one kernel."""

    flops: float  # FLOPs per thread
    bytes: float  # global bytes per thread
    exact: bool  # every loop's trip count was known
    neighbour_loads: int = 0  # largest cluster of distinct neighbouring loads of one array

    @property
    def intensity(self) -> float | None:
        """FLOP per byte; None when the kernel touches no global memory."""
        return self.flops / self.bytes if self.bytes else None


def trip_count(loop: Node, scope: Scope) -> float | None:
    """Iterations of a `for` loop with constant start, bound and step; None otherwise.

    A block-cooperative loop (`for (k = c + threadIdx.x; k < B; k += S)`) runs a different
    number of times in each thread; its count is the mean over the S threads that share the
    work, (B - c) / S, not thread 0's ceil: a tile-plus-halo staging loop over BX + 2R
    elements with BX threads loads (BX + 2R) / BX elements per thread, not 2."""
    if loop.type != "for_statement":
        return None
    cond, upd = loop.child_by_field_name("condition"), loop.child_by_field_name("update")
    if cond is None or upd is None or cond.type != "binary_expression":
        return None
    var = cond.child_by_field_name("left")
    init, cooperative = _init_value(loop, var.text.decode(), scope)
    bound = scope.value(cond.child_by_field_name("right"))
    op = cond.child_by_field_name("operator").text.decode()
    if init is None or not bound.is_Integer:
        return None
    kind, step = _step(upd, scope)
    n = _count_trips(int(init), int(bound), op, kind, step)
    if cooperative and n and kind == "add" and step > 0 and op in ("<", "<="):
        span = int(bound) - int(init) + (op == "<=")
        return max(0.0, span / step)
    return n


_CMP = {
    "<": lambda v, b: v < b,
    "<=": lambda v, b: v <= b,
    ">": lambda v, b: v > b,
    ">=": lambda v, b: v >= b,
    "!=": lambda v, b: v != b,
}


def _count_trips(a: int, b: int, op: str, kind: str, step: int) -> int | None:
    test = _CMP.get(op)
    if test is None or step == 0 or kind == "?":
        return None
    if kind == "add":
        if op == "!=":
            return (b - a) // step if (b - a) % step == 0 and (b - a) // step >= 0 else None
        if (step > 0) != (op in ("<", "<=")):
            return 0 if not test(a, b) else None  # runs away from its bound
        last = b - (1 if op == "<" else -1 if op == ">" else 0)  # last value that passes
        return max(0, (last - a) // step + 1) if test(a, b) else 0
    n, v = 0, a
    while test(v, b) and n < 64:
        v = v * step if kind == "mul" else v // step
        n += 1
    return n if n < 64 else None


def _init_value(loop: Node, var: str, scope: Scope) -> tuple[int | None, bool]:
    """The loop variable's start (thread 0's for a thread-dependent start) and whether the
    start depends on the thread index."""
    init = loop.child_by_field_name("initializer")
    if init is None:
        return None, False
    stack = [init]
    while stack:
        n = stack.pop()
        stack.extend(n.children)
        if n.type in ("init_declarator", "assignment_expression"):
            left = n.child_by_field_name("declarator") or n.child_by_field_name("left")
            val = n.child_by_field_name("value") or n.child_by_field_name("right")
            if left is not None and left.text.decode() == var and val is not None:
                v = scope.value(val)
                coop = thread_dependent(v)
                if coop:  # block-cooperative loop: start from thread 0's value
                    v = v.subs({TX: 0, TY: 0, TZ: 0})
                return (int(v) if v.is_Integer else None), coop
    return None, False


def _step(upd: Node, scope: Scope) -> tuple[str, int]:
    if upd.type == "update_expression":
        op = upd.child_by_field_name("operator").text.decode()
        return "add", 1 if op == "++" else -1
    if upd.type == "assignment_expression":
        op = upd.child_by_field_name("operator").text.decode()
        v = scope.value(upd.child_by_field_name("right"))
        if not v.is_Integer:
            return "?", 0
        k = int(v)
        return {
            "+=": ("add", k),
            "-=": ("add", -k),
            "*=": ("mul", k),
            "<<=": ("mul", 2**k),
            "/=": ("div", k),
            ">>=": ("div", 2**k),
        }.get(op, ("?", 0))
    return "?", 0


class _Types:
    """Which names hold floating-point values in one kernel."""

    def __init__(self, kernel: Kernel):
        aliases = _float_aliases(kernel.node)
        self.float_type = (
            re.compile(rf"{_FLOAT_TYPES.pattern}|\b({'|'.join(map(re.escape, aliases))})\b")
            if aliases
            else _FLOAT_TYPES
        )
        self.floats: set[str] = {n for n, t in kernel.params.items() if self.float_type.search(t)}
        stack = [kernel.body]
        while stack:
            n = stack.pop()
            stack.extend(n.children)
            if n.type == "declaration":
                typ = n.child_by_field_name("type")
                if typ is not None and self.float_type.search(typ.text.decode()):
                    for d in n.children_by_field_name("declarator"):
                        self.floats.add(_declared_name(d))

    def is_float(self, n: Node) -> bool:
        t = n.type
        if t == "number_literal":
            s = n.text.decode().lower()
            return not s.startswith("0x") and ("." in s or "e" in s or s.endswith("f"))
        if t in ("identifier", "subscript_expression", "field_expression", "pointer_expression"):
            root = n
            while root.named_children and root.type != "identifier":
                root = root.named_children[0]
            return root.text.decode() in self.floats
        if t in ("parenthesized_expression", "unary_expression"):
            return self.is_float(n.named_children[-1])
        if t == "cast_expression":
            return bool(self.float_type.search(n.child_by_field_name("type").text.decode()))
        if t == "binary_expression" and n.child_by_field_name("operator").text.decode() in _ARITH:
            return self.is_float(n.child_by_field_name("left")) or self.is_float(
                n.child_by_field_name("right")
            )
        if t == "call_expression":
            name = n.child_by_field_name("function").text.decode()
            return bool(_MATH.match(name) or _FMA.match(name))
        return False


def _float_aliases(node: Node) -> set[str]:
    """File-level names of floating-point types: `#define T float`, `typedef double real;`,
    `using T = float;` (generated kernels often spell their element type this way)."""
    out: set[str] = set()
    for kind, name, text in alias_definitions(node):
        if kind == "define":
            is_float = _FLOAT_TYPES.fullmatch(re.sub(r"\b(const|volatile)\b", "", text).strip())
        else:
            is_float = _FLOAT_TYPES.search(text)
        if is_float:
            out.add(name)
    return out


def _declared_name(d: Node) -> str:
    while d.child_by_field_name("declarator") is not None:
        d = d.child_by_field_name("declarator")
    return d.text.decode()


def _flops(n: Node, types: _Types) -> int:
    t = n.type
    if t == "binary_expression" and n.child_by_field_name("operator").text.decode() in _ARITH:
        return int(types.is_float(n))
    if t == "assignment_expression" and n.child_by_field_name("operator").text.decode() in (
        _COMPOUND
    ):
        return int(
            types.is_float(n.child_by_field_name("left"))
            or types.is_float(n.child_by_field_name("right"))
        )
    if t == "call_expression":
        name = n.child_by_field_name("function").text.decode()
        return 2 if _FMA.match(name) else 1 if _MATH.match(name) else 0
    return 0


class LoopWeights:
    """How often a node of a kernel runs per thread: the product of its loops' trip counts."""

    def __init__(self, kernel: Kernel, scope: Scope, unknown_trip_count: int) -> None:
        self.top = kernel.body.parent
        self.scope = scope
        self.unknown = unknown_trip_count
        self.trips: dict[int, float | None] = {}  # loop node id → trip count (None = unknown)

    def __call__(self, n: Node) -> float:
        w, p = 1.0, n.parent
        while p is not None and p != self.top:
            if p.type in ("for_statement", "while_statement", "do_statement"):
                if p.id not in self.trips:
                    self.trips[p.id] = trip_count(p, self.scope)
                k = self.trips[p.id]
                w *= self.unknown if k is None else k
            p = p.parent
        return w


def estimate_intensity(
    kernel: Kernel, scope: Scope, accesses: list[Access], unknown_trip_count: int
) -> Intensity:
    """FLOPs and global bytes per thread, weighted by loop trip counts."""
    types = _Types(kernel)
    weight = LoopWeights(kernel, scope, unknown_trip_count)
    flops = 0.0
    stack = [kernel.body]
    while stack:
        n = stack.pop()
        stack.extend(n.children)
        f = _flops(n, types)
        if f:
            flops += f * weight(n)
    nbytes = 0.0
    groups: dict[tuple, list[list[tuple]]] = {}  # (array, kind, loops) → neighbour clusters
    windows = 1.0  # largest window of positions one load reads over its window loops
    for a in accesses:
        if a.space != "global":
            continue
        off = unclamp(a.offset) if a.offset is not None else None
        window = 1.0
        if a.kind in ("load", "store") and off is not None:
            clusters = groups.setdefault((a.array, a.kind, _loops(a.node)), [])
            near = next((c for c in clusters if _neighbours(off, c[0][0])), None)
            if near is not None:  # the same cache lines as an access already counted
                near.append((off, a))
                continue
            clusters.append([(off, a)])
            if a.kind == "load":
                window = _window_trips(off, a.node, weight)
                windows = max(windows, window)
        mult = 2 if a.kind in ("loadstore", "atomic") else 1
        nbytes += (a.elem_bytes or 4) * mult * weight(a.node) / window
    neighbours = int(windows) if windows > 1 else 0
    for (_, kind, _), clusters in groups.items():
        for c in clusters if kind == "load" else ():
            offsets = list({sp.srepr(o): o for o in (sp.expand(o) for o, _ in c)}.values())
            if len(offsets) > neighbours and _shared_between_threads(offsets):
                neighbours = len(offsets)
    exact = all(v is not None for v in weight.trips.values())
    return Intensity(flops, nbytes, exact, neighbours if neighbours > 1 else 0)


# Global accesses closer than this many bytes, or this many thread / block steps apart, touch
# the same or recently fetched cache lines (a stencil's in[i - 1], in[i], in[i + nx], ...).
_NEAR_BYTES = 128
_NEAR_STEPS = 8
_STEP_SYMBOLS = (TX, TY, TZ, *(sp.Symbol(n, integer=True, nonnegative=True) for n in BLOCK_IDX))


def _loops(n: Node) -> tuple[int, ...]:
    """Ids of the loops around `n`, innermost first."""
    out, p = [], n.parent
    while p is not None:
        if p.type in ("for_statement", "while_statement", "do_statement"):
            out.append(p.id)
        p = p.parent
    return tuple(out)


def _steps(a: sp.Expr) -> list[sp.Expr]:
    """Byte distances between the addresses that adjacent threads, blocks or loop iterations
    compute for offset `a` (the constant coefficients of the index symbols)."""
    out = []
    for s in a.free_symbols:
        if s in _STEP_SYMBOLS or s.name.startswith("iter@"):
            step = sp.expand(sp.diff(a, s))
            if step != 0 and not step.free_symbols & (set(_STEP_SYMBOLS) | {s}):
                out.append(step)
    return out


def _shared_between_threads(offsets: list[sp.Expr]) -> bool:
    """Whether another thread, block or loop iteration reads what one of these neighbouring
    loads reads: some distance between two of them is a whole number of steps (a stencil's
    in[i - 1] is the next thread's in[i]; `idx[2 * i]` and `idx[2 * i + 1]` only split one
    thread's pair and are no reuse)."""
    steps = _steps(offsets[0])
    for a, b in itertools.combinations(offsets, 2):
        d = sp.expand(a - b)
        for step in steps:
            if _whole_steps(d, step):
                return True
            if step.is_Number or not _diagonal(d, step, steps):
                continue
            return True
    return False


def _whole_steps(d: sp.Expr, step: sp.Expr) -> bool:
    """Whether `d` is a nonzero whole number of `step`s."""
    try:
        q = sp.cancel(d / step)
    except (TypeError, ValueError, ZeroDivisionError):
        return False
    return bool(q.is_Integer and q != 0)


def _diagonal(d: sp.Expr, step: sp.Expr, steps: list[sp.Expr]) -> bool:
    """Whether `d` is a few `step`s (rows, planes) plus a nonzero whole number of another
    step: a diagonal tap such as in[(y - 1) * w + x - 1] against in[y * w + x + 1]."""
    for k in range(-_NEAR_STEPS, _NEAR_STEPS + 1):
        r = sp.expand(d - k * step)
        for other in steps:
            if other is not step and r != 0 and _whole_steps(r, other):
                return True
    return False


def _index_steps(off: sp.Expr):
    """The thread-invariant address steps of `off` along each thread / block index it uses
    (the distance between adjacent threads' or blocks' addresses); non-zero."""
    for s in _STEP_SYMBOLS:
        if s not in off.free_symbols:
            continue
        step = sp.expand(sp.diff(off, s))
        if step == 0 or step.free_symbols & set(_STEP_SYMBOLS) or step.atoms(sp.Derivative):
            continue
        yield step


def _neighbours(a: sp.Expr, b: sp.Expr) -> bool:
    """Whether byte offsets `a` and `b` of one array are a small, thread-invariant distance
    apart: at most `_NEAR_BYTES`, or at most `_NEAR_STEPS` times the distance between the
    addresses of adjacent threads or blocks along one index (a row or plane away)."""
    try:
        d = sp.expand(a - b)
        if d.free_symbols & set(_STEP_SYMBOLS[:3]) or d.atoms(sp.Function):
            return False
        if d.is_Number:
            return abs(d) <= _NEAR_BYTES
        for step in _index_steps(a):
            q = sp.cancel(d / step)
            if q.is_Integer and abs(q) <= _NEAR_STEPS:
                return True
            if step.is_Number:
                continue
            for k in range(-_NEAR_STEPS, _NEAR_STEPS + 1):  # a row away and a few bytes across
                r = sp.expand(d - k * step)
                if r.is_Number and abs(r) <= _NEAR_BYTES:
                    return True
    except (TypeError, ValueError, ZeroDivisionError):
        return False
    return False


# A window loop (`for (dx = -R; dx <= R; ++dx) ... in[x + dx]`) runs at most this many times.
_WINDOW_TRIPS = 32


def _window_trips(off: sp.Expr, node: Node, weight: LoopWeights) -> float:
    """How many of the positions a load reads over its window loops the caches serve from one
    fetch: the product of the trip counts of the loops around `node` that move its address
    by a thread-invariant step s with a known trip count T <= `_WINDOW_TRIPS` such that
    adjacent threads (or blocks) share the window: the distance t between their addresses
    along some index is a whole multiple q of s with 0 < |q| < T (a 3x3 filter's
    `in[(y + dy) * w + x + dx]`: t = s along x, t = s = a row along y). `idx[2 * i + j]` for
    j < 2 (q = 2 = T) reads a pair no other thread reads: 1."""
    out, p = 1.0, node.parent
    while p is not None and p != weight.top:
        if p.type in ("for_statement", "while_statement", "do_statement"):
            weight(p)  # fills weight.trips for the loops around p
            trips = weight.trips.get(p.id)
            it = sp.Symbol(f"iter@{p.start_byte}", integer=True, nonnegative=True)
            if trips and 1 < trips <= _WINDOW_TRIPS and it in off.free_symbols:
                if _shares_window(off, it, trips):
                    out *= trips
        p = p.parent
    return out


def _shares_window(off: sp.Expr, it: sp.Symbol, trips: float) -> bool:
    try:
        s = sp.expand(sp.diff(off, it))
        if s == 0 or s.free_symbols & (set(_STEP_SYMBOLS) | {it}) or s.atoms(sp.Function):
            return False
        for t in _index_steps(off):
            q = sp.cancel(t / s)
            if q.is_Integer and 0 < abs(q) < trips:
                return True
    except (TypeError, ValueError, ZeroDivisionError):
        return False
    return False
