"""Fast native CUDA for PyTorch→CUDA candidates: nvcc → shared library → ctypes, no torch headers.

`torch.utils.cpp_extension.load_inline` compiles against the torch headers and takes 15–50 s
per build. `load_cuda` compiles plain CUDA with `nvcc -O3 -shared` (1–2 s), caches the
library by content hash, and calls its `extern "C"` host functions through ctypes, passing
torch tensors as raw device pointers. This is cudaperf's *fast native form*; `EXAMPLE`
(below, also the example the refine prompts show) is a whole candidate file in it.

Rules of the form: kernels are launched on the default stream by `extern "C"` host functions
that take pointers and plain scalars; the forward allocates outputs and reshapes but computes
only in those kernels.

Guaranteed: a tensor argument must be a contiguous CUDA tensor (else `NativeCallError`), every
call is checked for arity and scalar types against the parsed prototype, a failed build raises
`NativeBuildError` with the nvcc log, and concurrent builds of one source (threads or
processes) end with one complete library. Not guaranteed: that the kernels are correct or that
a launch succeeded (the caller synchronises and checks, as the evaluator does).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import logging
import numbers
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cudaperf.toolchain import tool_version

__all__ = [
    "EXAMPLE",
    "NativeBuildError",
    "NativeCallError",
    "NativeFunction",
    "NativeLibrary",
    "load_cuda",
]

# A whole candidate file in the fast native form (a Model whose forward computes x * sigmoid(x)).
EXAMPLE = '''\
import torch
import torch.nn as nn

from cudaperf.execute.native import load_cuda

CUDA_SRC = r"""
__global__ void swish_kernel(const float* x, float* y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] / (1.0f + expf(-x[i]));
}

