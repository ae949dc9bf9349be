"""The native harness compiled together with each C→CUDA candidate (one nvcc invocation).

The generated translation unit is: CUDA headers, the task's prototype (so a mismatching
signature is a compile error), the candidate (its line numbers preserved by `#line`), and the
harness. The harness exports one C entry point:

    int __cudaperf_run(void** host, const long long* nbytes, const int* roles, int n,
                       int warmup, int trials, double budget_ms,
                       float* event_ms, double* wall_ms, int* done, char* err, int errlen)

`host[i]` is a host buffer (arrays) or a pointer to the value (scalars); `roles[i]` is
`ROLE_CODES`. With `trials == 0` it runs one checked call: allocates device arrays, uploads
in/inout arrays, poisons out arrays with 0xFF bytes (NaN for floats), calls the candidate,
synchronises the device, and copies every array back into `host` (except role 4: an input
whose mutation is not checked this time); a hook set with `__cudaperf_set_hook(void (*)(int))`
is called with 0 right before the candidate's call and with 1 after the sync that follows it
(the kernel trace's window, `c.trace`). With `trials > 0` it times:
warm-up calls, then per trial an L2 flush (memset of 2x the L2 size), a device-wide sync, a
start event, the call, an end event, a device-wide sync; it records event time and host wall
time (the cross-check for work that escapes the events). Before the trials it times 11
empty calls the same way (the events and the sync, no candidate call) and writes the median
(wall - event) to `wall_ms[trials]` (so in timing mode `wall_ms` holds trials + 1 doubles;
a checked call, trials == 0, writes none): the timing
overhead the escape check allows for. It returns 0 or a CUDA error code with a message in
`err`. Timing therefore happens in native code; ctypes overhead is not timed.
"""

from __future__ import annotations

from cudaperf.tasks.model import Role, Task

__all__ = [
    "CANDIDATE_FILE",
    "HARNESS_FILE",
    "ROLE_CODES",
    "RUN_SYMBOL",
    "driver_helpers",
    "harness_source",
    "trial_loop",
    "unpack_args",
    "warmup_loop",
]

ROLE_CODES = {Role.IN: 0, Role.OUT: 1, Role.INOUT: 2, Role.SCALAR: 3}
IN_NO_DOWNLOAD = 4  # an `in` array not copied back after a checked call (no mutation check)
RUN_SYMBOL = "__cudaperf_run"
CANDIDATE_FILE = "candidate.cu"  # name compile errors use for the candidate's lines
HARNESS_FILE = "cudaperf_harness.cu"  # name compile errors use for the harness's lines

_PRELUDE = """\
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>
#include <cstring>
"""

# The driver pieces both C drivers share, the evaluator's (`_DRIVER`) and the bulk batch
# library's (`cudaperf.execute.bulk.source.BATCH_DRIVER`): one copy of the error check, the clock,
# the warm-up loop and the timed-trial loop (L2 flush, device-wide sync, events, wall clock,
# >= 5 trials then until `trials` or `budget_ms`). `{P}` is the symbol prefix, `{CALL}` the
# call of the candidate, `{FLUSH}` the L2 flush statement (the bulk's flush buffer may be absent).
_HELPERS = r"""static int {P}fail(const char* what, cudaError_t e, char* err, int errlen) {
  snprintf(err, errlen, "%s: %s (%s)", what, cudaGetErrorName(e), cudaGetErrorString(e));
  return e == cudaSuccess ? -1 : (int)e;
}
#define CP_CHECK(call, what) do { cudaError_t e_ = (call); \
  if (e_ != cudaSuccess) { rc = {P}fail(what, e_, err, errlen); goto done; } } while (0)

static double {P}now_ms() {
  return std::chrono::duration<double, std::milli>(
      std::chrono::steady_clock::now().time_since_epoch()).count();
}
"""

