"""The tree-sitter front end: CUDA text out of a candidate, kernels, constants, launches.

A candidate is either CUDA source (a `.cu` file, a C→CUDA candidate) or a Python file (a
PyTorch→CUDA candidate) that holds its CUDA in string literals passed to
`torch.utils.cpp_extension.load_inline(cuda_sources=...)` or to cudaperf's native
`load_cuda(...)`. `extract_cuda` finds that text with Python's `ast`; `strip_torch_host`
blanks out torch includes and host functions using `torch::`/`at::` types so that nvcc
compiles the kernels without the torch headers. Blanking keeps every line where it was, so
line numbers stay valid.

Guaranteed: `find_kernels` returns every `function_definition` that carries `__global__`
(also inside templates, `extern "C"` blocks and namespaces), in source order.
Not guaranteed: macros are not expanded (only object-like numeric `#define`s are read as
constants); code that tree-sitter cannot parse is skipped.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import lru_cache

import sympy as sp
import tree_sitter as ts
import tree_sitter_cuda
from tree_sitter import Node

from cudaperf.analyze.index import Scope

__all__ = [
    "CudaText",
    "Kernel",
    "LaunchSite",
    "extract_cuda",
    "find_device_functions",
    "find_kernels",
    "find_launches",
    "parse",
    "read_constants",
    "strip_torch_host",
]


@lru_cache(maxsize=1)
def _parser() -> ts.Parser:
    return ts.Parser(ts.Language(tree_sitter_cuda.language()))


# `#pragma` lines become line comments of the same length before parsing: tree-sitter-cuda
# ends a brace-less `for (...)` at a `#pragma unroll` that precedes its body (the body becomes
# an empty statement and the inner loop a sibling), which breaks loop trip counts and scopes.
_PRAGMA = re.compile(r"^([ \t]*)#([ \t]*pragma\b[^\n]*?)(\\?)$", re.M)


def _pragma_comment(m: re.Match) -> str:
    body = m.group(2) + m.group(3)
    return m.group(1) + "//" + body[:-1]  # same length: `#` → `//`, last character dropped


def parse(code: str) -> ts.Tree:
    """Parse CUDA source into a tree-sitter tree (`#pragma` lines read as `//pragma` comments).

    Byte offsets and lines of the tree are those of `code`.
    """
    return _parser().parse(_PRAGMA.sub(_pragma_comment, code).encode())


@dataclass(frozen=True)
class CudaText:
    """CUDA source taken from a candidate, with a map back to the candidate's lines."""

    code: str  # the CUDA text (several Python literals are joined by newlines)
    from_python: bool  # True when it came out of a Python (PyTorch→CUDA) candidate
    segments: tuple[tuple[int, int], ...] = ()  # (first CUDA line, candidate line) per piece

    def candidate_line(self, line: int) -> int:
        """The candidate file's line for 1-based CUDA line `line`."""
        for first, at in reversed(self.segments):
            if line >= first:
                return at + (line - first)
        return line


_LOADERS = {"load_inline": "cuda_sources", "load_cuda": None}


def extract_cuda(text: str) -> CudaText:
    """The CUDA code of a candidate: the text itself, or the CUDA literals of a Python file."""
    if "__global__" in text and not _looks_python(text):
        return CudaText(text, False, ((1, 1),))
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return CudaText(text, False, ((1, 1),))
    strings = _string_assignments(tree)
    nodes: list[ast.expr] = []
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
        fname = getattr(call.func, "attr", None) or getattr(call.func, "id", None)
        if fname not in _LOADERS:
            continue
        kw = _LOADERS[fname]
        args = [k.value for k in call.keywords if k.arg in (kw, "source", "cuda_src", "code")]
        if kw is None and call.args:
            args.append(call.args[0])
        nodes += args
    literals = [lit for n in nodes for lit in _literals(n, strings)]
    if not literals:  # no loader call found: any literal that defines a kernel
        literals = [n for n in ast.walk(tree) if _is_str(n) and "__global__" in n.value]
    pieces, segments, line = [], [], 1
    for lit in sorted(set(literals), key=lambda n: n.lineno):
        segments.append((line, lit.lineno))
        pieces.append(lit.value)
        line += lit.value.count("\n") + 1
    return CudaText("\n".join(pieces), True, tuple(segments))