extern "C" void swish(const float* x, float* y, long long n) {
    int block = 256;
    swish_kernel<<<(unsigned)((n + block - 1) / block), block>>>(x, y, n);
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.lib = load_cuda(CUDA_SRC)

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.lib.swish(x, y, x.numel())  # tensors become device pointers, ints become long long
        return y
'''

log = logging.getLogger(__name__)

_LOG_LIMIT = 8000  # characters of nvcc output kept in a NativeBuildError

# C scalar types a host function may take or return (normalised: no qualifiers, one space).
_SCALARS: dict[str, type] = {
    name: getattr(ctypes, attr)
    for name, attr in (
        item.split("=")
        for item in (
            "bool=c_bool;char=c_char;signed char=c_byte;unsigned char=c_ubyte;short=c_short;"
            "unsigned short=c_ushort;int=c_int;signed=c_int;unsigned=c_uint;unsigned int=c_uint;"
            "long=c_long;unsigned long=c_ulong;long long=c_longlong;"
            "unsigned long long=c_ulonglong;size_t=c_size_t;int8_t=c_int8;uint8_t=c_uint8;"
            "int16_t=c_int16;uint16_t=c_uint16;int32_t=c_int32;uint32_t=c_uint32;"
            "int64_t=c_int64;uint64_t=c_uint64;float=c_float;double=c_double"
        ).split(";")
    )
}
_FLOATS = ("float", "double")


class NativeBuildError(RuntimeError):
    """nvcc failed (or is missing); `log` holds its output, truncated to the last 8000 chars."""

    def __init__(self, message: str, log: str = "") -> None:
        super().__init__(f"{message}\n{log}" if log else message)
        self.log = log


class NativeCallError(TypeError):
    """A native function was called with the wrong number or kinds of arguments."""


@dataclass(frozen=True)
class CParam:
    name: str  # parameter name ("" when the prototype omits it)
    ctype: str  # base type, normalised, e.g. "float", "unsigned int"
    pointer: bool  # passed as a pointer (a tensor on the Python side)


@dataclass(frozen=True)
class CPrototype:
    name: str  # function name
    restype: str  # "void", a scalar type, or "pointer"
    params: tuple[CParam, ...]


def _norm_type(text: str) -> str:
    words = [w for w in re.split(r"\s+", text.replace("*", " ")) if w]
    drop = set(
        "const volatile __restrict__ __restrict restrict struct __host__ static inline".split()
    )
    return " ".join(w for w in words if w not in drop)


def parse_prototypes(src: str) -> dict[str, CPrototype]:
    """The `extern "C"` functions of a CUDA source (definitions and declarations), by name.

    Uses tree-sitter-cuda; a source that the grammar cannot parse around an extern "C"
    function (an ERROR node) falls back to a regex over that function's head, which handles
    the plain C parameter lists this form allows (no function pointers, no macros in heads).
    Parsed once per source text (every `ModelNew` construction calls `load_cuda`).
    """
    return dict(_parse_prototypes(src))


@functools.lru_cache(maxsize=4096)
def _parse_prototypes(src: str) -> dict[str, CPrototype]:
    import tree_sitter
    import tree_sitter_cuda

    parser = tree_sitter.Parser(tree_sitter.Language(tree_sitter_cuda.language()))
    root = parser.parse(src.encode()).root_node
    protos: dict[str, CPrototype] = {}
    for node in _walk(root):
        if node.type != "linkage_specification" or b'"C"' not in node.text[:20]:
            continue
        body = node.child_by_field_name("body")
        items = body.named_children if body and body.type == "declaration_list" else [body]
        for item in items:
            if item is not None and item.type in ("function_definition", "declaration"):
                proto = _proto_from_node(item)
                if proto:
                    protos[proto.name] = proto
        if node.has_error:
            protos.update(_regex_prototypes(node.text.decode(errors="replace")))
    return protos


def _walk(node):
    yield node
    for child in node.children:
        yield from _walk(child)


def _proto_from_node(item) -> CPrototype | None:
    decl = item.child_by_field_name("declarator")
    pointer = False
    while decl is not None and decl.type in ("pointer_declarator", "reference_declarator"):
        pointer = True
        decl = decl.child_by_field_name("declarator")
    if decl is None or decl.type != "function_declarator":
        return None
    name = decl.child_by_field_name("declarator").text.decode()
    params = []
    for p in decl.child_by_field_name("parameters").named_children:
        if p.type != "parameter_declaration":
            return None  # variadic or unparsed: let the regex fallback decide
        ctype = _norm_type(p.child_by_field_name("type").text.decode())
        d = p.child_by_field_name("declarator")
        is_ptr = d is not None and any(n.type.endswith("pointer_declarator") for n in _walk(d))
        ids = [n for n in _walk(d) if n.type == "identifier"] if d is not None else []
        if ctype == "void" and not is_ptr and d is None:
            continue  # f(void)
        params.append(CParam(ids[-1].text.decode() if ids else "", ctype, is_ptr))
    restype = "pointer" if pointer else _norm_type(item.child_by_field_name("type").text.decode())
    return CPrototype(name, restype, tuple(params))


_HEAD = re.compile(r"([A-Za-z_][\w\s\*]*?)\b([A-Za-z_]\w*)\s*\(([^()]*)\)\s*[{;]")


def _regex_prototypes(text: str) -> dict[str, CPrototype]:
    text = re.sub(r"//[^\n]*|/\*.*?\*/", " ", text, flags=re.S)
    out = {}
    for ret, name, args in _HEAD.findall(text.replace('extern "C"', " ")):
        params = []
        for a in (a.strip() for a in args.split(",")):
            if not a or a == "void":
                continue
            m = re.match(r"(.*?)([A-Za-z_]\w*)$", a)
            head, pname = (m.group(1), m.group(2)) if m else (a, "")
            params.append(CParam(pname, _norm_type(head), "*" in head))
        restype = "pointer" if "*" in ret else _norm_type(ret)
        out[name] = CPrototype(name, restype or "void", tuple(params))
    return out


class NativeFunction:
    """One extern "C" function: checks and converts arguments, then calls through ctypes."""

    def __init__(self, proto: CPrototype, cfunc) -> None:
        self.proto = proto
        self._cfunc = cfunc
        types = [(f"parameter {p.name!r}", p.ctype) for p in proto.params if not p.pointer]
        for what, ctype in [*types, ("the return value", proto.restype)]:
            if ctype not in _SCALARS and ctype not in ("void", "pointer"):
                raise NativeCallError(
                    f"{proto.name}: {what} has type {ctype!r}, which this form cannot pass; "
                    f"use a pointer or one of {sorted(_SCALARS)}"
                )
        cfunc.argtypes = [ctypes.c_void_p if p.pointer else _SCALARS[p.ctype] for p in proto.params]
        res = proto.restype
        cfunc.restype = (
            None if res == "void" else ctypes.c_void_p if res == "pointer" else _SCALARS[res]
        )

    def __call__(self, *args):
        proto = self.proto
        if len(args) != len(proto.params):
            sig = ", ".join(f"{p.ctype}{'*' if p.pointer else ''} {p.name}" for p in proto.params)
            raise NativeCallError(
                f"{proto.name}({sig}) takes {len(proto.params)} arguments, got {len(args)}"
            )
        return self._cfunc(*(self._convert(p, a) for p, a in zip(proto.params, args, strict=True)))

    def _convert(self, p: CParam, a):
        where = f"{self.proto.name}: argument {p.name!r}"
        if p.pointer:
            if isinstance(a, ctypes.c_void_p):
                return a
            if not hasattr(a, "data_ptr"):
                raise NativeCallError(
                    f"{where} is a pointer; pass a CUDA tensor, got {type(a).__name__}"
                )
            if not getattr(a, "is_cuda", False):
                raise NativeCallError(
                    f"{where} must be a CUDA tensor, got one on {a.device}; move it with .cuda()"
                )
            if not a.is_contiguous():
                raise NativeCallError(f"{where} must be contiguous; call .contiguous() first")
            return ctypes.c_void_p(a.data_ptr())
        if isinstance(a, bool) or not isinstance(a, numbers.Real):
            raise NativeCallError(f"{where} is a {p.ctype}; got {type(a).__name__}")
        if p.ctype in _FLOATS:
            return float(a)
        if not isinstance(a, numbers.Integral):
            raise NativeCallError(f"{where} is an integer ({p.ctype}); got {a!r}")
        return int(a)


class NativeLibrary:
    """A built library; each extern "C" function of the source is an attribute."""

    def __init__(self, path: Path, protos: dict[str, CPrototype]) -> None:
        self.path = path
        self._cdll = ctypes.CDLL(str(path))
        self.functions: dict[str, NativeFunction] = {}
        for name, proto in protos.items():
            try:
                cfunc = getattr(self._cdll, name)
            except AttributeError:  # declared but not defined in this source: nothing to call
                log.debug('extern "C" %s is declared but not defined in %s', name, path)
                continue
            self.functions[name] = NativeFunction(proto, cfunc)

    def __getattr__(self, name: str) -> NativeFunction:
        funcs = self.__dict__.get("functions", {})
        if name in funcs:
            return funcs[name]
        raise AttributeError(
            f'no extern "C" function {name!r} in {self.path}; it defines {sorted(funcs)}'
        )


@functools.cache
def _default_arch() -> str:
    try:
        import torch

        if torch.cuda.is_available():
            major, minor = torch.cuda.get_device_capability()
            return f"sm_{major}{minor}"
    except ImportError:
        pass
    return "sm_90"


def load_cuda(
    src: str, *, arch: str | None = None, extra_flags=(), cache_dir=None
) -> NativeLibrary:
    """Compile `src` with nvcc into a cached shared library and bind its extern "C" functions.

    arch: e.g. "sm_90"; default: the current GPU's (via torch), else sm_90.
    extra_flags: more nvcc flags (part of the cache key).
    cache_dir: where builds live; default ~/.cache/cudaperf/native.
    """
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise NativeBuildError("nvcc not found on PATH; install the CUDA toolkit")
    arch = arch or _default_arch()
    flags = ["-O3", "-shared", "-Xcompiler", "-fPIC", f"-arch={arch}", *extra_flags]
    root = Path(cache_dir) if cache_dir else Path.home() / ".cache" / "cudaperf" / "native"
    key = hashlib.sha256("\0".join([src, *flags, tool_version(nvcc)]).encode()).hexdigest()[:24]
    build = root / key
    lib = build / "lib.so"
    protos = parse_prototypes(src)
    if not protos:
        raise NativeBuildError('the source defines no extern "C" function to call')
    if not lib.is_file():
        _build(nvcc, src, flags, root, build)
    else:
        log.debug("native build cache hit: %s", lib)
    return NativeLibrary(lib, protos)


def _build(nvcc: str, src: str, flags: list[str], root: Path, build: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=root))
    try:
        (tmp / "kernel.cu").write_text(src, encoding="utf-8")
        cmd = [nvcc, *flags, "-o", "lib.so", "kernel.cu"]
        log.info("nvcc build: %s", " ".join(cmd))
        res = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, check=False)
        if res.returncode != 0 or not (tmp / "lib.so").is_file():
            text = (res.stdout + res.stderr).strip()
            raise NativeBuildError(f"nvcc failed (exit {res.returncode})", text[-_LOG_LIMIT:])
        try:
            os.rename(tmp, build)  # atomic: readers see a complete folder or none
        except OSError:
            if not (build / "lib.so").is_file():  # not a lost race: a real failure
                raise
            log.debug("another process built %s first", build)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
