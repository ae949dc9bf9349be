"""Which kernels a C→CUDA candidate launches, and how much of its call they account for.

A reply that copies the inputs to the host, loops over them there and copies the result back
computes the right answer, and its time is measured honestly (slowly), but it is not a CUDA
kernel: paid as a correct one, it teaches a policy that the host is a safe place to work. The
static `host_fallback` finding guesses at that from spelling (a `(cudaMemcpyKind)2` dodges it);
this module observes it at run time, with NVIDIA's CUPTI activity API.

One traced call per job (`c.trusted.run_job`: after every config passed, a checked call on the
largest visible config, warm): the candidate's process (`c.child`) enables CUPTI's kernel,
memset and memcpy records, and the harness calls a hook right before the candidate's entry
and right after the device-wide sync that follows it (`harness`: `__cudaperf_set_hook`).
The shim below keeps the records and reports, for that window:

- `wall_us`: the window's length (the call, as the host saw it);
- `device_us`: the union of the intervals in which the GPU ran the candidate's own work —
  kernels, memsets and device-to-device copies (copies between host and device are not work);
- `kernels`, `names`: how many kernels ran and their names (demangled, at most `_MAX_NAMES`).

`sanity.host_work_message` turns those into a verdict: no device work at all, or device work
below `EvalConfig.min_device_share` of the call with more than `HOST_SLACK_US` of the call
left to the host, is REJECTED. Timing is untouched: tracing is enabled only for that one
checked call, after every timed trial of the job, and the process is discarded after the job.

The shim is built once per toolchain (`build_trace`, cached like any build) against the CUPTI
that ships with the CUDA toolkit (`<cuda>/extras/CUPTI` or `<cuda>/lib64`); where there is no
CUPTI, or tracing fails there, the job runs as before and its result says the launch check did
not run (`JobReply.trace_note`). Not guaranteed: the candidate runs in the traced process, so
code that sets out to fool the tracer (disabling CUPTI, or a kernel that spins on the GPU while
the host does the work) can; the check is against a policy that drifts onto the host, not
against a deliberate forger.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import re
import shutil
import subprocess
from pathlib import Path

from cudaperf.execute.build import BuildResult, cache_key, compile_cached
from cudaperf.execute.config import EvalConfig
from cudaperf.toolchain import tool_version

log = logging.getLogger(__name__)

__all__ = [
    "HOOK_SYMBOL",
    "TRACE_SOURCE",
    "build_trace",
    "cupti_dirs",
    "record_structs",
    "traced_call",
]

HOOK_SYMBOL = "__cudaperf_set_hook"  # the harness's setter of the hook around the call
_MAX_NAMES = 16
_NAMES_LEN = 4096

# CP_KERNEL, CP_MEMCPY, CP_MEMSET: the record structs of this toolkit (`record_structs`).
TRACE_SOURCE = r"""
#include <cupti.h>
#include <cuda_runtime.h>
#include <cxxabi.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace {
struct Span { unsigned long long start, end; int kernel; };
std::mutex mu;
std::vector<Span> spans;
std::vector<std::string> names;
unsigned long long t0 = 0, t1 = 0, dropped = 0;
bool registered = false;

void CUPTIAPI want_buffer(uint8_t** buf, size_t* size, size_t* max_records) {
  *size = 4 << 20;
  *buf = (uint8_t*)aligned_alloc(8, *size);
  *max_records = 0;
}

void keep(unsigned long long s, unsigned long long e, int kernel, const char* name) {
  std::lock_guard<std::mutex> g(mu);
  if (spans.size() >= (1u << 20)) { ++dropped; return; }
  spans.push_back({s, e, kernel});
  if (!kernel || !name || names.size() >= MAX_NAMES) return;
  int st = 0;
  char* dm = abi::__cxa_demangle(name, 0, 0, &st);
  std::string n = (st == 0 && dm) ? dm : name;
  free(dm);
  n = n.substr(0, n.find('('));
  if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
}

void CUPTIAPI got_buffer(CUcontext, uint32_t, uint8_t* buf, size_t, size_t valid) {
  CUpti_Activity* r = 0;
  while (cuptiActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS) {
    if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || r->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      CP_KERNEL* k = (CP_KERNEL*)r;
      keep(k->start, k->end, 1, k->name);
    } else if (r->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
      CP_MEMSET* m = (CP_MEMSET*)r;
      keep(m->start, m->end, 0, 0);
    } else if (r->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      CP_MEMCPY* m = (CP_MEMCPY*)r;
      if (m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOD) keep(m->start, m->end, 0, 0);
    }
  }
  free(buf);
}