def _looks_python(text: str) -> bool:
    try:
        ast.parse(text)
    except SyntaxError:
        return False
    return True


def _is_str(n: ast.AST) -> bool:
    return isinstance(n, ast.Constant) and isinstance(n.value, str)


def _string_assignments(tree: ast.Module) -> dict[str, list[ast.Constant]]:
    out: dict[str, list[ast.Constant]] = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
            out.setdefault(n.targets[0].id, []).extend(s for s in ast.walk(n.value) if _is_str(s))
    return out


def _literals(n: ast.expr, strings: dict[str, list[ast.Constant]]) -> list[ast.Constant]:
    if _is_str(n):
        return [n]
    if isinstance(n, ast.Name):
        return strings.get(n.id, [])
    if isinstance(n, (ast.List, ast.Tuple)):
        return [lit for e in n.elts for lit in _literals(e, strings)]
    if isinstance(n, ast.BinOp):
        return _literals(n.left, strings) + _literals(n.right, strings)
    return []


_TORCH_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include[ \t]*[<\"](torch|ATen|c10|pybind11)/.*$", re.M)
_TORCH_WORDS = re.compile(r"\b(torch::|at::|c10::|PYBIND11_MODULE|TORCH_|Tensor\b)")


def strip_torch_host(code: str) -> str:
    """Blank out torch includes and top-level host code that uses torch types.

    Kernels and `__device__` functions are kept even if they mention torch; line numbers are
    unchanged (removed text becomes spaces).
    """
    code = _TORCH_INCLUDE.sub(lambda m: " " * len(m.group(0)), code)
    if not _TORCH_WORDS.search(code):
        return code
    raw = bytearray(code.encode())
    for node in parse(code).root_node.children:
        text = node.text.decode(errors="replace")
        if not _TORCH_WORDS.search(text) or _has_cuda_qualifier(node):
            continue
        for i in range(node.start_byte, node.end_byte):
            if raw[i] not in (10, 13):
                raw[i] = 32
    return raw.decode(errors="replace")


def _has_cuda_qualifier(node: Node) -> bool:
    stack = [node]
    while stack:
        n = stack.pop()
        if n.type in ("__global__", "__device__"):
            return True
        if n.type not in ("compound_statement",):
            stack.extend(n.children)
    return False


@dataclass(frozen=True)
class Kernel:
    """One `__global__` function."""

    name: str  # source name (no template arguments)
    line: int  # 1-based line of the definition
    node: Node  # the function_definition
    body: Node  # its compound_statement
    params: dict[str, str]  # parameter name → type text including '*' for pointers
    launch_bounds: tuple[int | None, int | None]  # (max threads, min blocks); None if absent


def _qualified(fn: Node, q: str) -> bool:
    return any(c.type == q for c in fn.children)


def _function_name(fn: Node) -> str | None:
    d = fn.child_by_field_name("declarator")
    while d is not None and d.type != "function_declarator":
        d = d.child_by_field_name("declarator")
    if d is None:
        return None
    name = d.child_by_field_name("declarator")
    return name.text.decode().split("::")[-1].split("<")[0] if name is not None else None