_WARMUP = r"""  for (int w = 0; w < warmup; ++w) {
    {CALL};
    CP_CHECK(cudaGetLastError(), "launching the candidate's kernel (warm-up)");
    CP_CHECK(cudaDeviceSynchronize(), "running the candidate (warm-up)");
  }
"""

_TRIALS = r"""  t_begin = {P}now_ms();
  for (t = 0; t < trials; ++t) {
{FLUSH}
    CP_CHECK(cudaDeviceSynchronize(), "after the L2 flush");
    w0 = {P}now_ms();
    CP_CHECK(cudaEventRecord(ev0, 0), "recording the start event");
    {CALL};
    CP_CHECK(cudaEventRecord(ev1, 0), "recording the end event");
    CP_CHECK(cudaGetLastError(), "launching the candidate's kernel (timing)");
    CP_CHECK(cudaDeviceSynchronize(), "running the candidate (timing)");
    wall_ms[t] = {P}now_ms() - w0;
    CP_CHECK(cudaEventElapsedTime(&event_ms[t], ev0, ev1), "reading the events");
    *done = t + 1;
    if (t + 1 >= 5 && {P}now_ms() - t_begin > budget_ms) break;
  }
"""


def driver_helpers(prefix: str) -> str:
    """`<prefix>fail`, the `CP_CHECK(call, what)` macro (needs `rc`, `err`, `errlen`, `done:`)
    and `<prefix>now_ms()`, the host clock of the wall-time cross-check."""
    return _HELPERS.replace("{P}", prefix)


def warmup_loop(call: str) -> str:
    """`warmup` untimed, checked calls of `call` (a C expression)."""
    return _WARMUP.replace("{CALL}", call)


def trial_loop(prefix: str, call: str, flush: str) -> str:
    """The timed trials: per trial `flush` (C statement lines, indented 4), a device-wide sync,
    the start event, `call`, the end event, a device-wide sync; event and wall time into
    `event_ms[t]` and `wall_ms[t]`; at least 5 trials, then until `trials` or `budget_ms`."""
    return _TRIALS.replace("{P}", prefix).replace("{CALL}", call).replace("{FLUSH}", flush)


_P = "__cudaperf_"
_CALL = "__cudaperf_call(args)"
_FLUSH = '    CP_CHECK(cudaMemsetAsync(flush, t & 0xFF, flush_bytes, 0), "flushing L2");'
_DRIVER_HEAD = r"""
static void (*__cudaperf_hook)(int) = 0;
extern "C" void __cudaperf_set_hook(void (*hook)(int)) { __cudaperf_hook = hook; }

extern "C" int __cudaperf_run(void** host, const long long* nbytes, const int* roles, int n,
                              int warmup, int trials, double budget_ms, float* event_ms,
                              double* wall_ms, int* done, char* err, int errlen) {
  int rc = 0, l2 = 0, t = 0, c = 0, j = 0;
  double cal[11] = {0}, cal_w = 0, cal_x = 0;
  float cal_e = 0;
  void* dev[64] = {0};
  void* args[64] = {0};
  void* flush = 0;
  size_t flush_bytes = 0;
  cudaEvent_t ev0 = 0, ev1 = 0;
  double t_begin = 0, w0 = 0;
  *done = 0;
  err[0] = 0;
  if (n > 64) { snprintf(err, errlen, "harness supports at most 64 parameters"); return -1; }
  for (int i = 0; i < n; ++i) {
    if (roles[i] == 3) { args[i] = host[i]; continue; }
    CP_CHECK(cudaMalloc(&dev[i], nbytes[i] > 0 ? nbytes[i] : 1), "allocating an input");
    if (roles[i] == 1) CP_CHECK(cudaMemset(dev[i], 0xFF, nbytes[i]), "poisoning an output");
    else CP_CHECK(cudaMemcpy(dev[i], host[i], nbytes[i], cudaMemcpyHostToDevice), "upload");
    args[i] = dev[i];
  }
  CP_CHECK(cudaDeviceSynchronize(), "before the call");
  if (trials == 0) {
    if (__cudaperf_hook) __cudaperf_hook(0);
    __cudaperf_call(args);
    CP_CHECK(cudaGetLastError(), "launching the candidate's kernel");
    CP_CHECK(cudaDeviceSynchronize(), "running the candidate");
    if (__cudaperf_hook) __cudaperf_hook(1);
    for (int i = 0; i < n; ++i)
      if (roles[i] != 3 && roles[i] != 4)
        CP_CHECK(cudaMemcpy(host[i], dev[i], nbytes[i], cudaMemcpyDeviceToHost), "download");
    goto done;
  }
"""

