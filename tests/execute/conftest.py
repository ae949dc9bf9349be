"""Shared fixtures: a private cache dir per session, skips for missing tools, the catalog."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from cudaperf.execute import EvalConfig  # noqa: E402

HAS_NVCC = shutil.which("nvcc") is not None
HAS_GPU = shutil.which("nvidia-smi") is not None

needs_nvcc = pytest.mark.skipif(not HAS_NVCC, reason="nvcc is not installed (CUDA toolkit)")
needs_gpu = pytest.mark.skipif(not HAS_GPU, reason="no NVIDIA GPU visible (nvidia-smi missing)")


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cudaperf-cache")


@pytest.fixture()
def cpu_config(cache_dir) -> EvalConfig:
    """Compile-only config with a fixed salt and a session-wide build cache."""
    return EvalConfig(cache_dir=cache_dir, compile_only=True, seed_salt=1234, compile_jobs=2)


FAKE_HARNESS = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/stat.h>
/* A CPU stand-in for the native harness ABI (saxpy only) so the worker can be tested here. */
static void (*hook)(int) = 0;
#ifndef FAKE_NOHOOK
void __cudaperf_set_hook(void (*h)(int)) { hook = h; }
#endif
int __cudaperf_run(void** host, const long long* nbytes, const int* roles, int n, int warmup,
                   int trials, double budget_ms, float* event_ms, double* wall_ms, int* done,
                   char* err, int errlen) {
  int nn = *(int*)host[0]; float a = *(float*)host[1];
  float* x = (float*)host[2]; float* y = (float*)host[3];
#if defined(FAKE_LEAK)
  while (dup(0) >= 0) {}  /* every free file descriptor, left open */
#endif
#if defined(FAKE_HANG)
  for (;;) {}
#elif defined(FAKE_SEGV)
  *(volatile int*)0 = 1;
#elif defined(FAKE_FLOOD)
  for (long j = 0; j < (1L << 30); ++j) printf("flood flood flood %ld\n", j);
#elif defined(FAKE_PROBE)
  /* prints its sizes (stdout, buffered, and stderr), then fails on any size it was not shown:
     the held-out n would reach the next prompt through its output or its error text */
  printf("probe stdout n=%d\n", nn); fprintf(stderr, "probe stderr n=%d\n", nn);
  if (nn != 1000 && nn != 100003) {
#  if FAKE_PROBE == 4
    /* forges its process's reply: a multiprocessing message (4-byte big-endian length, then
       JSON) ["error", text] on every socket it holds, then returns as if all went well */
    char msg[128];
    int len = snprintf(msg + 4, sizeof msg - 4, "[\"error\", \"n=%d %s\"]", nn,
                       nn == 4096 ? "four-oh-nine-six" : "?");
    msg[0] = 0; msg[1] = 0; msg[2] = (char)(len >> 8); msg[3] = (char)len;
    for (int fd = 3; fd < 256; ++fd) {
      struct stat st;
      if (fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode)) (void)!write(fd, msg, 4 + len);
    }
    return 0;
#  elif FAKE_PROBE == 3
    fflush(stdout); for (;;) {}
#  elif FAKE_PROBE == 2
    snprintf(err, errlen, "size was n=%d (%s)", nn, nn == 4096 ? "four-oh-nine-six" : "?");
    return 700;
#  else
    *(volatile int*)0 = 1;
#  endif
  }
#elif defined(FAKE_BIGFILE)
  /* lifts its file-size limit as far as it may, then writes 64 MiB to a file of its own */
  struct rlimit lim = {RLIM_INFINITY, RLIM_INFINITY};
  if (setrlimit(RLIMIT_FSIZE, &lim) != 0) {
    getrlimit(RLIMIT_FSIZE, &lim); lim.rlim_cur = lim.rlim_max; setrlimit(RLIMIT_FSIZE, &lim);
  }
  FILE* big = fopen("big.bin", "wb"); static char block[1 << 20];
  for (int j = 0; big && j < 64; ++j) fwrite(block, 1, sizeof block, big);
  if (big) fclose(big);
#elif defined(FAKE_CUDA_ERROR)
  snprintf(err, errlen, "running the candidate: cudaErrorIllegalAddress (fake)"); return 700;
#endif
#ifdef FAKE_STALE
  /* right on every checked call of a size until that size is timed, then the last output again */
  static float* kept = 0; static int kept_n = 0; static int timed_n = -1;
  if (trials > 0) timed_n = nn;
  if (trials == 0 && timed_n == nn && kept && kept_n == nn) {
    memcpy(y, kept, nn * sizeof(float)); return 0;
  }
#endif
#ifdef FAKE_LATE_ERR
  /* right everywhere, until a call after it met the held-out size: then an error naming it */
  static int seen = 0;
  if (nn == 4096) seen = 1;
  else if (seen && trials == 0) {
    snprintf(err, errlen, "late failure after n=4096 (four-oh-nine-six)"); return 700;
  }
#endif
  if (trials == 0) {
    if (hook) hook(0);
#ifdef FAKE_PEEK
    /* Runs Python in its own process through the interpreter's C API and copies the answer
       out of the evaluator's reference cache when the process holds one. */
    extern int PyGILState_Ensure(void); extern void PyGILState_Release(int);
    extern int PyRun_SimpleString(const char*);
    char code[1024];
    snprintf(code, sizeof code,
             "import gc, ctypes, numpy as np\n"
             "x = np.ctypeslib.as_array((ctypes.c_float * %d).from_address(%llu))\n"
             "for o in gc.get_objects():\n"
             "    if type(o).__name__ == 'Libs':\n"
             "        for ins, want in list(o.sets.values()):\n"
             "            if ins[2].size == x.size and np.array_equal(ins[2], x):\n"
             "                ctypes.memmove(%llu, want[3].ctypes.data, x.nbytes)\n",
             nn, (unsigned long long)x, (unsigned long long)y);
    int g = PyGILState_Ensure(); PyRun_SimpleString(code); PyGILState_Release(g);
    return 0;
#endif
#ifdef FAKE_ESCAPE
    const char* w = getenv("CUDAPERF_TEST_WRITE"); FILE* f = w ? fopen(w, "w") : NULL;
    printf(f ? "escape: wrote\n" : "escape: write blocked\n"); if (f) fclose(f);
    const char* r = getenv("CUDAPERF_TEST_PEEK"); FILE* g = r ? fopen(r, "r") : NULL;
    printf(g ? "escape: peeked\n" : "escape: peek blocked\n"); if (g) fclose(g);
#endif
#ifdef FAKE_ABS
    for (int i = 0; i < nn; ++i) y[i] = FAKE_A * a * (x[i] < 0 ? -x[i] : x[i]) + y[i];
#else
    for (int i = 0; i < nn; ++i) y[i] = FAKE_A * a * x[i] + y[i];
#endif
#ifdef FAKE_STALE
    free(kept); kept = (float*)malloc(nn * sizeof(float)); kept_n = nn;
    memcpy(kept, y, nn * sizeof(float));
#endif
#ifdef FAKE_MUTATE
    x[0] += 1.0f;
#endif
    printf("hello from the candidate\n");
    if (hook) hook(1);
    return 0;
  }
#if defined(FAKE_EVENT_MS)  /* chosen timings: escaping work, impossible speed */
  for (int t = 0; t < trials; ++t) { event_ms[t] = FAKE_EVENT_MS; wall_ms[t] = FAKE_WALL_MS; }
#else
  for (int t = 0; t < trials; ++t) { event_ms[t] = 0.01f * (1 + t % 3); wall_ms[t] = 0.02; }
#endif
  *done = trials;
  return 0;
}
"""