int fail(const char* what, CUptiResult r, char* err, int errlen) {
  const char* s = 0;
  cuptiGetResultString(r, &s);
  snprintf(err, errlen, "%s: %s", what, s ? s : "unknown CUPTI error");
  return (int)r == 0 ? -1 : (int)r;
}

const CUpti_ActivityKind KINDS[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                    CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_MEMCPY};
}  // namespace

extern "C" int cp_trace_begin(char* err, int errlen) {
  CUptiResult r;
  if (!registered) {
    r = cuptiActivityRegisterCallbacks(want_buffer, got_buffer);
    if (r != CUPTI_SUCCESS) return fail("registering CUPTI's buffers", r, err, errlen);
    registered = true;
  }
  {
    std::lock_guard<std::mutex> g(mu);
    spans.clear(); names.clear(); t0 = t1 = 0; dropped = 0;
  }
  for (CUpti_ActivityKind k : KINDS) {
    r = cuptiActivityEnable(k);
    if (r != CUPTI_SUCCESS) return fail("enabling CUPTI's activity records", r, err, errlen);
  }
  return 0;
}

extern "C" void cp_trace_hook(int phase) {
  uint64_t t = 0;
  cuptiGetTimestamp(&t);
  if (phase == 0) t0 = t; else t1 = t;
}

extern "C" int cp_trace_end(char* err, int errlen) {
  CUptiResult r = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  for (CUpti_ActivityKind k : KINDS) cuptiActivityDisable(k);
  if (r != CUPTI_SUCCESS) return fail("flushing CUPTI's records", r, err, errlen);
  return 0;
}

/* out[0] wall µs, out[1] device-work µs (union, clipped to the window), out[2] kernels,
   out[3] records dropped; names: newline-separated. -1 when the window never closed. */
extern "C" int cp_trace_read(double* out, char* names_out, int names_len) {
  std::lock_guard<std::mutex> g(mu);
  if (!t0 || !t1 || t1 < t0) return -1;
  std::vector<Span> in;
  long kernels = 0;
  for (const Span& s : spans) {
    unsigned long long a = std::max(s.start, t0), b = std::min(s.end, t1);
    if (b <= a) continue;
    in.push_back({a, b, s.kernel});
    kernels += s.kernel;
  }
  std::sort(in.begin(), in.end(), [](const Span& x, const Span& y) { return x.start < y.start; });
  unsigned long long busy = 0, cs = 0, ce = 0;
  for (const Span& s : in) {
    if (s.start > ce) { busy += ce - cs; cs = s.start; ce = s.end; }
    else if (s.end > ce) ce = s.end;
  }
  busy += ce - cs;
  out[0] = (t1 - t0) / 1e3;
  out[1] = busy / 1e3;
  out[2] = (double)kernels;
  out[3] = (double)dropped;
  std::string all;
  for (const std::string& n : names) { all += n; all += '\n'; }
  snprintf(names_out, names_len, "%s", all.c_str());
  return 0;
}
"""


def _toolkit_roots(nvcc: str) -> list[Path]:
    """Where the toolkit of `nvcc` lives: nvcc's own answer (`--dryrun` prints TOP=, which
    sees through wrapper scripts), then the folder above the resolved executable."""
    roots = []
    try:
        p = subprocess.run(
            [nvcc, "--dryrun", "-x", "cu", "-c", os.devnull, "-o", os.devnull],
            capture_output=True,
            text=True,
            timeout=60,
        )
        m = re.search(r"^#\$ TOP=(.+)$", p.stdout + p.stderr, re.M)
        if m:
            roots.append(Path(os.path.realpath(m.group(1).strip())))
    except (OSError, subprocess.SubprocessError):
        pass
    exe = shutil.which(nvcc)
    if exe is not None:
        roots.append(Path(os.path.realpath(exe)).parent.parent)
    return roots


def cupti_dirs(nvcc: str) -> tuple[Path, Path] | None:
    """(include dir holding cupti.h, lib dir holding libcupti.so) of the toolkit `nvcc`
    belongs to, or None."""
    for root in _toolkit_roots(nvcc):
        for base in (root / "extras" / "CUPTI", root, root / "targets" / "x86_64-linux"):
            inc = base / "include"
            if not (inc / "cupti.h").is_file():
                continue
            for lib in ("lib64", "lib"):
                if (base / lib / "libcupti.so").exists():
                    return inc, base / lib
    return None


def record_structs(include: Path) -> tuple[str, str, str] | None:
    """The (kernel, memcpy, memset) record structs this toolkit's CUPTI writes: the newest
    version of each that `cupti_activity.h` declares (older ones stay declared, deprecated)."""
    try:
        text = (include / "cupti_activity.h").read_text(errors="replace")
    except OSError:
        return None
    out = []
    for kind in ("Kernel", "Memcpy", "Memset"):
        found = [int(v or 1) for v in re.findall(rf"}}\s*CUpti_Activity{kind}(\d*)\s*;", text)]
        if not found:
            return None
        n = max(found)
        out.append(f"CUpti_Activity{kind}{n if n > 1 else ''}")
    return out[0], out[1], out[2]


@functools.lru_cache(maxsize=8)
def _build(nvcc: str, cache_dir: str, timeout: float) -> tuple[str | None, str]:
    dirs = cupti_dirs(nvcc)
    if dirs is None:
        return None, f"no CUPTI (cupti.h and libcupti.so) in the toolkit of {nvcc}"
    inc, lib = dirs
    structs = record_structs(inc)
    if structs is None:
        return None, f"no CUPTI activity records declared in {inc / 'cupti_activity.h'}"
    kernel, memcpy, memset = structs
    defs = [f"-DCP_KERNEL={kernel}", f"-DCP_MEMCPY={memcpy}", f"-DCP_MEMSET={memset}"]
    cmd = [nvcc, "-O2", "-shared", "-Xcompiler", "-fPIC", f"-I{inc}", *defs]
    cmd += [f"-DMAX_NAMES={_MAX_NAMES}", f"-L{lib}", "-Xlinker", f"-rpath,{lib}", "-lcupti"]
    key = cache_key("trace", TRACE_SOURCE, " ".join(cmd), tool_version(nvcc))
    out = Path(cache_dir) / "build" / key
    b: BuildResult = compile_cached(cmd, "trace.cu", TRACE_SOURCE, out, "trace.so", timeout)
    if b.ok:
        return b.lib, ""
    return None, "the CUPTI shim did not compile: " + (b.log.strip().splitlines() or ["?"])[0]


def build_trace(config: EvalConfig) -> tuple[str | None, str]:
    """(path of the CUPTI shim library, "") or (None, why there is none). Built once per
    toolchain and cache folder; the source is the evaluator's own (built unconfined)."""
    return _build(config.nvcc, str(config.cache_dir), config.compile_timeout_s)


