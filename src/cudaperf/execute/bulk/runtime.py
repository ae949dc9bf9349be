"""The device runtime library of `cudaperf data measure`: memory helpers and device compare.

Compiled once per run with nvcc (cached by content like every build) and loaded by each GPU
runner. Device pointers it returns are valid in every batch library of the same process (all
use the device's primary context).

`cprt_compare` applies, on the device, the rule of `cudaperf.execute.c.reference.compare` to one
out/inout array: an element is bad unless |got - want| <= atol + rtol * |want| (NaN never
passes, except where the reference itself made a NaN), with floats computed in their own
precision (float32 stays float32, with the tolerances rounded to float32 as numpy does with
Python scalars) and integers in float64; max abs error is inf when any error is non-finite;
max rel error is over elements with |want| > atol. Every rounding step is explicit (`__fadd_rn`
and friends on the device, `volatile` on the host), so no fused multiply-add changes a
borderline verdict. `cprt_compare_host` runs the same element rule on host memory; the tests
check it against `compare`. `cprt_diff` finds whether two arrays differ in any bit and the first
index whose values differ (the `in`-array mutation check).
"""

from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass

import numpy as np

from cudaperf.execute.bulk.source import DTYPE_CODES

__all__ = ["RUNTIME_SOURCE", "CompareStats", "CudaFault", "Runtime"]