_DRIVER_MID = r"""
  CP_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0), "querying the L2 size");
  flush_bytes = 2 * (size_t)(l2 > 0 ? l2 : (64 << 20));
  CP_CHECK(cudaMalloc(&flush, flush_bytes), "allocating the L2 flush buffer");
  CP_CHECK(cudaEventCreate(&ev0), "creating events");
  CP_CHECK(cudaEventCreate(&ev1), "creating events");
  for (c = 0; c < 11; ++c) {  /* the overhead of timing an empty call */
    CP_CHECK(cudaDeviceSynchronize(), "calibrating the timer");
    cal_w = __cudaperf_now_ms();
    CP_CHECK(cudaEventRecord(ev0, 0), "recording the start event");
    CP_CHECK(cudaEventRecord(ev1, 0), "recording the end event");
    CP_CHECK(cudaDeviceSynchronize(), "calibrating the timer");
    cal_w = __cudaperf_now_ms() - cal_w;
    CP_CHECK(cudaEventElapsedTime(&cal_e, ev0, ev1), "reading the events");
    cal_x = cal_w - (double)cal_e;
    for (j = c; j > 0 && cal[j - 1] > cal_x; --j) cal[j] = cal[j - 1];  /* insertion sort */
    cal[j] = cal_x;
  }
  wall_ms[trials] = cal[5];
"""[1:]  # (the first newline keeps the line short)

_DRIVER_TAIL = r"""done:
  if (ev0) cudaEventDestroy(ev0);
  if (ev1) cudaEventDestroy(ev1);
  if (flush) cudaFree(flush);
  for (int i = 0; i < n; ++i) if (dev[i]) cudaFree(dev[i]);
  return rc;
}
"""

_DRIVER = (
    "\n"
    + driver_helpers(_P)
    + _DRIVER_HEAD
    + warmup_loop(_CALL)
    + _DRIVER_MID
    + trial_loop(_P, _CALL, _FLUSH)
    + _DRIVER_TAIL
)


def unpack_args(task: Task, array: str = "a") -> str:
    """The entry's arguments read from `void** <array>` (device pointers for arrays, host
    pointers to the values of scalars): the one unpacking of both C drivers."""
    parts = []
    for i, p in enumerate(task.signature):
        if p.role is Role.SCALAR:
            parts.append(f"*({p.ctype}*){array}[{i}]")
        else:
            const = "const " if p.role is Role.IN else ""
            parts.append(f"({const}{p.ctype}*){array}[{i}]")
    return ", ".join(parts)


def _unpack(task: Task) -> str:
    """`__cudaperf_call(void** a)`: calls the entry with the task's signature unpacked."""
    return f"static void __cudaperf_call(void** a) {{ {task.entry}({unpack_args(task)}); }}\n"


def harness_source(task: Task, candidate_code: str) -> str:
    """One .cu file: prelude, prototype, the candidate (line numbers kept), the harness."""
    return (
        _PRELUDE
        + task.c_prototype()
        + ";\n"
        + f'#line 1 "{CANDIDATE_FILE}"\n'
        + candidate_code.rstrip()
        + "\n"
        + f'#line 1 "{HARNESS_FILE}"\n'
        + _unpack(task)
        + _DRIVER
    )