def _params(fn: Node) -> dict[str, str]:
    d = fn.child_by_field_name("declarator")
    while d is not None and d.type != "function_declarator":
        d = d.child_by_field_name("declarator")
    out: dict[str, str] = {}
    plist = d.child_by_field_name("parameters") if d is not None else None
    for p in plist.named_children if plist is not None else []:
        if p.type != "parameter_declaration":
            continue
        typ = p.child_by_field_name("type")
        decl, stars = p.child_by_field_name("declarator"), ""
        while decl is not None and decl.type != "identifier":
            if decl.type in ("pointer_declarator", "array_declarator"):
                stars += "*"
            decl = decl.child_by_field_name("declarator")
        if decl is not None and typ is not None:
            quals = " ".join(c.text.decode() for c in p.children if c.type == "type_qualifier")
            out[decl.text.decode()] = f"{quals} {typ.text.decode()}{stars}".strip()
    return out


def _functions(root: Node) -> list[Node]:
    out, stack = [], [root]
    while stack:
        n = stack.pop()
        if n.type == "function_definition":
            out.append(n)
            continue
        stack.extend(reversed(n.children))
    return out


def find_kernels(root: Node, consts: dict[str, sp.Expr]) -> list[Kernel]:
    """Every `__global__` function definition with a body, in source order."""
    out = []
    for fn in _functions(root):
        body = fn.child_by_field_name("body")
        name = _function_name(fn)
        if not _qualified(fn, "__global__") or body is None or name is None:
            continue
        lb = next((c for c in fn.children if c.type == "launch_bounds"), None)
        bounds: list[int | None] = [None, None]
        if lb is not None:
            scope = Scope({}, consts)
            for i, arg in enumerate(lb.named_children[:2]):
                v = scope.value(arg)
                bounds[i] = int(v) if v.is_Integer else None
        out.append(
            Kernel(name, fn.start_point[0] + 1, fn, body, _params(fn), (bounds[0], bounds[1]))
        )
    return out


def find_device_functions(root: Node) -> dict[str, Node]:
    """`__device__` function name → its body, for following calls from kernels."""
    out = {}
    for fn in _functions(root):
        name, body = _function_name(fn), fn.child_by_field_name("body")
        if name and body is not None and _qualified(fn, "__device__"):
            out[name] = body
    return out


def read_constants(root: Node) -> dict[str, sp.Expr]:
    """Numeric file-level constants: object-like `#define`s and const/constexpr integers."""
    consts: dict[str, sp.Expr] = {}
    for n in root.children:
        if n.type == "preproc_def" and n.child_by_field_name("value") is not None:
            text = n.child_by_field_name("value").text.decode().strip()
            expr = parse(f"int __v = {text};").root_node
            init = _first(expr, "init_declarator")
            if init is not None and init.child_by_field_name("value") is not None:
                v = Scope({}, consts).value(init.child_by_field_name("value"))
                if v.is_number:
                    consts[n.child_by_field_name("name").text.decode()] = v
        elif n.type == "declaration" and re.search(r"\b(const|constexpr)\b", n.text.decode()):
            for init in (c for c in n.named_children if c.type == "init_declarator"):
                name, val = (
                    init.child_by_field_name("declarator"),
                    init.child_by_field_name("value"),
                )
                if name is not None and name.type == "identifier" and val is not None:
                    v = Scope({}, consts).value(val)
                    if v.is_number:
                        consts[name.text.decode()] = v
    return consts


def _first(n: Node, typ: str) -> Node | None:
    stack = [n]
    while stack:
        m = stack.pop()
        if m.type == typ:
            return m
        stack.extend(reversed(m.children))
    return None


@dataclass(frozen=True)
class LaunchSite:
    """A `kernel<<<grid, block, smem, stream>>>(...)` launch found in host code."""

    kernel: str  # name of the launched kernel
    line: int  # 1-based line of the launch
    block_threads: int | None  # threads per block when the block argument folds to a constant
    block_x: int | None  # blockDim.x when known (a warp spans several rows when it is < 32)
    dynamic_smem: int | None  # dynamic shared memory bytes (0 when not given)