# A CPU stand-in for the CUPTI shim (`execute.c.trace`): the window the harness's hook opens
# and closes, with a chosen wall time and device-work time; -1 when the window never closed.
FAKE_SHIM = r"""
#include <stdio.h>
static int opened = 0, closed = 0;
int cp_trace_begin(char* err, int errlen) {
#ifdef SHIM_BEGIN_FAILS
  snprintf(err, errlen, "CUPTI_ERROR_NOT_INITIALIZED (fake)"); return 15;
#endif
  opened = closed = 0; return 0;
}
void cp_trace_hook(int phase) { if (phase == 0) opened = 1; else closed = opened; }
int cp_trace_end(char* err, int errlen) { return 0; }
int cp_trace_read(double* out, char* names, int len) {
  if (!closed) return -1;
  out[0] = SHIM_WALL_US; out[1] = SHIM_DEVICE_US; out[2] = SHIM_KERNELS; out[3] = 0;
  snprintf(names, len, SHIM_KERNELS ? "saxpy_kernel\n" : "");
  return 0;
}
"""

# name -> (wall us, device-work us, kernels, extra flags)
FAKE_SHIMS = {
    "honest": (2000.0, 1900.0, 1, []),  # the GPU busy for 95% of the call
    "host_loop": (20000.0, 0.0, 0, []),  # no device work at all: a host fallback
    "host_quick": (500.0, 0.0, 0, []),  # no device work, in less time than the slack
    "token_kernel": (20000.0, 10.0, 1, []),  # a token kernel beside a host loop
    "short_setup": (900.0, 5.0, 1, []),  # a low share, but under 1 ms of host time in all
    "slow_setup": (10000.0, 1000.0, 1, []),  # 10%: 9 ms of host setup beside 1 ms of kernels
    "begin_fails": (1.0, 1.0, 1, ["-DSHIM_BEGIN_FAILS"]),
}


