"""Synchronisation and warp-level structure of a kernel: barriers, atomics, shuffles, votes.

Calls to `__device__` functions defined in the same file are followed (transitively, once per
function): a helper's shuffles and atomics count for the kernel, and a call to a helper that
contains a barrier counts as a barrier at the call site.

A barrier is *divergent* when it sits under a branch or loop whose condition depends on the
thread index (directly or through local variables, loads at thread-dependent addresses,
...), or when a `return` under such a branch precedes it: then some threads of the block
never reach it, which is undefined behaviour and can deadlock. A barrier under a
block-uniform branch (`if (blockIdx.x == 0)`, `for (k = 0; k < n; ...)`) is fine.

A global atomic is *contended* when many threads may hit one address: its address is the
same for every lane (`atomicAdd(out, x)`) or data-dependent (`atomicAdd(&hist[v], 1)`), and
it is not limited to one thread per warp or block by an equality test on the thread index
(`if (threadIdx.x == 0)`, `if (lane == 0)`). Such atomics serialise in L2; a privatised copy in
shared memory or a warp/block reduction first removes most of them.

`register_tile_elems` is the size of the largest per-thread local array with constant
extents that is both written and read (e.g. `float acc[4][4]` = 16; an unused array counts
nothing): register blocking, where each thread keeps several independent accumulators and
so hides latency with instruction-level parallelism rather than with resident warps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tree_sitter import Node

from cudaperf.analyze.access import Access
from cudaperf.analyze.index import Scope, thread_dependent
from cudaperf.analyze.parse import Kernel

__all__ = ["Structure", "contended_atomics", "find_structure", "register_tile_elems"]

_BARRIER = re.compile(r"^(__syncthreads(_count|_and|_or)?|__barrier_sync|cg::sync)$")
_SHUFFLE = re.compile(r"^__shfl(_up|_down|_xor)?(_sync)?$")
_VOTE = re.compile(r"^(__ballot|__any|__all|__uni|__match_any|__match_all|__reduce_\w+)_sync$")
_ATOMIC = re.compile(r"^atomic[A-Z]\w*$")
_CG_METHOD_SHUFFLE = {"shfl", "shfl_down", "shfl_up", "shfl_xor"}
_CG_METHOD_VOTE = {"ballot", "any", "all"}
_BRANCHES = {
    "if_statement",
    "while_statement",
    "for_statement",
    "do_statement",
    "switch_statement",
    "conditional_expression",
}


@dataclass
class _Counts:
    barriers: list[Node] = field(default_factory=list)  # barrier calls (or helper calls)
    syncwarps: int = 0
    atomics: int = 0
    shuffles: int = 0
    votes: int = 0
    cg: int = 0


@dataclass(frozen=True)
class Structure:
    """Counts and barrier placement for one kernel."""

    syncthreads: int  # block barriers, including those inside called helpers
    divergent_lines: tuple[int, ...]  # 1-based lines of barriers not every thread reaches
    syncwarps: int  # __syncwarp calls
    atomics: int  # atomic* calls
    warp_shuffles: int  # shuffle intrinsics and cooperative-groups shfl methods
    warp_votes: int  # vote / match / reduce intrinsics
    cooperative_groups: int  # cooperative_groups (cg::) uses
    unroll_pragmas: int  # `#pragma unroll` lines in the kernel body


def _callee(call: Node) -> tuple[str, str | None]:
    """(function name, method name if it is `obj.method(...)`)."""
    fn = call.child_by_field_name("function")
    if fn is None:
        return "", None
    if fn.type == "field_expression":
        f = fn.child_by_field_name("field")
        return fn.text.decode(), f.text.decode() if f is not None else None
    return fn.text.decode().split("<")[0], None


def _count(body: Node, helpers: dict[str, Node], seen: set[str]) -> _Counts:
    c = _Counts()
    stack = [body]
    while stack:
        n = stack.pop()
        stack.extend(n.children)
        if n.type == "qualified_identifier" and n.text.decode().startswith(
            ("cg::", "cooperative_groups::")
        ):
            c.cg += 1
        if n.type != "call_expression":
            continue
        name, method = _callee(n)
        if _BARRIER.match(name) or method == "sync" and "grid" not in name:
            c.barriers.append(n)
        elif name == "__syncwarp":
            c.syncwarps += 1
        elif _ATOMIC.match(name):
            c.atomics += 1
        elif _SHUFFLE.match(name) or method in _CG_METHOD_SHUFFLE:
            c.shuffles += 1
        elif _VOTE.match(name) or name == "__activemask" or method in _CG_METHOD_VOTE:
            c.votes += 1
        elif name in helpers and name not in seen:
            sub = _count(helpers[name], helpers, seen | {name})
            c.barriers += [n] if sub.barriers else []
            c.syncwarps += sub.syncwarps
            c.atomics += sub.atomics
            c.shuffles += sub.shuffles
            c.votes += sub.votes
            c.cg += sub.cg
    return c


def _condition(branch: Node) -> Node | None:
    if branch.type == "for_statement":
        return branch.child_by_field_name("condition")
    return branch.child_by_field_name("condition")


def _thread_branch(n: Node, top: Node, scope: Scope) -> bool:
    """Whether `n` sits under a branch/loop between it and `top` with a thread-dependent test."""
    p, child = n.parent, n
    while p is not None and p != top:
        if p.type in _BRANCHES:
            cond = _condition(p)
            if cond is not None and cond != child and not _inside(child, cond):
                expr = cond.named_children[0] if cond.type == "condition_clause" else cond
                if expr is not None and thread_dependent(scope.value(expr)):
                    return True
        p, child = p.parent, p
    return False


def _inside(n: Node, outer: Node) -> bool:
    return outer.start_byte <= n.start_byte and n.end_byte <= outer.end_byte


def _returns(body: Node) -> list[Node]:
    out, stack = [], [body]
    while stack:
        n = stack.pop()
        stack.extend(n.children)
        if n.type == "return_statement":
            out.append(n)
    return out


def find_structure(kernel: Kernel, scope: Scope, helpers: dict[str, Node]) -> Structure:
    """Barriers (and whether each is reached by all threads), atomics, shuffles, votes."""
    c = _count(kernel.body, helpers, set())
    early = [r for r in _returns(kernel.body) if _thread_branch(r, kernel.body, scope)]
    divergent = []
    for b in c.barriers:
        if _thread_branch(b, kernel.body, scope) or any(r.start_byte < b.start_byte for r in early):
            divergent.append(b.start_point[0] + 1)
    pragmas = sum(
        1
        for line in kernel.body.text.decode().splitlines()
        if re.match(r"\s*(#|//)\s*pragma\s+unrol", line)  # parse() comments pragmas out
    )
    return Structure(
        syncthreads=len(c.barriers),
        divergent_lines=tuple(sorted(set(divergent))),
        syncwarps=c.syncwarps,
        atomics=c.atomics,
        warp_shuffles=c.shuffles,
        warp_votes=c.votes,
        cooperative_groups=c.cg,
        unroll_pragmas=pragmas,
    )


def contended_atomics(kernel: Kernel, accesses: list[Access], scope: Scope) -> list[Access]:
    """Global atomics whose address many threads may share (see the module docstring).

    `atomicAdd(&a[i], v)` is judged by its access's pattern; `atomicAdd(p, v)` and
    `atomicAdd(p + k, v)` on a pointer parameter `p` by whether the offset depends on the thread.
    """
    by_node = {a.node.id: a for a in accesses if a.kind == "atomic"}
    out = []
    stack = [kernel.body]
    while stack:
        n = stack.pop()
        stack.extend(n.children)
        if n.type != "call_expression" or not _ATOMIC.match(_callee(n)[0]):
            continue
        args = n.child_by_field_name("arguments")
        first = args.named_children[0] if args is not None and args.named_children else None
        if first is None or _one_thread_guard(n, scope):
            continue
        if first.type == "pointer_expression":  # &a[i]
            a = by_node.get(first.named_children[-1].id) if first.named_children else None
            if a is not None and a.space == "global" and a.pattern in ("broadcast", "unknown"):
                out.append(a)
            continue
        root = first
        while root.type in ("binary_expression", "parenthesized_expression"):
            root = root.named_children[0]
        if root.type == "identifier" and "*" in kernel.params.get(root.text.decode(), ""):
            if not thread_dependent(scope.value(first)):
                out.append(_pointer_atomic(n, first, root.text.decode()))
    return sorted(out, key=lambda a: a.line)


def _pointer_atomic(call: Node, arg: Node, array: str) -> Access:
    text = " ".join(call.text.decode().split())[:80]
    line = call.start_point[0] + 1
    return Access("global", array, line, text, "atomic", None, "0", "broadcast", 1, None, arg)


def _one_thread_guard(n: Node, scope: Scope) -> bool:
    """Whether `n` sits under an `if` whose test has `thread-dependent == block-uniform`."""
    p, child = n.parent, n
    while p is not None:
        if p.type in ("if_statement", "conditional_expression"):
            cond = p.child_by_field_name("condition")
            if cond is not None and cond != child and not _inside(child, cond):
                if _has_thread_equality(cond, scope):
                    return True
        if p.type == "function_definition":
            return False
        p, child = p.parent, p
    return False


def _has_thread_equality(cond: Node, scope: Scope) -> bool:
    stack = [cond]
    while stack:
        n = stack.pop()
        stack.extend(n.named_children)
        op = n.child_by_field_name("operator") if n.type == "binary_expression" else None
        if op is None or op.text != b"==":
            continue
        sides = [n.child_by_field_name("left"), n.child_by_field_name("right")]
        dep = [s is not None and thread_dependent(scope.value(s)) for s in sides]
        if dep.count(True) == 1:
            return True
    return False


def register_tile_elems(kernel: Kernel, scope: Scope) -> int:
    """Elements of the largest non-`__shared__` local array with constant extents that the
    kernel both writes and reads (0: none; an array never used earns nothing)."""
    sizes: dict[str, int] = {}
    stack = [kernel.body]
    while stack:
        n = stack.pop()
        stack.extend(n.children)
        if n.type != "declaration" or any(
            c.type in ("type_qualifier", "storage_class_specifier")
            and c.text in (b"__shared__", b"extern", b"static")
            for c in n.children
        ):
            continue
        for d in n.children_by_field_name("declarator"):
            if d.type == "init_declarator":
                d = d.child_by_field_name("declarator")
            size = 1
            while d is not None and d.type == "array_declarator":
                ext = d.child_by_field_name("size")
                v = scope.value(ext) if ext is not None else None
                if v is None or not v.is_Integer or int(v) <= 0:
                    size = 0
                    break
                size *= int(v)
                d = d.child_by_field_name("declarator")
            if d is not None and d.type == "identifier" and size > 1:
                sizes[d.text.decode()] = max(size, sizes.get(d.text.decode(), 0))
    used = _written_and_read(kernel.body, set(sizes))
    return max((v for k, v in sizes.items() if k in used), default=0)


def _written_and_read(body: Node, names: set[str]) -> set[str]:
    """The local arrays of `names` whose elements the kernel both assigns and reads."""
    reads: set[str] = set()
    writes: set[str] = set()
    stack = [body]
    while stack:
        n = stack.pop()
        stack.extend(n.children)
        if n.type != "subscript_expression" or (
            n.parent is not None and n.parent.type == "subscript_expression"
        ):
            continue
        root = n
        while root.type == "subscript_expression":
            root = root.child_by_field_name("argument")
        name = root.text.decode()
        if name not in names:
            continue
        par = n.parent
        if (
            par is not None
            and par.type == "assignment_expression"
            and (par.child_by_field_name("left") == n)
        ):
            writes.add(name)
            if par.child_by_field_name("operator").text != b"=":
                reads.add(name)
        elif par is not None and par.type == "update_expression":
            reads.add(name)
            writes.add(name)
        else:
            reads.add(name)
    return reads & writes