_SHIMS: dict[str, ctypes.CDLL] = {}


def _shim(path: str) -> ctypes.CDLL:
    if path not in _SHIMS:
        lib = ctypes.CDLL(path, mode=os.RTLD_LOCAL | os.RTLD_NOW)
        lib.cp_trace_begin.restype = ctypes.c_int
        lib.cp_trace_end.restype = ctypes.c_int
        lib.cp_trace_read.restype = ctypes.c_int
        _SHIMS[path] = lib
    return _SHIMS[path]


def traced_call(shim_path: str, candidate: ctypes.CDLL, call) -> tuple[dict, dict]:
    """Run `call()` (one checked harness call of `candidate`) with kernel tracing on: returns
    (the call's reply, the trace: {"wall_us", "device_us", "kernels", "dropped", "names"} or
    {"error": why it could not be traced}). The call runs whether or not tracing starts."""
    err = ctypes.create_string_buffer(512)
    try:
        shim = _shim(shim_path)
        setter = getattr(candidate, HOOK_SYMBOL)
    except (OSError, AttributeError) as e:
        return call(), {"error": f"no kernel trace: {e}"}
    if shim.cp_trace_begin(err, len(err)) != 0:
        return call(), {"error": "no kernel trace: " + err.value.decode(errors="replace")}
    setter.argtypes = [ctypes.c_void_p]
    setter(ctypes.cast(shim.cp_trace_hook, ctypes.c_void_p))
    try:
        reply = call()
    finally:
        setter(None)
        ended = shim.cp_trace_end(err, len(err))
    if ended != 0:
        return reply, {"error": "no kernel trace: " + err.value.decode(errors="replace")}
    out = (ctypes.c_double * 4)()
    names = ctypes.create_string_buffer(_NAMES_LEN)
    if shim.cp_trace_read(out, names, _NAMES_LEN) != 0:
        return reply, {"error": "no kernel trace: the call did not complete"}
    listed = [n for n in names.value.decode(errors="replace").split("\n") if n]
    trace = {
        "wall_us": out[0],
        "device_us": out[1],
        "kernels": int(out[2]),
        "dropped": int(out[3]),
        "names": listed[:_MAX_NAMES],
    }
    return reply, trace
