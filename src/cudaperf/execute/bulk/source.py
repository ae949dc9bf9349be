"""CUDA sources of `cudaperf data measure`: batch libraries and the device runtime library.

A *batch library* holds many C→CUDA implementations (of many tasks) in one translation unit,
so one nvcc invocation compiles them all. Each implementation is wrapped in its own namespace
`cp_impl<k>_ns` after a prelude that already includes the standard headers and every header
any implementation of the batch includes (an implementation's own `#include` lines are blanked,
so no header is ever included inside a namespace). Its `extern "C"` markers are removed, so the
entry and every helper become namespaced and two implementations may both define `map_kernel`
or `elem`. Before the code the task's prototype is declared (without `extern "C"`): an entry
whose signature does not match is an overload the shim never calls, which is a link error
(`undefined reference to cp_impl<k>_ns::f(...)`), as a mismatch is in the evaluator's harness.
Macros an implementation `#define`s are `#undef`ined after its namespace. Line numbers are
kept (`#line 1 "cp<k>/candidate.cu"`), so compiler messages name the implementation and line.

The library exports (see `BATCH_DRIVER`):

    int   cp_count(void);                 // implementations in the library
    void* cp_fn(int k);                   // shim `void(void** args)` of implementation k
    int   cp_call(int k, void** args, char* err, int errlen);   // one checked call
    int   cp_time(int k, void** args, int warmup, int trials, double budget_ms,
                  void* flush, long long flush_bytes, float* ev_ms, double* wall_ms,
                  int* done, char* err, int errlen);

`args[i]` is a device pointer (arrays) or a host pointer to the value (scalars), as in the
evaluator's harness (`cudaperf.execute.c.harness`), whose timing loop `cp_time` repeats: warm-up
calls, then per trial an L2 flush (memset of `flush`, 2x the L2), a device-wide sync, a start
event, the call, an end event, a device-wide sync, and the host wall time as a cross-check;
at least 5 trials, then until `trials` or `budget_ms`. Unlike the harness, device buffers are
owned by the caller (`cudaperf.execute.bulk.runner`), so inputs are uploaded once per
task and config, not once per implementation.

The *runtime library* (`RUNTIME_SOURCE`, compiled once per run) gives the runner memory
helpers and the output comparison on the device, with the same rule as
`cudaperf.execute.c.reference.compare` (see `cprt_compare`); its host twin `cprt_compare_host`
runs the very same element rule on the CPU so tests can check it against `compare`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cudaperf.execute.c.harness import driver_helpers, trial_loop, unpack_args, warmup_loop
from cudaperf.tasks.model import Task

__all__ = [
    "BATCH_FILE",
    "RUNTIME_FILE",
    "BatchUnit",
    "DTYPE_CODES",
    "attribute_failures",
    "batch_source",
    "hoist_includes",
    "macro_names",
    "namespace_of",
    "strip_extern_c",
    "unit_file",
    "unit_log",
    "wrap_implementation",
]

# numpy dtype name -> code the runtime library's compare/diff kernels take
DTYPE_CODES = {
    "float32": 0,
    "float64": 1,
    "int8": 2,
    "uint8": 3,
    "int16": 4,
    "uint16": 5,
    "int32": 6,
    "uint32": 7,
    "int64": 8,
    "uint64": 9,
}

PRELUDE = """\
#include <cuda_runtime.h>
#include <stdint.h>
#include <stddef.h>
#include <math.h>
#include <float.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cstdint>
#include <cstddef>
#include <cmath>
#include <cfloat>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <chrono>
"""

BATCH_FILE = "cp_batch.cu"  # file name compiler messages use for the generated glue
RUNTIME_FILE = "cp_runtime.so"  # library name of the runtime library in the build cache


@dataclass(frozen=True)
class BatchUnit:
    """One implementation placed in a batch library at index `k`."""

    k: int  # index in the library's table (cp_fn(k))
    task: Task  # its task (for the prototype and the argument unpacking)
    impl_id: str  # Implementation.id
    code: str  # the implementation's source


def namespace_of(k: int) -> str:
    """The namespace of unit k; the trailing `_ns` keeps the index unambiguous in mangled
    names (`cp_impl1_ns3foo` cannot be read as unit 13)."""
    return f"cp_impl{k}_ns"


def unit_file(k: int) -> str:
    """The file name compiler messages use for unit k's lines (ends in the evaluator's
    `candidate.cu`, so `cudaperf.execute.build.first_error` reads them)."""
    return f"cp{k}/candidate.cu"


_COMMENT_OR_STRING = re.compile(
    r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", re.S
)
_EXTERN_C = re.compile(r"\bextern\s*\"C\"")


def _blank(text: str) -> str:
    """Same length and newlines, no content (keeps offsets and line numbers)."""
    return re.sub(r"[^\n]", " ", text)


def _code_mask(code: str) -> str:
    """`code` with comments and string/char literals blanked, except the "C" of extern "C"."""
    out, pos = [], 0
    for m in _COMMENT_OR_STRING.finditer(code):
        out.append(code[pos : m.start()])
        tok = m.group(0)
        keep = tok == '"C"' and re.search(r"\bextern\s*$", code[max(0, m.start() - 40) : m.start()])
        out.append(tok if keep else _blank(tok))
        pos = m.end()
    out.append(code[pos:])
    return "".join(out)


def strip_extern_c(code: str) -> str:
    """Remove every `extern "C"` (also the block form `extern "C" { ... }`, whose braces go
    too); comments and strings are left alone, lines keep their numbers."""
    mask = _code_mask(code)
    chars = list(code)
    for m in _EXTERN_C.finditer(mask):
        for i in range(m.start(), m.end()):
            chars[i] = " "
        j = m.end()
        while j < len(mask) and mask[j] in " \t\r\n":
            j += 1
        if j < len(mask) and mask[j] == "{":
            close = _matching_brace(mask, j)
            if close is None:
                raise ValueError('unbalanced braces after extern "C" {')
            chars[j] = " "
            chars[close] = " "
    return "".join(chars)


def _matching_brace(mask: str, open_at: int) -> int | None:
    depth = 0
    for i in range(open_at, len(mask)):
        if mask[i] == "{":
            depth += 1
        elif mask[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    return None


_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include[ \t]*([<\"][^>\"\n]+[>\"])[^\n]*$", re.M)
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)", re.M)


def hoist_includes(code: str) -> tuple[str, list[str]]:
    """(code with its `#include` lines blanked, the included headers in order)."""
    headers = [m.group(1) for m in _INCLUDE.finditer(code)]
    return _INCLUDE.sub("", code), headers


def macro_names(code: str) -> list[str]:
    """Names the code `#define`s (undefined again after its namespace)."""
    return sorted(set(_DEFINE.findall(code)))


def wrap_implementation(unit: BatchUnit) -> tuple[str, list[str]]:
    """(the namespaced implementation, the headers it included)."""
    code, headers = hoist_includes(unit.code)
    code = strip_extern_c(code)
    proto = unit.task.c_prototype().replace('extern "C" ', "", 1)
    ns = namespace_of(unit.k)
    undef = "".join(f"#undef {name}\n" for name in macro_names(unit.code))
    text = (
        f"namespace {ns} {{\n{proto};\n"
        f'#line 1 "{unit_file(unit.k)}"\n{code.rstrip()}\n'
        f'#line 1 "{BATCH_FILE}"\n}}  // namespace {ns}\n{undef}'
    )
    return text, headers


def batch_source(units: list[BatchUnit]) -> str:
    """One .cu file: prelude (+ every header the units include), the namespaced units, the
    shims, the table and the driver."""
    if not units:
        raise ValueError("a batch needs at least one implementation")
    ks = [u.k for u in units]
    if ks != list(range(len(units))):
        raise ValueError(f"batch units must be numbered 0..{len(units) - 1}, got {ks}")
    bodies, extra = [], []
    for u in units:
        text, headers = wrap_implementation(u)
        bodies.append(text)
        extra += [h for h in headers if h not in extra]
    includes = "".join(f"#include {h}\n" for h in extra)
    shims = "".join(
        f"static void cp_call_{u.k}(void** a) {{ "
        f"{namespace_of(u.k)}::{u.task.entry}({unpack_args(u.task)}); }}\n"
        for u in units
    )
    table = ", ".join(f"cp_call_{u.k}" for u in units)
    return (
        PRELUDE
        + includes
        + f'#line 1 "{BATCH_FILE}"\n'
        + "".join(bodies)
        + f'#line 1 "{BATCH_FILE}"\n'
        + shims
        + f"static void (*const cp_table[])(void**) = {{ {table} }};\n"
        + f"static const int cp_n = {len(units)};\n"
        + BATCH_DRIVER
    )


_UNIT_REF = re.compile(r"cp(\d+)/candidate\.cu|cp_impl(\d+)_ns")


def attribute_failures(log: str) -> set[int]:
    """Units a compiler or linker log blames: file names `cp<k>/candidate.cu` (front end,
    with `#line`), namespaces `cp_impl<k>_ns` (linker, ptxas: demangled or mangled). Only
    lines that report an error count (warnings name units too)."""
    found: set[int] = set()
    for line in log.splitlines():
        low = line.lower()
        if "error" not in low and "undefined reference" not in low:
            continue
        for m in _UNIT_REF.finditer(line):
            found.add(int(m.group(1) or m.group(2)))
    return found


def unit_log(log: str, k: int) -> str:
    """The lines of a batch log about unit k, its file renamed to the evaluator's."""
    own = [ln for ln in log.splitlines() if unit_file(k) in ln or namespace_of(k) in ln]
    return "\n".join(own).replace(unit_file(k), "candidate.cu")


