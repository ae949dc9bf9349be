"""BabelTower `cuda_wrapper` → our candidate shape (an extern "C" launcher on device pointers).

A row's wrapper is a host function with the C function's parameters: it allocates device
copies (`cudaMalloc`), copies inputs in and results out (`cudaMemcpy`), launches the row's
kernel and frees. In our shape the arrays already live on the device, so the adapted launcher
keeps the wrapper's launch code (grid/block arithmetic, scratch buffers, the launch itself)
and drops the allocations and copies of the device copies that mirror a parameter, renaming
those device copies to the parameter. Host staging buffers that mirror a parameter the same
way (`new[]` / `malloc`, `memcpy` in or out, `delete[]` / `free`; the wrapper then launches
on host memory) are dropped likewise. The wrapper's own array sizes (`cudaMalloc` /
`cudaMemcpy` byte counts over its scalar parameters) are returned too: the importer uses
them as candidate array lengths. A parameter array whose contents the wrapper only reads on
the host (a count in `n[0]` sizing the grid, a scan for the largest bin sizing an allocation),
that no launched kernel writes and whose element count the wrapper's copies give, is read from
a host copy the launcher makes on entry (malloc + cudaMemcpy from the device, freed at the
end); in launch shapes `count_name(a)` stands for such a copy's element 0.

Guaranteed: every wrapper either yields a launcher or a one-line reason. Not guaranteed:
that the launcher computes what the C function does (the evaluator checks that).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from cudaperf.tasks.importers.ctok import (
    access_modes,
    find_close,
    format_c,
    functions,
    parse_param,
    split_top,
    tokenize,
)
from cudaperf.tasks.model import Task

__all__ = ["Launcher", "adapt_wrapper", "count_name"]

_HOST_MEMORY = {"malloc", "calloc", "free", "new", "delete", "memcpy", "std", "memset"}
_DROP_CALLS = {"cudaMalloc", "cudaMemcpy", "cudaFree", "memcpy", "free"}
_ALLOCS = {"malloc", "calloc", "new"}


@dataclass
class Launcher:
    """The adapted implementation, or why there is none."""

    code: str = ""  # full candidate source (kernel code + extern "C" launcher)
    reason: str = ""  # non-empty when no launcher could be made
    sizes: dict[str, str] = field(default_factory=dict)  # param → element count ('' unknown)
    written: set[str] = field(default_factory=set)  # array params a launched kernel may write
    # per launch: grid (x, y, z) and block (x, y, z) as expressions over the scalar
    # parameters ('' where the wrapper's arithmetic is not plain integer arithmetic)
    shapes: list[tuple[tuple[str, ...], tuple[str, ...]]] = field(default_factory=list)
    unguarded: bool = False  # a launched kernel has no condition: every thread touches memory
    # every such kernel ignores blockIdx: all blocks touch the same elements (one block counts)
    same_blocks: bool = False


def _statements(body: list[str]) -> list[list[str]]:
    out, cur, i = [], [], 0
    while i < len(body):
        t = body[i]
        if t in ("for", "while", "if", "switch") and not cur:
            j = find_close(body, i + 1) + 1
            if j < len(body) and body[j] == "{":
                j = find_close(body, j) + 1
                while body[j : j + 2] == ["else", "{"] or body[j : j + 1] == ["else"]:
                    j = (
                        find_close(body, j + 1) + 1
                        if body[j + 1] == "{"
                        else body.index(";", j) + 1
                    )
                out.append(body[i:j])
                i = j
                continue
        if t in ("(", "[", "{"):
            j = find_close(body, i)
            cur.extend(body[i : j + 1])
            i = j + 1
            continue
        cur.append(t)
        if t == ";":
            out.append(cur)
            cur = []
        i += 1
    return out + ([cur] if cur else [])


def _ident(arg: list[str]) -> str:
    """The variable an argument such as `(void**)&d_x` or `const_cast<float*>(d_x)` names."""
    names = [t for t in arg if re.fullmatch(r"[A-Za-z_]\w*", t)]
    names = [t for t in names if t not in ("void", "const_cast", "float", "int", "double")]
    return names[-1] if names else ""


def _map_device_copies(stmts: list[list[str]], params: list[str]) -> tuple[dict, dict]:
    """device local → parameter (from cudaMemcpy), and per local the byte-size tokens."""
    to_param: dict[str, str] = {}
    sizes: dict[str, list[str]] = {}
    for st in stmts:
        if st[:2] not in (["cudaMalloc", "("], ["cudaMemcpy", "("], ["memcpy", "("]):
            continue
        args = split_top(st[2 : find_close(st, 1)])
        if st[0] == "cudaMalloc" and len(args) == 2:
            sizes.setdefault(_ident(args[0]), args[1])
        elif len(args) == 4 or (st[0] == "memcpy" and len(args) == 3):
            dst, src = _ident(args[0]), _ident(args[1])
            kind = args[3] if len(args) == 4 else ["memcpy"]
            to_dev = "cudaMemcpyHostToDevice" in kind or (kind == ["memcpy"] and dst not in params)
            to_host = "cudaMemcpyDeviceToHost" in kind or (kind == ["memcpy"] and dst in params)
            if to_dev and src in params and dst not in params:
                to_param[dst] = src
            elif to_host and dst in params and src not in params:
                to_param[src] = dst
            sizes.setdefault(dst if dst not in params else src, args[2])
    return to_param, sizes


def _declared_names(st: list[str]) -> list[str]:
    eq = [p[: p.index("=")] if "=" in p else p for p in split_top(st[:-1])]
    return [p[-1] for p in eq if p]


def _drop(st: list[str], mapped: dict[str, str]) -> list[str] | None:
    """The statement without what mirrors a parameter (None: drop it entirely)."""
    if st and st[0] in _DROP_CALLS and len(st) > 2:
        args = split_top(st[2 : find_close(st, 1)])
        if any(_ident(a) in mapped for a in args[:2]):
            return None
    if st[:1] == ["delete"] and _ident(st) in mapped:  # `delete [ ] staged ;`
        return None
    if st[1:2] == ["="] and st[0] in mapped and _ALLOCS & set(st):  # `staged = malloc(...)`
        return None
    head = st[: st.index("=")] if "=" in st else st[:-1]
    is_decl = st[-1:] == [";"] and "*" in head and "(" not in head and head[0] not in mapped
    if is_decl and any(n in mapped for n in _declared_names(st)):
        parts = split_top(st[:-1])
        keep = [p for p, n in zip(parts, _declared_names(st), strict=True) if n not in mapped]
        if not keep:
            return None
        typ = [t for t in parts[0][: parts[0].index(_declared_names(st)[0])] if t != "*"]
        out: list[str] = []
        for k in keep:
            out += (k if k is parts[0] else typ + k) + [";"]
        return out
    return st


def _launch(stmts: list[list[str]]) -> tuple[int, list[str]] | None:
    for i, st in enumerate(stmts):
        if "<<<" in st:
            return i, st
    return None


def _host_reason(stmts: list[list[str]], arrays: set[str]) -> str:
    for st in stmts:
        if any(t in _HOST_MEMORY for t in st):
            return "wrapper stages data through host memory"
        if _host_read_sites(st, arrays):
            return "wrapper reads or writes array contents on the host"
    return ""


def _host_part(st: list[str]) -> list[str]:
    """What of a statement runs on the host (a launch's kernel arguments are on device)."""
    return st[: st.index(">>>")] if ">>>" in st else st


def _host_read_sites(st: list[str], names: set[str]) -> list[int]:
    """Positions in the host part of `st` where an array in `names` is subscripted or
    dereferenced (its contents used on the host)."""
    host = _host_part(st)
    return [
        i
        for i, t in enumerate(host)
        if t in names and (host[i + 1 : i + 2] == ["["] or host[i - 1 : i] == ["*"])
    ]


def _stageable(
    stmts: list[list[str]],
    arrays: set[str],
    kernel_written: set[str],
    sizes: dict[str, str],
    rename: dict[str, str],
) -> dict[str, str]:
    """Parameter arrays whose contents the wrapper only reads on the host (e.g. a count in
    `n[0]` sizing the grid, a scan for the largest index sizing an allocation), that no
    launched kernel writes and whose element count the wrapper's own copies give: the
    launcher can read them from a host copy made on entry. {wrapper name: element count}."""
    host = [t for st in stmts for t in _host_part(st) + [";"]]
    read = {n for st in stmts for n in (_host_part(st)[i] for i in _host_read_sites(st, arrays))}
    modes = access_modes(host, sorted(read))
    early = "return" in host  # the copy made on entry must be freed at the end
    return {
        n: sizes[rename[n]]
        for n in sorted(read)
        if not modes[n][1] and n not in kernel_written and sizes.get(rename[n]) and not early
    }


def _staged(
    stmts: list[list[str]], staged: dict[str, str], rename: dict[str, str], task: Task
) -> tuple[list[str], list[list[str]], dict[str, str]]:
    """(the tokens that make a host copy of each staged array on entry: malloc, cudaMemcpy
    from the device; over the task's names), `stmts` with the host reads of those arrays
    taken from the copies, which are freed at the end, and {host copy: task array})."""
    if not staged:
        return [], stmts, {}
    taken = {t for st in stmts for t in st} | {p.name for p in task.signature} | set(rename)
    ctype = {p.name: p.ctype for p in task.signature}
    host_name, prologue = {}, []
    for w, count in staged.items():
        c = rename[w]
        h = f"h_{c}"
        while h in taken:
            h += "_"
        taken.add(h)
        host_name[w] = h
        t, nbytes = ctype[c], f"(size_t)({count}) * sizeof({ctype[c]})"
        prologue += tokenize(
            f"{t}* {h} = ({t}*)malloc({nbytes}); "
            f"cudaMemcpy({h}, {c}, {nbytes}, cudaMemcpyDeviceToHost);"
        )
    out = []
    for st in stmts:
        sites = set(_host_read_sites(st, set(staged)))
        out.append([host_name[t] if i in sites else t for i, t in enumerate(st)])
    out += [tokenize(f"free({h});") for h in host_name.values()]
    return prologue, out, {h: rename[w] for w, h in host_name.items()}


def count_name(array: str) -> str:
    """The size name standing for `array[0]` (a count stored in an array) in launch shapes."""
    return f"{array}_0"


def _counts_named(st: list[str], copies: dict[str, str]) -> list[str]:
    """`h [ 0 ]` of a host copy `h` of array `a` as the name `count_name(a)`."""
    out, i = [], 0
    while i < len(st):
        if st[i] in copies and st[i + 1 : i + 4] == ["[", "0", "]"]:
            out.append(count_name(copies[st[i]]))
            i += 4
            continue
        out.append(st[i])
        i += 1
    return out


def adapt_wrapper(wrapper: str, cuda_code: str, task: Task) -> Launcher:
    """Build the launcher for `task` (whose signature parallels the wrapper's)."""
    toks = tokenize(wrapper)
    fns = [f for f in functions(toks) if "<<<" in toks[f.body[0] : f.body[1]]]
    if not fns:
        return Launcher(reason="wrapper never launches a kernel")
    fn = fns[-1]
    wparams = [parse_param(p).name for p in fn.params]
    if len(wparams) != len(task.signature):
        return Launcher(reason="wrapper and C function take different parameters")
    rename = {w: p.name for w, p in zip(wparams, task.signature, strict=True)}
    stmts = _statements(toks[fn.body[0] + 1 : fn.body[1]])
    mapped, size_toks = _map_device_copies(stmts, wparams)
    for local, param in mapped.items():
        rename[local] = rename[param]
    defs = _local_defs(stmts)
    sizes = {rename[n]: length_expr(s, defs, rename) for n, s in size_toks.items() if n in rename}
    kept = [s for s in (_drop(st, mapped) for st in stmts) if s]
    found = _launch(kept)
    if found is None:
        return Launcher(reason="wrapper never launches a kernel", sizes=sizes)
    kernel = found[1][0]
    ctoks = tokenize(cuda_code)
    kernels = {f.name for f in functions(ctoks) if "__global__" in f.ret}
    if kernel not in kernels:
        return Launcher(reason="wrapper launches a kernel that cuda_code does not define")
    arrays = {w for w, p in zip(wparams, task.signature, strict=True) if p.is_array}
    ctoks = _rename_functions(ctoks, task.entry, rename)
    body = [t for st in kept for t in _renamed(st, rename)]
    written = _kernel_writes(body, ctoks, {p.name for p in task.signature if p.is_array})
    staged = _stageable(kept, arrays, {w for w in arrays if rename[w] in written}, sizes, rename)
    reason = _host_reason(kept, (arrays | set(mapped)) - set(staged))
    if reason:
        return Launcher(reason=reason, sizes=sizes)
    prologue, kept, copies = _staged(kept, staged, rename, task)
    renamed = [_renamed(st, rename) for st in kept]
    body = prologue + [t for st in renamed for t in st]
    unguarded = _unguarded(renamed, ctoks)
    counted = [_counts_named(st, copies) for st in renamed]
    return Launcher(
        code=_render(task, ctoks, body),
        sizes=sizes,
        written=written,
        shapes=launch_shapes(counted),
        unguarded=bool(unguarded),
        same_blocks=bool(unguarded) and not any("blockIdx" in k for k in unguarded),
    )


def _unguarded(stmts: list[list[str]], ctoks: list[str]) -> list[list[str]]:
    """The bodies of the launched kernels without a bounds check: no `if`/`?:`/`return`/
    `while`, and no `for` over a thread index (a grid-stride loop's condition is a bounds
    check)."""
    defs = {f.name: f for f in functions(ctoks)}
    out = []
    for st in stmts:
        if "<<<" in st and st.index("<<<") > 0 and st[st.index("<<<") - 1] in defs:
            f = defs[st[st.index("<<<") - 1]]
            kbody = ctoks[f.body[0] : f.body[1] + 1]
            if not {"if", "while", "?", "return", "switch"} & set(kbody) and not _thread_loop(
                kbody
            ):
                out.append(kbody)
    return out


def _thread_loop(kbody: list[str]) -> bool:
    """A `for` whose head names threadIdx/blockIdx or a local computed from them."""
    thread = {"threadIdx", "blockIdx"}
    for i, t in enumerate(kbody):  # `T v = ... threadIdx ... ;`
        if t == "=" and re.fullmatch(r"[A-Za-z_]\w*", kbody[i - 1]):
            end = kbody.index(";", i) if ";" in kbody[i:] else len(kbody)
            if thread & set(kbody[i:end]):
                thread.add(kbody[i - 1])
    for i, t in enumerate(kbody):
        if t == "for" and kbody[i + 1 : i + 2] == ["("]:
            if thread & set(kbody[i + 2 : find_close(kbody, i + 1)]):
                return True
    return False


def launch_shapes(stmts: list[list[str]]) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    """Grid and block dimensions of each `<<<grid, block>>>` launch, over the parameters."""
    defs = _local_defs([st for st in stmts if st[:1] != ["dim3"]])
    dims: dict[str, list[list[str]]] = {}
    for st in stmts:
        if st[:1] == ["dim3"] and st[-1:] == [";"]:
            for decl in split_top(st[1:-1]):
                if decl[1:2] == ["("]:
                    dims[decl[0]] = split_top(decl[2 : find_close(decl, 1)])
                elif decl[1:4] == ["=", "dim3", "("]:
                    dims[decl[0]] = split_top(decl[4 : find_close(decl, 3)])
                elif decl[1:2] == ["="]:
                    dims[decl[0]] = [decl[2:]]
    out = []
    for st in stmts:
        if "<<<" not in st or ">>>" not in st:
            continue
        cfg = split_top(st[st.index("<<<") + 1 : st.index(">>>")])
        if len(cfg) < 2:
            continue
        grid, block = (_dim3(c, dims, defs) for c in cfg[:2])
        out.append((grid, block))
    return out


def _dim3(arg: list[str], dims: dict, defs: dict) -> tuple[str, ...]:
    if len(arg) == 1 and arg[0] in dims:
        comps = dims[arg[0]]
    elif arg[:2] == ["dim3", "("]:
        comps = split_top(arg[2 : find_close(arg, 1)])
    else:
        comps = [arg]
    comps = (comps + [["1"], ["1"]])[:3]
    return tuple(_int_expr(c, dims, defs) for c in comps)


def _int_expr(toks: list[str], dims: dict, defs: dict) -> str:
    """An integer expression in the length-expression syntax, or ''."""
    flat: list[str] = []
    i = 0
    while i < len(toks):  # `d . x` of a dim3 local → its component
        if (
            toks[i] in dims
            and toks[i + 1 : i + 2] == ["."]
            and toks[i + 2 : i + 3]
            in (
                ["x"],
                ["y"],
                ["z"],
            )
        ):
            comps = dims[toks[i]] + [["1"], ["1"]]
            flat += ["(", *comps["xyz".index(toks[i + 2])], ")"]
            i += 3
            continue
        flat.append(toks[i])
        i += 1
    text = " ".join(t.rstrip("uUlL") if t[0].isdigit() else t for t in _expand(flat, defs, 0))
    text = re.sub(r"\(\s*(unsigned\s+)?(int|long|size_t)\s*\)", "", text)  # integer casts
    return text if re.fullmatch(r"[\w\s+\-*/%()]+", text) and "." not in text else ""


def _rename_functions(ctoks: list[str], entry: str, rename: dict[str, str]) -> list[str]:
    """Rename the kernel that shares the C function's name, and every `cudaXxx` function.

    The candidate defines `entry` itself, and the evaluator's static checks reject a candidate
    that defines a function named like a CUDA runtime API (`cudaXxx`: it could replace a timer
    or a synchronisation); BabelTower's kernels are often named `cudaXxx` after the C `cpuXxx`.
    """
    taken, new_names = set(ctoks), {}
    for f in functions(ctoks):
        if f.name == entry or re.fullmatch(r"cuda[A-Z]\w*", f.name):
            new = f"{f.name}_kernel" if f.name == entry else f"bt_{f.name}"
            while new in taken:
                new += "_"
            new_names[f.name] = new
            taken.add(new)
    rename.update(new_names)
    return [new_names.get(t, t) for t in ctoks]


def _kernel_writes(body: list[str], ctoks: list[str], arrays: set[str]) -> set[str]:
    """The array parameters passed to a kernel parameter that the kernel may write."""
    defs = {f.name: f for f in functions(ctoks)}
    out: set[str] = set()
    for i, t in enumerate(body):
        if t != ">>>" or body[i + 1 : i + 2] != ["("] or i < 2:
            continue
        starts = [k for k in range(i) if body[k] == "<<<"]
        fn = defs.get(body[starts[-1] - 1]) if starts else None
        if fn is None:
            continue
        args = split_top(body[i + 2 : find_close(body, i + 1)])
        names = []
        for prm in fn.params:
            try:
                names.append(parse_param(prm).name)
            except ValueError:
                names.append("")
        modes = access_modes(ctoks[fn.body[0] : fn.body[1] + 1], [n for n in names if n])
        for n, arg in zip(names, args, strict=False):
            if n and modes[n][1] and _ident(arg) in arrays:
                out.add(_ident(arg))
    return out


def _renamed(st: list[str], rename: dict[str, str]) -> list[str]:
    """Identifiers renamed, except struct members (`x.y`, `p->y`)."""
    return [t if i and st[i - 1] in (".", "->") else rename.get(t, t) for i, t in enumerate(st)]


def length_expr(size: list[str], defs: dict[str, list[str]], rename: dict[str, str]) -> str:
    """A byte count such as `n * sizeof ( float )` as an element-count expression, or ''."""
    toks = _expand(size, defs, 0)
    out: list[str] = []
    i = 0
    while i < len(toks):
        if toks[i] == "sizeof" and toks[i + 1 : i + 2] == ["("]:
            i = find_close(toks, i + 1) + 1
            if out and out[-1] == "*":
                out.pop()
            elif toks[i : i + 1] == ["*"]:
                i += 1
            else:
                out.append("1")
            continue
        if toks[i] == "(" and toks[i + 1 : i + 2] in (["size_t"], ["int"], ["long"]):
            i = find_close(toks, i) + 1
            continue
        out.append(rename.get(toks[i], toks[i]))
        i += 1
    if out[:1] == ["("] and find_close(out, 0) == len(out) - 1:
        out = out[1:-1]
    text = " ".join(t.rstrip("uUlL") if t[0].isdigit() else t for t in out)
    return text if re.fullmatch(r"[\w\s+\-*/%()]+", text) else ""


def _expand(toks: list[str], defs: dict[str, list[str]], depth: int) -> list[str]:
    if depth > 4:
        return toks
    out: list[str] = []
    for t in toks:
        out += ["(", *_expand(defs[t], defs, depth + 1), ")"] if t in defs else [t]
    return out


def _local_defs(stmts: list[list[str]]) -> dict[str, list[str]]:
    """`T name = expr ;` definitions of the wrapper (scalars only)."""
    defs = {}
    for st in stmts:
        if "=" in st and st[-1] == ";" and "*" not in st[: st.index("=")]:
            head = st[: st.index("=")]
            if len(head) >= 2 and re.fullmatch(r"[A-Za-z_]\w*", head[-1]) and "(" not in head:
                defs[head[-1]] = st[st.index("=") + 1 : -1]
    return defs


def _render(task: Task, kernel_toks: list[str], body: list[str]) -> str:
    helper = f"{task.entry}_launch"
    params = ", ".join(f"{p.ctype}{'*' if p.is_array else ''} {p.name}" for p in task.signature)
    args = ", ".join(f"({p.ctype}*){p.name}" if p.is_array else p.name for p in task.signature)
    launcher = tokenize(f"static void {helper}({params}) {{") + body + ["}"]
    return (
        "// Kernel from BabelTower; launched as the row's cuda_wrapper launches it, on the\n"
        "// task's device arrays (the wrapper's device copies, cudaMalloc/cudaMemcpy/cudaFree\n"
        "// of them, are removed).\n"
        + format_c(kernel_toks)
        + "\n"
        + format_c(launcher)
        + "\n"
        + task.c_prototype()
        + " {\n"
        + f"    {helper}({args});\n"
        + "}\n"
    )