def launch_calls(root: Node, consts: dict[str, sp.Expr]):
    """Every triple-chevron launch in the file: (call node, its `<<<...>>>` arguments, the
    enclosing function's `Scope`, that function's body)."""
    for fn in _functions(root):
        body = fn.child_by_field_name("body")
        if body is None:
            continue
        scope: Scope | None = None
        stack = [body]
        while stack:
            n = stack.pop()
            stack.extend(n.children)
            if n.type != "call_expression":
                continue
            cfg = next((c for c in n.children if c.type == "kernel_call_syntax"), None)
            if cfg is None:
                continue
            scope = scope or Scope.of(body, _params(fn), consts)
            yield n, cfg.named_children, scope, body


def find_launches(root: Node, consts: dict[str, sp.Expr]) -> list[LaunchSite]:
    """Every triple-chevron launch in the file, with block size folded where possible."""
    out = []
    for n, args, scope, body in launch_calls(root, consts):
        name = n.child_by_field_name("function").text.decode().split("<")[0].split("::")[-1]
        dims = _block_dims(args[1], scope, body) if len(args) > 1 else None
        smem = scope.value(args[2]) if len(args) > 2 else sp.Integer(0)
        out.append(
            LaunchSite(
                name,
                n.start_point[0] + 1,
                int(sp.Mul(*dims)) if dims else None,
                dims[0] if dims else None,
                int(smem) if smem.is_Integer else None,
            )
        )
    return sorted(out, key=lambda s: s.line)


def dim_values(arg: Node, scope: Scope, body: Node) -> list[sp.Expr]:
    """The extents of a launch's grid or block argument as expressions: one for a number, an
    expression or an int variable; one per given extent of `dim3 b(x, y)` or `dim3(x, y)`."""
    dims: list[Node] | None = None
    if arg.type == "call_expression" and arg.child_by_field_name("function").text == b"dim3":
        dims = arg.child_by_field_name("arguments").named_children
    elif arg.type == "identifier":
        dims = _dim3_decl(arg.text.decode(), body)
    if dims is None:
        return [scope.value(arg)]
    return [
        scope.value(d) if d.type != "parameter_declaration" else _text_value(d.text, scope)
        for d in dims
    ]


def _block_dims(arg: Node, scope: Scope, body: Node) -> list[int] | None:
    """Block extents from a number, an int variable, `dim3 b(x, y)` or `dim3(x, y)`."""
    vals = dim_values(arg, scope, body)
    if vals and all(v.is_Integer and v > 0 for v in vals):
        return [int(v) for v in vals]
    return None


def _text_value(text: bytes, scope: Scope) -> sp.Expr:
    """Value of a source snippet (a `dim3 b(X, Y)` argument) from constants and simple locals."""
    env = dict(scope.consts)
    for name, defs in scope.defs.items():
        if len(defs) == 1 and defs[0].value is not None:
            env[name] = scope.value(defs[0].value)
    init = _first(parse(f"int __v = {text.decode()};").root_node, "init_declarator")
    val = init.child_by_field_name("value") if init is not None else None
    return Scope({}, env).value(val) if val is not None else sp.Symbol("unknown")


def _dim3_decl(name: str, body: Node) -> list[Node] | None:
    stack = [body]
    while stack:
        n = stack.pop()
        stack.extend(n.children)
        if n.type != "declaration" or n.child_by_field_name("type").text != b"dim3":
            continue
        for init in n.named_children:
            d = (
                init.child_by_field_name("declarator")
                if init.type in ("init_declarator", "function_declarator")
                else None
            )
            if d is None or d.text.decode() != name:
                continue
            if init.type == "function_declarator":  # `dim3 b(X, Y)` parses as a declaration
                return init.child_by_field_name("parameters").named_children
            val = init.child_by_field_name("value")
            if val is not None and val.type == "call_expression":  # dim3 b = dim3(16, 16)
                val = val.child_by_field_name("arguments")
            if val is not None and val.type in ("argument_list", "initializer_list"):
                return val.named_children
    return None
