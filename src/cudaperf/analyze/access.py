"""Global and shared memory accesses of a kernel, classified by their threadIdx.x stride.

For each access the byte address is built symbolically (base offset of the pointer, e.g.
`row = a + blockIdx.x * n`, plus index × element size) and differentiated in threadIdx.x:

- global: stride 0 → `broadcast`, ±1 element → `coalesced`, any other known stride →
  `strided` (symbolic strides such as `n` count as strided), not affine → `unknown`.
  `sectors` is the number of 32-byte sectors one warp request touches, for a 32-byte aligned
  base and 32 consecutive threadIdx.x (blockDim.x >= 32).
- shared: multi-dimensional arrays are linearised with their declared extents; the conflict
  degree is the most distinct 4-byte words any bank must serve in one phase (8-byte
  elements: 16 threads per phase, 16-byte elements: 8), so 1 = conflict-free.

Pointers are followed through kernel parameters, `__shared__` declarations, local pointer
variables, pointer arithmetic and `reinterpret_cast`/C casts (which set the element type,
e.g. `float4`). Accesses inside called `__device__` functions are not followed. Element types
spelled through a file-level alias (`#define T double`, `typedef`, `using`) take the aliased
type's size; a type still unknown (a template parameter) is taken as 4 bytes, its offsets
counted in elements (so `x[i]` stays stride 1 whatever the real size).

A strided global access whose siblings (same array, constant offset apart) fill the gaps
between its lanes, as the fields `rec[3 * i + 0..2]` of a record per thread do, is reported
coalesced: the group touches no more sectors than as many coalesced requests.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import sympy as sp
from tree_sitter import Node

from cudaperf.analyze.index import Scope, tx_stride, type_size, unclamp, warp_values
from cudaperf.analyze.parse import Kernel

__all__ = [
    "Access",
    "alias_definitions",
    "find_accesses",
    "shared_conflict_degree",
    "type_aliases",
    "warp_sectors",
]

_ATOMIC_PREFIX = "atomic"


@dataclass(frozen=True)
class Access:
    """One memory access in the kernel source."""

    space: str  # "global" or "shared"
    array: str  # the underlying parameter / shared array name
    line: int  # 1-based line in the analysed CUDA text
    text: str  # the access as written, e.g. "a[i * n + j]"
    kind: str  # "load", "store", "loadstore" (x += ...), "atomic"
    elem_bytes: int | None  # bytes per element; None for template types
    stride: str | None  # elements between consecutive threadIdx.x; None = not affine
    pattern: str  # broadcast / coalesced / strided / unknown
    sectors: int | None  # global: 32-byte sectors per warp request (static estimate)
    conflict_degree: int | None  # shared: bank-conflict ways (1 = none); None = unknown
    node: Node  # the subscript / dereference node
    offset: sp.Expr | None = None  # symbolic byte offset from the array base (None: unknown)


@dataclass(frozen=True)
class _Ptr:
    space: str
    array: str
    elem: str  # element type text
    offset: sp.Expr  # byte offset from the array base
    dims: tuple[int, ...] = ()  # shared arrays: declared extents (all but the first matter)


def _elem_type(t: str, aliases: dict[str, str] | None = None) -> str:
    t = t.replace("*", "").replace("&", "").strip()
    if aliases:
        t = " ".join(aliases.get(w, w) for w in t.split())
    return t


def alias_definitions(node: Node):
    """(kind, name, type text) of every file-level type alias in the file around `node`:
    `#define T double` ("define"), `typedef float real;` and `using T = float;` ("typedef").
    Function bodies are not searched."""
    root = node
    while root.parent is not None:
        root = root.parent
    stack = [root]
    while stack:
        n = stack.pop()
        pairs: list[tuple[Node | None, Node | None]] = []
        if n.type == "preproc_def":
            pairs = [(n.child_by_field_name("name"), n.child_by_field_name("value"))]
        elif n.type in ("type_definition", "alias_declaration"):
            typ = n.child_by_field_name("type")
            names = n.children_by_field_name("declarator") or [n.child_by_field_name("name")]
            pairs = [(d, typ) for d in names]
        elif n.type != "function_definition":
            stack.extend(n.children)
        kind = "define" if n.type == "preproc_def" else "typedef"
        for name, val in pairs:
            if name is not None and val is not None:
                if name.type in ("identifier", "type_identifier"):
                    yield kind, name.text.decode(), val.text.decode()


def type_aliases(node: Node) -> dict[str, str]:
    """File-level names of element types whose size is known: `#define T double`,
    `typedef float real;`, `using T = float;` (generated kernels often spell their element
    type this way). A name defined as two different types is left out."""
    seen: dict[str, set[str]] = {}
    for _, name, text in alias_definitions(node):
        t = " ".join(text.replace("const", " ").split())
        if type_size(t) is not None:
            seen.setdefault(name, set()).add(t)
    return {k: next(iter(v)) for k, v in seen.items() if len(v) == 1}


class _Resolver:
    def __init__(self, kernel: Kernel, scope: Scope):
        self.scope = scope
        self.aliases = type_aliases(kernel.body)
        self.ptrs: dict[str, _Ptr] = {}
        self.local_ptrs: dict[str, tuple[str, Node]] = {}
        for name, typ in kernel.params.items():
            if "*" in typ:
                self.ptrs[name] = _Ptr("global", name, _elem_type(typ, self.aliases), sp.Integer(0))
        self._declarations(kernel.body)

    def _declarations(self, body: Node) -> None:
        stack = [body]
        while stack:
            n = stack.pop()
            stack.extend(n.children)
            if n.type != "declaration":
                continue
            typ = n.child_by_field_name("type")
            shared = any(c.type == "type_qualifier" and c.text == b"__shared__" for c in n.children)
            for d in n.children_by_field_name("declarator"):
                self._declarator(d, typ.text.decode() if typ else "", shared)

    def _declarator(self, d: Node, typ: str, shared: bool) -> None:
        init = d.child_by_field_name("value") if d.type == "init_declarator" else None
        if d.type == "init_declarator":
            d = d.child_by_field_name("declarator")
        dims: list[int] = []
        while d is not None and d.type == "array_declarator":
            size = d.child_by_field_name("size")
            v = self.scope.value(size) if size is not None else sp.Integer(0)
            dims.insert(0, int(v) if v.is_Integer else -1)
            d = d.child_by_field_name("declarator")
        if d is None:
            return
        if shared and d.type == "identifier":
            self.ptrs[d.text.decode()] = _Ptr(
                "shared", d.text.decode(), _elem_type(typ, self.aliases), sp.Integer(0), tuple(dims)
            )
        elif d.type == "pointer_declarator" and init is not None:
            name = d.child_by_field_name("declarator")
            if name is not None and name.type == "identifier":
                self.local_ptrs[name.text.decode()] = (typ, init)

    def pointer(self, n: Node, depth: int = 0) -> _Ptr | None:
        """What a pointer-valued expression points into, with its element type and offset."""
        if depth > 8:
            return None
        t = n.type
        if t == "identifier":
            name = n.text.decode()
            if name in self.local_ptrs:
                typ, init = self.local_ptrs[name]
                p = self.pointer(init, depth + 1)
                return self._retype(p, typ) if p else None
            return self.ptrs.get(name)
        if t == "parenthesized_expression":
            return self.pointer(n.named_children[-1], depth + 1)
        if t == "cast_expression":
            p = self.pointer(n.child_by_field_name("value"), depth + 1)
            return self._retype(p, n.child_by_field_name("type").text.decode()) if p else None
        if t == "call_expression":
            fn = n.child_by_field_name("function")
            args = n.child_by_field_name("arguments").named_children
            if fn.type == "template_function" and args and fn.text.decode().endswith("*>"):
                p = self.pointer(args[0], depth + 1)
                targs = fn.child_by_field_name("arguments").text.decode()[1:-1]
                return self._retype(p, targs) if p else None
            return None
        if t == "binary_expression" and n.child_by_field_name("operator").text in (b"+", b"-"):
            p = self.pointer(n.child_by_field_name("left"), depth + 1)
            if p is None:
                return None
            k = self.scope.value(n.child_by_field_name("right"))
            k = -k if n.child_by_field_name("operator").text == b"-" else k
            return _Ptr(p.space, p.array, p.elem, p.offset + k * (type_size(p.elem) or 1), p.dims)
        if t == "pointer_expression" and n.child_by_field_name("operator").text == b"&":
            arg = n.child_by_field_name("argument")
            if arg.type == "subscript_expression":
                return self._element(arg, depth)
        return None

    def _element(self, sub: Node, depth: int = 0) -> _Ptr | None:
        """The address of `a[i]...[k]` as a pointer (offset includes the index)."""
        idx: list[Node] = []
        base = sub
        while base.type == "subscript_expression":
            ind = base.child_by_field_name("indices")
            if ind is None or not ind.named_children:
                return None
            idx.insert(0, ind.named_children[0])
            base = base.child_by_field_name("argument")
        p = self.pointer(base, depth + 1)
        if p is None or (len(idx) > 1 and len(p.dims) != len(idx)):
            return None
        lin = sp.Integer(0)
        for k, i in enumerate(idx):
            extent = p.dims[k] if len(idx) > 1 else 1
            if extent < 0:
                return None
            lin = lin * (extent if k else 1) + self.scope.value(i)
        return _Ptr(p.space, p.array, p.elem, p.offset + lin * (type_size(p.elem) or 1), p.dims)

    def _retype(self, p: _Ptr, typ: str) -> _Ptr:
        elem = _elem_type(typ.replace("const", ""), self.aliases)
        return _Ptr(p.space, p.array, elem, p.offset, p.dims)


def find_accesses(kernel: Kernel, scope: Scope, block_x: int | None = None) -> list[Access]:
    """Every global and shared access of the kernel body, in source order.

    `block_x` (blockDim.x from the launch, when known and < 32) makes the sector and bank
    estimates follow a warp across rows; the class still comes from the threadIdx.x stride.
    """
    res = _Resolver(kernel, scope)
    out: list[Access] = []
    stack = [kernel.body]
    while stack:
        n = stack.pop()
        stack.extend(reversed(n.children))
        target: Node | None = None
        if n.type == "subscript_expression" and not _is_inner_subscript(n):
            target = n
        elif n.type == "pointer_expression" and n.child_by_field_name("operator").text == b"*":
            target = n
        if target is None:
            continue
        p = (
            res._element(n)
            if n.type == "subscript_expression"
            else res.pointer(n.child_by_field_name("argument"))
        )
        if p is not None:
            out.append(_classify(n, p, block_x))
    return _merge_record_fields(out)


def _merge_record_fields(accesses: list[Access]) -> list[Access]:
    """Strided global accesses whose sibling accesses fill the gaps count as coalesced.

    `rec[3 * i]`, `rec[3 * i + 1]`, `rec[3 * i + 2]` (the fields of an array of records, one
    record per thread) are each strided, but together a warp's three requests touch exactly
    the sectors of three coalesced ones: the L1/L2 caches merge them, so no DRAM sector is
    wasted. Siblings are accesses of the same array in the same direction (loads, or
    stores/read-modify-writes) with the same element size whose byte offsets differ by a
    constant; the group is coalesced when the union of its lanes' addresses touches no more
    sectors than as many coalesced requests, and each member then reports its share.
    """
    groups: dict[tuple, list[tuple[int, sp.Expr, sp.Expr]]] = {}
    for k, a in enumerate(accesses):
        if a.space != "global" or a.pattern != "strided" or a.kind == "atomic":
            continue
        if a.offset is None or a.stride in (None, "mixed"):
            continue
        b = a.elem_bytes or 4
        off = unclamp(a.offset) * (1 if a.elem_bytes else b)  # unknown type: in elements
        d = tx_stride(off)
        if d is None or not sp.nsimplify(d / b).is_Integer:
            continue
        groups.setdefault((a.array, a.kind == "load", a.elem_bytes), []).append(
            (k, off, sp.nsimplify(d / b))
        )
    out = list(accesses)
    for (_, _, size), members in groups.items():
        b = size or 4
        for stride in {st for _, _, st in members}:
            same = [(k, off) for k, off, st in members if st == stride]
            base = same[0][1]
            deltas: set[int] = set()
            ks = []
            for k, off in same:
                d = sp.expand(off - base)
                if d.is_Integer:
                    deltas.add(int(d))
                    ks.append(k)
            if len(deltas) < 2:
                continue
            addrs = [t * int(stride) * b + d for t in range(32) for d in deltas]
            union = warp_sectors(addrs, b)
            if union > -(-32 * b // 32) * len(deltas):
                continue
            share = -(-union // len(deltas))
            for k in ks:
                out[k] = dataclasses.replace(accesses[k], pattern="coalesced", sectors=share)
    return out


def _is_inner_subscript(n: Node) -> bool:
    par = n.parent
    return (
        par is not None
        and par.type == "subscript_expression"
        and par.child_by_field_name("argument") == n
    )


def _kind(n: Node) -> str:
    cur = n
    while cur.parent is not None and cur.parent.type in (
        "field_expression",
        "parenthesized_expression",
    ):
        cur = cur.parent
    par = cur.parent
    if par is None:
        return "load"
    if par.type == "assignment_expression" and par.child_by_field_name("left") == cur:
        return "store" if par.child_by_field_name("operator").text == b"=" else "loadstore"
    if par.type == "update_expression":
        return "loadstore"
    if par.type == "pointer_expression" and par.child_by_field_name("operator").text == b"&":
        call = par.parent.parent if par.parent is not None else None
        if call is not None and call.type == "call_expression":
            fn = call.child_by_field_name("function").text.decode()
            if fn.startswith(_ATOMIC_PREFIX) and par.parent.named_children[0] == par:
                return "atomic"
    return "load"


def _classify(n: Node, p: _Ptr, block_x: int | None = None) -> Access:
    size = type_size(p.elem)
    b = size or 4
    off = unclamp(p.offset) if p.space == "global" else p.offset  # a clamp keeps the stride
    if size is None:  # the resolver counted an unknown (template, macro) type's offset in
        off = off * b  # elements, not bytes: assume 4-byte elements, as `b` does
    d = tx_stride(off)
    stride: str | None = None
    addrs: list[int] | None = None
    if d is not None:
        st = sp.nsimplify(d / b)
        stride = str(st)
        if st.is_number:
            addrs = [int(t * st * b) for t in range(32)]
        pattern = "broadcast" if st == 0 else "coalesced" if abs(st) == 1 else "strided"
    else:  # not affine: try the 32 lanes numerically (integer division by small constants)
        addrs = warp_values(off)
        pattern = "unknown" if addrs is None else _pattern_of(addrs, b)
        stride = None if addrs is None else "mixed"
    if block_x is not None and block_x < 32 and pattern != "unknown":
        addrs = warp_values(off, block_x) or addrs
    sectors = conflict = None
    if p.space == "global" and pattern != "unknown":
        sectors = warp_sectors(addrs, b) if addrs is not None else 32 * max(1, b // 32)
    if p.space == "shared" and addrs is not None:
        conflict = shared_conflict_degree(addrs, b)
    text = " ".join(n.text.decode().split())[:80]
    line = n.start_point[0] + 1
    kind = _kind(n)
    return Access(
        p.space, p.array, line, text, kind, size, stride, pattern, sectors, conflict, n, p.offset
    )


def _pattern_of(addrs: list[int], size: int) -> str:
    if len(set(addrs)) == 1:
        return "broadcast"
    ideal = -(-32 * size // 32)
    return "coalesced" if warp_sectors(addrs, size) <= ideal else "strided"


def warp_sectors(addrs: list[int], size: int) -> int:
    """32-byte sectors touched by a warp whose lanes access `size` bytes at byte `addrs`."""
    base = min(addrs)
    secs: set[int] = set()
    for a in addrs:
        a -= base
        secs.update(range(a // 32, (a + size - 1) // 32 + 1))
    return len(secs)


def shared_conflict_degree(addrs: list[int], size: int) -> int:
    """Bank-conflict ways for a warp's byte addresses into shared memory (1 = none).

    The most distinct 4-byte words one bank serves in one phase; a phase is the whole warp for
    accesses up to 4 bytes, 16 lanes for 8 bytes and 8 lanes for 16 bytes.
    """
    per_phase = 32 if size <= 4 else max(1, 128 // size)
    base = min(addrs)
    worst = 1
    for phase in range(0, 32, per_phase):
        banks: dict[int, set[int]] = {}
        for a in addrs[phase : phase + per_phase]:
            a -= base
            for w in range(a // 4, (a + size - 1) // 4 + 1):
                banks.setdefault(w % 32, set()).add(w)
        worst = max(worst, max(len(ws) for ws in banks.values()))
    return worst