@pytest.fixture(scope="session")
def fake_shims(tmp_path_factory) -> dict[str, str]:
    """Fake CUPTI shims built with gcc (`FAKE_SHIMS`), by name."""
    d = tmp_path_factory.mktemp("shim")
    (d / "shim.c").write_text(FAKE_SHIM)
    out = {}
    for name, (wall, dev, kernels, flags) in FAKE_SHIMS.items():
        lib = d / f"{name}.so"
        defs = [f"-DSHIM_WALL_US={wall}", f"-DSHIM_DEVICE_US={dev}", f"-DSHIM_KERNELS={kernels}"]
        cmd = ["gcc", "-O1", "-shared", "-fPIC", *defs, *flags, "-o", str(lib), str(d / "shim.c")]
        subprocess.run(cmd, check=True)
        out[name] = str(lib)
    return out


@pytest.fixture(scope="session")
def fake_libs(tmp_path_factory) -> dict[str, str]:
    """Fake harness libraries built with gcc: ok, wrong, hang, segv, flood, cuda_error, mutate,
    escape, abs, stale, short_escape, too_fast, peek, leak, bigfile, probe, probe_err,
    probe_hang, probe_forge, nohook, late_err."""
    d = tmp_path_factory.mktemp("fake")
    (d / "fake.c").write_text(FAKE_HARNESS)
    variants = {
        "ok": ["-DFAKE_A=1"],
        "wrong": ["-DFAKE_A=2"],
        "hang": ["-DFAKE_A=1", "-DFAKE_HANG"],
        "segv": ["-DFAKE_A=1", "-DFAKE_SEGV"],
        "flood": ["-DFAKE_A=1", "-DFAKE_FLOOD"],
        "bigfile": ["-DFAKE_A=1", "-DFAKE_BIGFILE"],  # lifts its limit, writes a 64 MiB file
        "probe": ["-DFAKE_A=1", "-DFAKE_PROBE=1"],  # prints n, crashes on unseen sizes
        "probe_err": ["-DFAKE_A=1", "-DFAKE_PROBE=2"],  # prints n, puts it in its error text
        "probe_hang": ["-DFAKE_A=1", "-DFAKE_PROBE=3"],  # prints n, hangs on unseen sizes
        "probe_forge": ["-DFAKE_A=1", "-DFAKE_PROBE=4"],  # forges an error reply naming n
        "cuda_error": ["-DFAKE_A=1", "-DFAKE_CUDA_ERROR"],
        "mutate": ["-DFAKE_A=1", "-DFAKE_MUTATE"],
        "escape": ["-DFAKE_A=1", "-DFAKE_ESCAPE"],  # writes/reads paths from the environment
        "abs": ["-DFAKE_A=1", "-DFAKE_ABS"],  # |x|: right exactly on non-negative inputs
        "stale": ["-DFAKE_A=1", "-DFAKE_STALE"],  # right until timed, then a stale output
        # 10 us of events, 45 us of wall: hidden work a fixed 50 us allowance let through
        "short_escape": ["-DFAKE_A=1", "-DFAKE_EVENT_MS=0.010f", "-DFAKE_WALL_MS=0.045"],
        "too_fast": ["-DFAKE_A=1", "-DFAKE_EVENT_MS=0.0001f", "-DFAKE_WALL_MS=0.0001"],
        "peek": ["-DFAKE_A=1", "-DFAKE_PEEK"],
        "nohook": ["-DFAKE_A=1", "-DFAKE_NOHOOK"],  # a harness without the trace's hook
        "late_err": ["-DFAKE_A=1", "-DFAKE_LATE_ERR"],  # errs naming n after the held-out call
        "leak": [
            "-DFAKE_A=1",
            "-DFAKE_LEAK",
        ],  # takes every free file descriptor  # the answer from its process's Python heap
    }
    out = {}
    for name, flags in variants.items():
        lib = d / f"{name}.so"
        cmd = ["gcc", "-O1", "-shared", "-fPIC", *flags, "-o", str(lib), str(d / "fake.c")]
        subprocess.run(cmd, check=True)
        out[name] = str(lib)
    return out