RUNTIME_SOURCE = r"""
#include <cuda_runtime.h>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstring>

struct CpStats {
  unsigned long long bad, first, max_abs_bits, max_rel_bits;
  int nonfinite;
};

#define CP_HD __host__ __device__ inline
CP_HD float f_add(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  volatile float r = a + b; return r;
#endif
}
CP_HD float f_sub(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fsub_rn(a, b);
#else
  volatile float r = a - b; return r;
#endif
}
CP_HD float f_mul(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  volatile float r = a * b; return r;
#endif
}
CP_HD float f_div(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fdiv_rn(a, b);
#else
  volatile float r = a / b; return r;
#endif
}
CP_HD double d_add(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dadd_rn(a, b);
#else
  volatile double r = a + b; return r;
#endif
}
CP_HD double d_sub(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dsub_rn(a, b);
#else
  volatile double r = a - b; return r;
#endif
}
CP_HD double d_mul(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dmul_rn(a, b);
#else
  volatile double r = a * b; return r;
#endif
}
CP_HD double d_div(double a, double b) {
#ifdef __CUDA_ARCH__
  return __ddiv_rn(a, b);
#else
  volatile double r = a / b; return r;
#endif
}

// One element: ok?, and (when the error is finite) its abs error and its rel error
// (rel = 0 unless |want| > atol). Mirrors cudaperf.execute.c.reference._errors.
struct CpElem { bool ok, finite; double abs_err, rel_err; };

CP_HD CpElem cp_rule_f32(float g, float w, float atol, float rtol) {
  CpElem e;
  float err = fabsf(f_sub(g, w));
  float aw = fabsf(w);
  e.ok = err <= f_add(atol, f_mul(rtol, aw));
  if (!e.ok && isnan(g) && isnan(w)) e.ok = true;
  e.finite = isfinite(err);
  e.abs_err = err;
  e.rel_err = aw > atol ? (double)f_div(err, aw) : 0.0;
  return e;
}

CP_HD CpElem cp_rule_f64(double g, double w, double atol, double rtol) {
  CpElem e;
  double err = fabs(d_sub(g, w));
  double aw = fabs(w);
  e.ok = err <= d_add(atol, d_mul(rtol, aw));
  if (!e.ok && isnan(g) && isnan(w)) e.ok = true;
  e.finite = isfinite(err);
  e.abs_err = err;
  e.rel_err = aw > atol ? d_div(err, aw) : 0.0;
  return e;
}

template <typename T> CP_HD CpElem cp_rule(T g, T w, double atol, double rtol) {
  return cp_rule_f64((double)g, (double)w, atol, rtol);  // integers: float64, as numpy
}
template <> CP_HD CpElem cp_rule<float>(float g, float w, double atol, double rtol) {
  return cp_rule_f32(g, w, (float)atol, (float)rtol);
}

template <typename T> CP_HD bool cp_value_differs(T a, T b) { return a != b; }

template <typename T> CP_HD bool cp_same_bits(T a, T b) {
  const unsigned char* x = (const unsigned char*)&a;
  const unsigned char* y = (const unsigned char*)&b;
  for (unsigned i = 0; i < sizeof(T); ++i) if (x[i] != y[i]) return false;
  return true;
}

static unsigned long long cp_bits(double x) {
  unsigned long long u; memcpy(&u, &x, sizeof u); return u;
}

template <typename T>
__global__ void cp_compare_kernel(const T* got, const T* want, long long n, double atol,
                                  double rtol, CpStats* st) {
  unsigned long long bad = 0, first = ~0ull;
  double mabs = 0, mrel = 0;
  int nonfinite = 0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    CpElem e = cp_rule<T>(got[i], want[i], atol, rtol);
    if (!e.ok) { ++bad; if ((unsigned long long)i < first) first = i; }
    if (!e.finite) nonfinite = 1;
    else { mabs = fmax(mabs, e.abs_err); mrel = fmax(mrel, e.rel_err); }
  }
  for (int o = 16; o > 0; o >>= 1) {
    bad += __shfl_down_sync(0xffffffffu, bad, o);
    unsigned long long f = __shfl_down_sync(0xffffffffu, first, o);
    first = f < first ? f : first;
    mabs = fmax(mabs, __shfl_down_sync(0xffffffffu, mabs, o));
    mrel = fmax(mrel, __shfl_down_sync(0xffffffffu, mrel, o));
    nonfinite |= __shfl_down_sync(0xffffffffu, nonfinite, o);
  }
  if ((threadIdx.x & 31) == 0) {
    if (bad) { atomicAdd(&st->bad, bad); atomicMin(&st->first, first); }
    // non-negative doubles order like their bit patterns
    atomicMax(&st->max_abs_bits, (unsigned long long)__double_as_longlong(mabs));
    atomicMax(&st->max_rel_bits, (unsigned long long)__double_as_longlong(mrel));
    if (nonfinite) atomicOr(&st->nonfinite, 1);
  }
}

template <typename T>
__global__ void cp_diff_kernel(const T* a, const T* b, long long n, CpStats* st) {
  unsigned long long bits = 0, first = ~0ull;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    T x = a[i], y = b[i];
    if (!cp_same_bits<T>(x, y)) ++bits;
    if (cp_value_differs<T>(x, y) && (unsigned long long)i < first) first = i;
  }
  for (int o = 16; o > 0; o >>= 1) {
    bits += __shfl_down_sync(0xffffffffu, bits, o);
    unsigned long long f = __shfl_down_sync(0xffffffffu, first, o);
    first = f < first ? f : first;
  }
  if ((threadIdx.x & 31) == 0) {
    if (bits) atomicAdd(&st->bad, bits);
    if (first != ~0ull) atomicMin(&st->first, first);
  }
}

static CpStats* g_stats = 0;

static int cp_launch_dims(long long n) {
  long long blocks = (n + 255) / 256;
  return (int)(blocks < 4096 ? (blocks > 0 ? blocks : 1) : 4096);
}

template <typename T>
static int cp_compare_t(const void* got, const void* want, long long n, double atol, double rtol,
                        CpStats* out, bool diff) {
  cudaError_t e;
  if (!g_stats && (e = cudaMalloc(&g_stats, sizeof(CpStats))) != cudaSuccess) return (int)e;
  CpStats init = {0, ~0ull, 0, 0, 0};
  if ((e = cudaMemcpy(g_stats, &init, sizeof init, cudaMemcpyHostToDevice))) return (int)e;
  if (n > 0) {
    if (diff) cp_diff_kernel<T><<<cp_launch_dims(n), 256>>>((const T*)got, (const T*)want, n,
                                                           g_stats);
    else cp_compare_kernel<T><<<cp_launch_dims(n), 256>>>((const T*)got, (const T*)want, n,
                                                           atol, rtol, g_stats);
    if ((e = cudaGetLastError())) return (int)e;
  }
  if ((e = cudaMemcpy(out, g_stats, sizeof init, cudaMemcpyDeviceToHost))) return (int)e;
  return 0;
}

template <typename T>
static void cp_compare_host_t(const void* got, const void* want, long long n, double atol,
                              double rtol, CpStats* st) {
  const T* g = (const T*)got; const T* w = (const T*)want;
  double mabs = 0, mrel = 0;
  *st = CpStats{0, ~0ull, 0, 0, 0};
  for (long long i = 0; i < n; ++i) {
    CpElem e = cp_rule<T>(g[i], w[i], atol, rtol);
    if (!e.ok) { if (!st->bad) st->first = i; ++st->bad; }
    if (!e.finite) st->nonfinite = 1;
    else { mabs = fmax(mabs, e.abs_err); mrel = fmax(mrel, e.rel_err); }
  }
  st->max_abs_bits = cp_bits(mabs);
  st->max_rel_bits = cp_bits(mrel);
}

template <typename T>
static void cp_diff_host_t(const void* a, const void* b, long long n, CpStats* st) {
  const T* x = (const T*)a; const T* y = (const T*)b;
  *st = CpStats{0, ~0ull, 0, 0, 0};
  for (long long i = 0; i < n; ++i) {
    if (!cp_same_bits<T>(x[i], y[i])) ++st->bad;
    if (cp_value_differs<T>(x[i], y[i]) && st->first == ~0ull) st->first = i;
  }
}

#define CP_DISPATCH(CALL) switch (dtype) { \
  case 0: CALL(float); case 1: CALL(double); case 2: CALL(int8_t); case 3: CALL(uint8_t); \
  case 4: CALL(int16_t); case 5: CALL(uint16_t); case 6: CALL(int32_t); \
  case 7: CALL(uint32_t); case 8: CALL(int64_t); case 9: CALL(uint64_t); default: return -2; }


extern "C" int cprt_diff_host(int dtype, const void* a, const void* b, long long n,
                              CpStats* out) {
#define CP_HDIFF(T) cp_diff_host_t<T>(a, b, n, out); return 0
  CP_DISPATCH(CP_HDIFF)
#undef CP_HDIFF
}

extern "C" int cprt_compare_host(int dtype, const void* got, const void* want, long long n,
                                 double atol, double rtol, CpStats* out) {
#define CP_HOST(T) cp_compare_host_t<T>(got, want, n, atol, rtol, out); return 0
  CP_DISPATCH(CP_HOST)
#undef CP_HOST
}

#ifdef CP_FAKE_DEVICE
// Tests only: "device" memory is host memory and compares run on the host, so the runner,
// the driver and the orchestrator can be exercised on a machine without a GPU.
#include <cstdlib>
extern "C" int cprt_compare(int dtype, const void* got, const void* want, long long n,
                            double atol, double rtol, CpStats* out) {
  return cprt_compare_host(dtype, got, want, n, atol, rtol, out);
}
extern "C" int cprt_diff(int dtype, const void* a, const void* b, long long n, CpStats* out) {
  return cprt_diff_host(dtype, a, b, n, out);
}
extern "C" int cprt_init(char* name, int len, long long* l2_bytes, long long* total_mem) {
  snprintf(name, len, "Fake GPU"); *l2_bytes = 1 << 20; *total_mem = 1ll << 30; return 0;
}
extern "C" void cprt_error(int code, char* buf, int len) {
  snprintf(buf, len, "fake error %d", code);
}
extern "C" int cprt_malloc(void** p, long long n) { *p = malloc(n > 0 ? n : 1); return *p ? 0 : 2; }
extern "C" int cprt_free(void* p) { free(p); return 0; }
extern "C" int cprt_h2d(void* d, const void* s, long long n) { memcpy(d, s, n); return 0; }
extern "C" int cprt_d2h(void* d, const void* s, long long n) { memcpy(d, s, n); return 0; }
extern "C" int cprt_d2d(void* d, const void* s, long long n) { memcpy(d, s, n); return 0; }
extern "C" int cprt_memset(void* p, int v, long long n) { memset(p, v, n); return 0; }
extern "C" int cprt_sync(void) { return 0; }
extern "C" int cprt_mem_info(long long* f, long long* t) { *f = *t = 1ll << 30; return 0; }
#else
extern "C" int cprt_compare(int dtype, const void* got, const void* want, long long n,
                            double atol, double rtol, CpStats* out) {
#define CP_CMP(T) return cp_compare_t<T>(got, want, n, atol, rtol, out, false)
  CP_DISPATCH(CP_CMP)
#undef CP_CMP
}

extern "C" int cprt_diff(int dtype, const void* a, const void* b, long long n, CpStats* out) {
#define CP_DIFF(T) return cp_compare_t<T>(a, b, n, 0, 0, out, true)
  CP_DISPATCH(CP_DIFF)
#undef CP_DIFF
}

extern "C" int cprt_init(char* name, int len, long long* l2_bytes, long long* total_mem) {
  cudaDeviceProp p;
  cudaError_t e = cudaSetDevice(0);
  if (!e) e = cudaFree(0);
  if (!e) e = cudaGetDeviceProperties(&p, 0);
  if (e) return (int)e;
  snprintf(name, len, "%s", p.name);
  *l2_bytes = p.l2CacheSize;
  *total_mem = (long long)p.totalGlobalMem;
  return 0;
}

extern "C" void cprt_error(int code, char* buf, int len) {
  cudaError_t e = (cudaError_t)code;
  snprintf(buf, len, "%s (%s)", cudaGetErrorName(e), cudaGetErrorString(e));
}

extern "C" int cprt_malloc(void** p, long long n) {
  return (int)cudaMalloc(p, n > 0 ? (size_t)n : 1);
}
extern "C" int cprt_free(void* p) { return (int)cudaFree(p); }
extern "C" int cprt_h2d(void* d, const void* s, long long n) {
  return n > 0 ? (int)cudaMemcpy(d, s, (size_t)n, cudaMemcpyHostToDevice) : 0;
}
extern "C" int cprt_d2h(void* d, const void* s, long long n) {
  return n > 0 ? (int)cudaMemcpy(d, s, (size_t)n, cudaMemcpyDeviceToHost) : 0;
}
extern "C" int cprt_d2d(void* d, const void* s, long long n) {
  return n > 0 ? (int)cudaMemcpy(d, s, (size_t)n, cudaMemcpyDeviceToDevice) : 0;
}
extern "C" int cprt_memset(void* p, int v, long long n) {
  return n > 0 ? (int)cudaMemset(p, v, (size_t)n) : 0;
}
extern "C" int cprt_sync(void) { return (int)cudaDeviceSynchronize(); }
extern "C" int cprt_mem_info(long long* free_b, long long* total_b) {
  size_t f = 0, t = 0;
  cudaError_t e = cudaMemGetInfo(&f, &t);
  *free_b = (long long)f; *total_b = (long long)t;
  return (int)e;
}
#endif  // CP_FAKE_DEVICE
"""