_CALL = "cp_table[k](args)"
_FLUSH = (  # the caller owns the flush buffer; none (tests on the host) skips the flush
    "    if (flush && flush_bytes > 0)\n"
    '      CP_CHECK(cudaMemsetAsync(flush, t & 0xFF, (size_t)flush_bytes, 0), "flushing L2");'
)
_DRIVER_HEAD = r"""
extern "C" int cp_count(void) { return cp_n; }

extern "C" void* cp_fn(int k) { return (k >= 0 && k < cp_n) ? (void*)cp_table[k] : 0; }

extern "C" int cp_call(int k, void** args, char* err, int errlen) {
  int rc = 0;
  err[0] = 0;
  if (k < 0 || k >= cp_n) { snprintf(err, errlen, "no implementation %d here", k); return -1; }
  CP_CHECK(cudaDeviceSynchronize(), "before the call");
  cp_table[k](args);
  CP_CHECK(cudaGetLastError(), "launching the candidate's kernel");
  CP_CHECK(cudaDeviceSynchronize(), "running the candidate");
done:
  return rc;
}

extern "C" int cp_time(int k, void** args, int warmup, int trials, double budget_ms,
                       void* flush, long long flush_bytes, float* event_ms, double* wall_ms,
                       int* done, char* err, int errlen) {
  int rc = 0, t = 0;
  cudaEvent_t ev0 = 0, ev1 = 0;
  double t_begin = 0, w0 = 0;
  *done = 0;
  err[0] = 0;
  if (k < 0 || k >= cp_n) { snprintf(err, errlen, "no implementation %d here", k); return -1; }
"""

_DRIVER_MID = r"""  CP_CHECK(cudaEventCreate(&ev0), "creating events");
  CP_CHECK(cudaEventCreate(&ev1), "creating events");
"""

_DRIVER_TAIL = r"""done:
  if (ev0) cudaEventDestroy(ev0);
  if (ev1) cudaEventDestroy(ev1);
  return rc;
}
"""

# The batch library's driver: the evaluator harness's error check, clock, warm-up loop and
# timed-trial loop (`cudaperf.execute.c.harness`), around a function table instead of one call.
BATCH_DRIVER = (
    "\n"
    + driver_helpers("cp_")
    + _DRIVER_HEAD
    + warmup_loop(_CALL)
    + _DRIVER_MID
    + trial_loop("cp_", _CALL, _FLUSH)
    + _DRIVER_TAIL
)