class CudaFault(RuntimeError):
    """A CUDA runtime call of the runner failed (the message names the call and the error)."""

    def __init__(self, what: str, code: int, text: str):
        super().__init__(f"{what}: {text}")
        self.code = code


class _Stats(ctypes.Structure):
    _fields_ = [
        ("bad", ctypes.c_ulonglong),
        ("first", ctypes.c_ulonglong),
        ("max_abs_bits", ctypes.c_ulonglong),
        ("max_rel_bits", ctypes.c_ulonglong),
        ("nonfinite", ctypes.c_int),
    ]


@dataclass(frozen=True)
class CompareStats:
    """What `cprt_compare` (or `cprt_diff`) found on one array."""

    bad: int  # elements outside the tolerance (diff: elements whose bits differ)
    first: int  # index of the first bad element (diff: first value difference), -1 if none
    max_abs_err: float  # inf when some error is non-finite
    max_rel_err: float  # inf when some error is non-finite


def _bits_to_float(u: int) -> float:
    return float(np.array(u, dtype=np.uint64).view(np.float64))


class Runtime:
    """ctypes wrapper of the runtime library; every failing call raises `CudaFault`."""

    def __init__(self, path: str):
        self.lib = ctypes.CDLL(path)
        for name in ("cprt_compare", "cprt_compare_host"):
            fn = getattr(self.lib, name)
            fn.restype = ctypes.c_int
            fn.argtypes = [
                ctypes.c_int,
                ctypes.c_void_p,
                ctypes.c_void_p,
                ctypes.c_longlong,
                ctypes.c_double,
                ctypes.c_double,
                ctypes.POINTER(_Stats),
            ]
        for name in ("cprt_diff", "cprt_diff_host"):
            getattr(self.lib, name).restype = ctypes.c_int
            getattr(self.lib, name).argtypes = [
                ctypes.c_int,
                ctypes.c_void_p,
                ctypes.c_void_p,
                ctypes.c_longlong,
                ctypes.POINTER(_Stats),
            ]
        for name in ("cprt_h2d", "cprt_d2h", "cprt_d2d"):
            getattr(self.lib, name).argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong]
        self.lib.cprt_memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong]
        self.lib.cprt_free.argtypes = [ctypes.c_void_p]
        self.lib.cprt_malloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_longlong]

    def _check(self, rc: int, what: str) -> None:
        if rc == -2:
            raise ValueError(f"{what}: unknown dtype code")
        if rc != 0:
            buf = ctypes.create_string_buffer(256)
            self.lib.cprt_error(rc, buf, 256)
            raise CudaFault(what, rc, buf.value.decode(errors="replace"))

    def init(self) -> tuple[str, int, int]:
        """(device name, L2 bytes, total memory bytes) of device 0."""
        name = ctypes.create_string_buffer(256)
        l2, total = ctypes.c_longlong(), ctypes.c_longlong()
        self._check(self.lib.cprt_init(name, 256, ctypes.byref(l2), ctypes.byref(total)), "init")
        return name.value.decode(), l2.value, total.value

    def malloc(self, nbytes: int) -> int:
        p = ctypes.c_void_p()
        self._check(self.lib.cprt_malloc(ctypes.byref(p), nbytes), f"allocating {nbytes} bytes")
        return p.value or 0

    def free(self, ptr: int) -> None:
        self._check(self.lib.cprt_free(ptr), "freeing device memory")

    def h2d(self, dst: int, src: np.ndarray) -> None:
        self._check(self.lib.cprt_h2d(dst, src.ctypes.data, src.nbytes), "uploading")

    def d2h(self, dst: np.ndarray, src: int) -> None:
        self._check(self.lib.cprt_d2h(dst.ctypes.data, src, dst.nbytes), "downloading")

    def d2d(self, dst: int, src: int, nbytes: int) -> None:
        self._check(self.lib.cprt_d2d(dst, src, nbytes), "copying on the device")

    def memset(self, ptr: int, value: int, nbytes: int) -> None:
        self._check(self.lib.cprt_memset(ptr, value, nbytes), "memset")

    def sync(self) -> None:
        self._check(self.lib.cprt_sync(), "synchronising the device")

    def compare(
        self, dtype: str, got: int, want: int, n: int, atol: float, rtol: float, host=False
    ) -> CompareStats:
        """The compare rule on device pointers (host=True: on host pointers)."""
        st = _Stats()
        fn = self.lib.cprt_compare_host if host else self.lib.cprt_compare
        self._check(fn(DTYPE_CODES[dtype], got, want, n, atol, rtol, ctypes.byref(st)), "compare")
        return _stats(st)

    def diff(self, dtype: str, a: int, b: int, n: int, host=False) -> CompareStats:
        """Bits differ (`bad` > 0) and the first value difference (host=True: host pointers)."""
        st = _Stats()
        fn = self.lib.cprt_diff_host if host else self.lib.cprt_diff
        self._check(fn(DTYPE_CODES[dtype], a, b, n, ctypes.byref(st)), "diff")
        return _stats(st)


def _stats(st: _Stats) -> CompareStats:
    first = -1 if st.first == 2**64 - 1 else int(st.first)
    if st.nonfinite:
        return CompareStats(int(st.bad), first, math.inf, math.inf)
    a, r = _bits_to_float(st.max_abs_bits), _bits_to_float(st.max_rel_bits)
    return CompareStats(int(st.bad), first, a, r)
