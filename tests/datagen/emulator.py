# ruff: noqa: E501  (the C++ prelude keeps its own line lengths)
"""A CPU emulator of the CUDA execution model, for tests (no GPU needed).

A CUDA source is compiled by g++ against `PRELUDE`: each CUDA thread of a block is a ucontext
fiber (or, for kernels without barriers or warp operations, a plain call), blocks run one after
another, `__syncthreads` and warp operations (shuffles, ballots, `__syncwarp`) are barriers,
`__shared__` variables are block-wide statics and `extern __shared__` arrays point into the
launch's dynamic shared memory (both poisoned with 0xFF bytes when a block starts). Device
memory is host memory: a host function that receives "device" pointers can be called with host
arrays; cudaMalloc/cudaFree/cudaMemset/cudaMemcpy work on host memory. Kernel launches
`k<<<grid, block[, smem[, stream]]>>>(args)` are rewritten into calls of `emu_launch`, which
runs every block of the grid before returning.

Problems the GPU would report, or undefined behaviour (a shuffle reading a lane that does not
take part, a deadlock at barriers, an invalid launch configuration, more threads than the
kernel's `__launch_bounds__`, more than 48 KiB of dynamic shared memory without opting in, more
than 48 KiB of static shared memory) abort with a message starting "emulator: ".
Exported controls:
- `emu_install_segv_handler()`: a fault (a guard page after each cudaMalloc allocation and
  after the dynamic shared memory, below each fiber's stack) prints such a message and exits
  with status 86;
- `emu_register_device(p, n)` and `emu_protect_device(1)`: those pages (and cudaMalloc's) are
  inaccessible outside kernels, cudaMemset and cudaMemcpy, so host code touching device memory
  faults;
- `emu_set_reverse(1)`: the blocks of a grid and the threads of a block run last to first,
  which provokes other races.
Not covered: timing, races that neither schedule provokes, the precision of fast intrinsics
(they compute the IEEE result), and anything specific to the GPU's memory model.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from pathlib import Path

__all__ = [
    "PRELUDE",
    "EmulatorBuildError",
    "build",
    "needs_fibers",
    "rewrite_launches",
    "SKIP_REASON",
]

# Why the emulator tests skip by default, and what runs them (shown by `pytest -rs`).
SKIP_REASON = (
    "slow CPU emulation of every generated kernel (minutes): set CUDAPERF_EMULATE=1 to run it "
    "(CUDAPERF_EMULATE_TASKS / _FAMILIES / _TIMEOUT narrow or widen it)"
)

PRELUDE = r"""
#include <algorithm>
#include <cassert>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <csignal>
#include <ucontext.h>
#include <unistd.h>
#include <sys/mman.h>
#include <vector>
#define __global__
#define __device__
#define __host__
#define __constant__
#define __noinline__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) alignas(n)
#define __ldg(p) (*(p))
#define __ldcs(p) (*(p))
#define __ldcg(p) (*(p))
#define __ldlu(p) (*(p))
#define __stcs(p, v) (*(p) = (v))
#define __stcg(p, v) (*(p) = (v))
#define __stwt(p, v) (*(p) = (v))
#define __stcs(p, v) (*(p) = (v))
static const int warpSize = 32;
struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
typedef dim3 uint3;
#define EMU_VEC2(T, N, A) struct alignas(A) N { T x, y; }; \
    inline N make_##N(T a, T b) { N r; r.x = a; r.y = b; return r; }
#define EMU_VEC3(T, N) struct N { T x, y, z; }; \
    inline N make_##N(T a, T b, T c) { N r; r.x = a; r.y = b; r.z = c; return r; }
#define EMU_VEC4(T, N, A) struct alignas(A) N { T x, y, z, w; }; \
    inline N make_##N(T a, T b, T c, T d) { N r; r.x = a; r.y = b; r.z = c; r.w = d; return r; }
EMU_VEC2(float, float2, 8) EMU_VEC3(float, float3) EMU_VEC4(float, float4, 16)
EMU_VEC2(double, double2, 16) EMU_VEC3(double, double3) EMU_VEC4(double, double4, 32)
EMU_VEC2(int, int2, 8) EMU_VEC3(int, int3) EMU_VEC4(int, int4, 16)
EMU_VEC2(unsigned, uint2, 8) EMU_VEC4(unsigned, uint4, 16)
EMU_VEC2(long long, longlong2, 16) EMU_VEC2(unsigned long long, ulonglong2, 16)
EMU_VEC2(short, short2, 4) EMU_VEC4(short, short4, 8)
EMU_VEC2(unsigned short, ushort2, 4) EMU_VEC4(unsigned short, ushort4, 8)
EMU_VEC4(signed char, char4, 4) EMU_VEC4(unsigned char, uchar4, 4)
EMU_VEC2(signed char, char2, 2) EMU_VEC2(unsigned char, uchar2, 2)
// Math: the fast/rounding intrinsics compute the IEEE result.
inline float rsqrtf(float v) { return 1.0f / sqrtf(v); }
inline double rsqrt(double v) { return 1.0 / sqrt(v); }
inline float rcbrtf(float v) { return 1.0f / cbrtf(v); }
inline float __expf(float v) { return expf(v); }
inline float __exp10f(float v) { return powf(10.0f, v); }
inline float __logf(float v) { return logf(v); }
inline float __log2f(float v) { return log2f(v); }
inline float __log10f(float v) { return log10f(v); }
inline float __sinf(float v) { return sinf(v); }
inline float __cosf(float v) { return cosf(v); }
inline float __tanf(float v) { return tanf(v); }
inline void __sincosf(float v, float* s, float* c) { *s = sinf(v); *c = cosf(v); }
inline float __powf(float a, float b) { return powf(a, b); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __saturatef(float v) { return v < 0.0f ? 0.0f : (v > 1.0f ? 1.0f : v); }
inline float exp10f_emu(float v) { return powf(10.0f, v); }
#define EMU_RN(T, S) \
    inline T __fadd##S(T a, T b) { return a + b; } inline T __fsub##S(T a, T b) { return a - b; } \
    inline T __fmul##S(T a, T b) { return a * b; } inline T __fdiv##S(T a, T b) { return a / b; } \
    inline T __frcp##S(T a) { return 1.0f / a; } inline T __fsqrt##S(T a) { return sqrtf(a); } \
    inline T __fmaf##S(T a, T b, T c) { return fmaf(a, b, c); }
EMU_RN(float, _rn) EMU_RN(float, _rz) EMU_RN(float, _ru) EMU_RN(float, _rd)
#define EMU_DRN(S) \
    inline double __dadd##S(double a, double b) { return a + b; } \
    inline double __dsub##S(double a, double b) { return a - b; } \
    inline double __dmul##S(double a, double b) { return a * b; } \
    inline double __ddiv##S(double a, double b) { return a / b; } \
    inline double __drcp##S(double a) { return 1.0 / a; } \
    inline double __dsqrt##S(double a) { return sqrt(a); } \
    inline double __fma##S(double a, double b, double c) { return fma(a, b, c); }
EMU_DRN(_rn) EMU_DRN(_rz) EMU_DRN(_ru) EMU_DRN(_rd)
template <class To, class From> inline To emu_bits(From v) {
    static_assert(sizeof(To) == sizeof(From), "size");
    To r; std::memcpy(&r, &v, sizeof r); return r;
}
inline int __float_as_int(float v) { return emu_bits<int>(v); }
inline unsigned __float_as_uint(float v) { return emu_bits<unsigned>(v); }
inline float __int_as_float(int v) { return emu_bits<float>(v); }
inline float __uint_as_float(unsigned v) { return emu_bits<float>(v); }
inline long long __double_as_longlong(double v) { return emu_bits<long long>(v); }
inline double __longlong_as_double(long long v) { return emu_bits<double>(v); }
inline int __double2hiint(double v) { return (int)(emu_bits<unsigned long long>(v) >> 32); }
inline int __double2loint(double v) { return (int)emu_bits<unsigned long long>(v); }
inline int __float2int_rn(float v) { return (int)nearbyintf(v); }
inline int __float2int_rz(float v) { return (int)v; }
inline int __float2int_rd(float v) { return (int)floorf(v); }
inline int __float2int_ru(float v) { return (int)ceilf(v); }
inline float __int2float_rn(int v) { return (float)v; }
inline float __double2float_rn(double v) { return (float)v; }
// Integer intrinsics.
inline int __popc(unsigned v) { return __builtin_popcount(v); }
inline int __popcll(unsigned long long v) { return __builtin_popcountll(v); }
inline int __ffs(int v) { return __builtin_ffs(v); }
inline int __ffsll(long long v) { return __builtin_ffsll(v); }
inline int __clz(int v) { return v ? __builtin_clz((unsigned)v) : 32; }
inline int __clzll(long long v) { return v ? __builtin_clzll((unsigned long long)v) : 64; }
inline unsigned __brev(unsigned v) {
    unsigned r = 0;
    for (int i = 0; i < 32; ++i) r |= ((v >> i) & 1u) << (31 - i);
    return r;
}
inline unsigned long long __brevll(unsigned long long v) {
    return ((unsigned long long)__brev((unsigned)v) << 32) | __brev((unsigned)(v >> 32));
}
inline unsigned __funnelshift_l(unsigned lo, unsigned hi, unsigned s) {
    unsigned long long c = ((unsigned long long)hi << 32) | lo; return (unsigned)((c << (s & 31)) >> 32);
}
inline unsigned __funnelshift_lc(unsigned lo, unsigned hi, unsigned s) {
    unsigned long long c = ((unsigned long long)hi << 32) | lo; return (unsigned)((c << (s > 32 ? 32 : s)) >> 32);
}
inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned s) {
    unsigned long long c = ((unsigned long long)hi << 32) | lo; return (unsigned)(c >> (s & 31));
}
inline unsigned __funnelshift_rc(unsigned lo, unsigned hi, unsigned s) {
    unsigned long long c = ((unsigned long long)hi << 32) | lo; return (unsigned)(c >> (s > 32 ? 32 : s));
}
inline int __mul24(int a, int b) { return a * b; }
inline unsigned __umul24(unsigned a, unsigned b) { return a * b; }
inline int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
inline long long __mul64hi(long long a, long long b) { return (long long)(((__int128)a * b) >> 64); }
inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
    return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
inline unsigned __sad(int a, int b, unsigned c) { return (unsigned)(a > b ? a - b : b - a) + c; }
inline unsigned __usad(unsigned a, unsigned b, unsigned c) { return (a > b ? a - b : b - a) + c; }
template <class A, class B> inline auto min(A a, B b) { return a < b ? a : b; }
template <class A, class B> inline auto max(A a, B b) { return a > b ? a : b; }
inline void __threadfence() {}
inline void __threadfence_block() {}
inline void __threadfence_system() {}
inline long long clock64() { return 0; }
inline int clock() { return 0; }
// Atomics: threads of the emulator never run at the same time, so plain read-modify-write.
template <class T> struct emu_id { typedef T type; };
template <class T> using emu_id_t = typename emu_id<T>::type;  // not deduced: converts
template <class T> struct emu_atomic_ok {
    static const bool value = std::is_same<T, int>::value || std::is_same<T, unsigned>::value ||
        std::is_same<T, unsigned long long>::value || std::is_same<T, long long>::value;
};
template <class T, class = std::enable_if_t<emu_atomic_ok<T>::value || std::is_floating_point<T>::value>>
inline T atomicAdd(T* p, emu_id_t<T> v) { T o = *p; *p = o + v; return o; }
inline int atomicSub(int* p, int v) { int o = *p; *p = o - v; return o; }
inline unsigned atomicSub(unsigned* p, unsigned v) { unsigned o = *p; *p = o - v; return o; }
template <class T, class = std::enable_if_t<emu_atomic_ok<T>::value>>
inline T atomicMax(T* p, emu_id_t<T> v) { T o = *p; *p = o > v ? o : v; return o; }
template <class T, class = std::enable_if_t<emu_atomic_ok<T>::value>>
inline T atomicMin(T* p, emu_id_t<T> v) { T o = *p; *p = o < v ? o : v; return o; }
template <class T, class = std::enable_if_t<emu_atomic_ok<T>::value || std::is_same<T, unsigned short>::value>>
inline T atomicCAS(T* p, emu_id_t<T> c, emu_id_t<T> v) { T o = *p; if (o == c) *p = v; return o; }
template <class T, class = std::enable_if_t<emu_atomic_ok<T>::value || std::is_same<T, float>::value>>
inline T atomicExch(T* p, emu_id_t<T> v) { T o = *p; *p = v; return o; }
template <class T, class = std::enable_if_t<emu_atomic_ok<T>::value>>
inline T atomicAnd(T* p, emu_id_t<T> v) { T o = *p; *p = o & v; return o; }
template <class T, class = std::enable_if_t<emu_atomic_ok<T>::value>>
inline T atomicOr(T* p, emu_id_t<T> v) { T o = *p; *p = o | v; return o; }
template <class T, class = std::enable_if_t<emu_atomic_ok<T>::value>>
inline T atomicXor(T* p, emu_id_t<T> v) { T o = *p; *p = o ^ v; return o; }
inline unsigned atomicInc(unsigned* p, unsigned v) { unsigned o = *p; *p = o >= v ? 0 : o + 1; return o; }
inline unsigned atomicDec(unsigned* p, unsigned v) {
    unsigned o = *p; *p = (o == 0 || o > v) ? v : o - 1; return o;
}
#define atomicAdd_block atomicAdd
#define atomicAdd_system atomicAdd
#define atomicMax_block atomicMax
#define atomicMin_block atomicMin
static dim3 threadIdx, blockIdx, blockDim, gridDim;
// Fibers: every CUDA thread of a block is a ucontext; barriers switch back to the scheduler.
enum { READY, AT_BLOCK, AT_WARP, DONE };
static ucontext_t emu_main;
static std::vector<ucontext_t> emu_ctx;
static std::vector<int> emu_state;
static std::vector<unsigned long long> emu_gen;  // release batch of each thread's last warp wait
static unsigned long long emu_gen_next = 1;
static char* emu_stacks;
static size_t emu_stacks_n;
static const size_t EMU_STACK = 1 << 17, EMU_GUARD = 1 << 12;
static int emu_cur, emu_nt;
static void (*emu_body)(void*);
static void* emu_arg;
static unsigned long long emu_buf[32][32];
static int emu_block_acc[2], emu_phase;
struct emu_shared_reg { void* p; size_t n; unsigned long long launch; };
static std::vector<emu_shared_reg> emu_shared_regs;  // poisoned when each later block starts
static unsigned long long emu_launch_id;
static size_t emu_static_smem;  // bytes of __shared__ variables the current launch used
static void emu_fail(const char* m);
static void emu_register_shared(void* p, size_t n) {
    emu_shared_reg* r = nullptr;
    for (auto& x : emu_shared_regs) if (x.p == p) r = &x;
    if (!r) {
        emu_shared_regs.push_back({p, n, 0});
        r = &emu_shared_regs.back();
    }
    if (r->launch == emu_launch_id) return;
    r->launch = emu_launch_id;
    emu_static_smem += n;
    if (emu_static_smem > 48 * 1024) emu_fail("more than 48 KiB of static __shared__ memory in one kernel (nvcc rejects it)");
}
// Device memory (the arrays passed in and cudaMalloc's) is inaccessible to host code after
// emu_protect_device(1): only kernels, cudaMemset and cudaMemcpy may touch it.
struct emu_range { char* p; size_t n; };
static std::vector<emu_range> emu_dev_ranges;
static bool emu_dev_protect, emu_in_device;
static void emu_dev_access(bool on) {
    if (!emu_dev_protect || emu_in_device == on) return;
    emu_in_device = on;
    for (auto& r : emu_dev_ranges) mprotect(r.p, r.n, on ? PROT_READ | PROT_WRITE : PROT_NONE);
}
extern "C" void emu_register_device(void* p, size_t n) { emu_dev_ranges.push_back({(char*)p, n}); }
extern "C" void emu_protect_device(int on) {
    if (on) { emu_dev_protect = true; emu_in_device = true; emu_dev_access(false); }
    else { emu_dev_access(true); emu_dev_protect = false; }
}
struct emu_device_scope {  // device memory accessible while it lives (restores the state)
    bool was = emu_in_device;
    emu_device_scope() { emu_dev_access(true); }
    ~emu_device_scope() { emu_dev_access(was); }
};
static int emu_rev;  // run blocks, and the threads of a block, last to first (other races)
extern "C" void emu_set_reverse(int r) { emu_rev = r; }
static bool emu_smem_optin;
static size_t emu_smem_size;
static const size_t EMU_SMEM_MAX = 232448;
static unsigned char* emu_dyn_base;  // EMU_SMEM_MAX (page-rounded) bytes, then a guard page
static unsigned char* emu_dyn_smem;  // this launch's dynamic shared memory, its end at the guard
static void emu_fail(const char* m) { std::fprintf(stderr, "emulator: %s\n", m); std::fflush(stderr); std::abort(); }
static void emu_wait(int kind) {
    if (emu_state.empty()) emu_fail("barrier or warp operation outside a threaded launch");
    emu_state[emu_cur] = kind;
    swapcontext(&emu_ctx[emu_cur], &emu_main);
}
static inline void __syncthreads() { emu_wait(AT_BLOCK); }
static inline int emu_block_reduce(int pred, int op) {
    int p = emu_phase;
    if (op == 0) emu_block_acc[p] += pred != 0;
    else if (op == 1) emu_block_acc[p] |= pred != 0;
    else emu_block_acc[p] += pred == 0;
    emu_wait(AT_BLOCK);
    int r = emu_block_acc[p];
    return op == 2 ? r == 0 : r;
}
static inline int __syncthreads_count(int p) { return emu_block_reduce(p, 0); }
static inline int __syncthreads_or(int p) { return emu_block_reduce(p, 1); }
static inline int __syncthreads_and(int p) { return emu_block_reduce(p, 2); }
static inline void __syncwarp(unsigned = 0xffffffffu) { emu_wait(AT_WARP); }
static inline unsigned __activemask() {
    int w = emu_cur >> 5;
    unsigned m = 0;
    for (int l = 0; l < 32 && w * 32 + l < emu_nt; ++l)
        if (emu_state.empty() || emu_state[w * 32 + l] != DONE) m |= 1u << l;
    return m;
}
static inline int __lane_id() { return emu_cur & 31; }
template <class T> static T emu_exchange(T v, int src, bool strict = true) {
    static_assert(sizeof(T) <= 8, "shuffle of a type larger than 8 bytes");
    int w = emu_cur >> 5, lane = emu_cur & 31;
    std::memcpy(&emu_buf[w][lane], &v, sizeof(T));
    emu_wait(AT_WARP);
    int s = w * 32 + src;
    if (s >= emu_nt || emu_state[s] == DONE) emu_fail("shuffle reads an exited lane");
    if (emu_gen[s] != emu_gen[emu_cur]) emu_fail("shuffle reads a lane that does not take part");
    T out;
    std::memcpy(&out, &emu_buf[w][src], sizeof(T));
    emu_wait(AT_WARP);
    return out;
}
template <class T> T __shfl_xor_sync(unsigned, T v, int o, int width = 32) {
    int l = emu_cur & 31, s = l ^ o;
    if ((s & ~(width - 1)) != (l & ~(width - 1))) s = l;
    return emu_exchange(v, s);
}
template <class T> T __shfl_down_sync(unsigned, T v, unsigned d, int width = 32) {
    int l = emu_cur & 31, base = l & ~(width - 1);
    return emu_exchange(v, (int)(l - base + d) < width ? l + (int)d : l);
}
template <class T> T __shfl_up_sync(unsigned, T v, unsigned d, int width = 32) {
    int l = emu_cur & 31, base = l & ~(width - 1);
    return emu_exchange(v, l - base >= (int)d ? l - (int)d : l);
}
template <class T> T __shfl_sync(unsigned, T v, int s, int width = 32) {
    int l = emu_cur & 31, base = l & ~(width - 1);
    return emu_exchange(v, base + (s & (width - 1)));
}
static unsigned emu_vote(int pred) {  // bit l set when lane l (taking part) has pred != 0
    int w = emu_cur >> 5;
    emu_buf[w][emu_cur & 31] = pred != 0;
    emu_wait(AT_WARP);
    unsigned m = 0;
    for (int l = 0; l < 32 && w * 32 + l < emu_nt; ++l) {
        int t = w * 32 + l;
        if (emu_state[t] != DONE && emu_gen[t] == emu_gen[emu_cur] && emu_buf[w][l]) m |= 1u << l;
    }
    emu_wait(AT_WARP);
    return m;
}
static unsigned emu_members() {
    int w = emu_cur >> 5;
    unsigned m = 0;
    for (int l = 0; l < 32 && w * 32 + l < emu_nt; ++l) {
        int t = w * 32 + l;
        if (emu_state[t] != DONE && emu_gen[t] == emu_gen[emu_cur]) m |= 1u << l;
    }
    return m;
}
static inline unsigned __ballot_sync(unsigned, int p) { return emu_vote(p); }
static inline int __any_sync(unsigned, int p) { return emu_vote(p) != 0; }
static inline int __all_sync(unsigned, int p) {
    int w = emu_cur >> 5;
    emu_buf[w][emu_cur & 31] = p != 0;
    emu_wait(AT_WARP);
    unsigned mem = emu_members();
    bool all = true;
    for (int l = 0; l < 32; ++l) if ((mem >> l & 1u) && !emu_buf[w][l]) all = false;
    emu_wait(AT_WARP);
    return all;
}
template <class T> T __reduce_add_sync(unsigned, T v) {
    T s = v;
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    return s;
}
static void emu_set(int t) {
    emu_cur = t;
    threadIdx = dim3(t % blockDim.x, (t / blockDim.x) % blockDim.y, t / (blockDim.x * blockDim.y));
}
static void emu_entry(int t) {
    emu_body(emu_arg);
    emu_state[t] = DONE;
}
static void emu_run_block(bool fibers) {
    int nt = emu_nt;
    for (auto& r : emu_shared_regs) std::memset(r.p, 0xFF, r.n);  // uninitialised
    std::memset(emu_dyn_smem, 0xFF, emu_smem_size);
    if (!fibers) {
        for (int k = 0; k < nt; ++k) { emu_set(emu_rev ? nt - 1 - k : k); emu_body(emu_arg); }
        return;
    }
    emu_ctx.assign(nt, ucontext_t());
    emu_state.assign(nt, READY);
    emu_gen.assign(nt, 0);
    emu_phase = 0;
    emu_block_acc[0] = emu_block_acc[1] = 0;
    if (emu_stacks_n < (size_t)nt) {
        if (emu_stacks) munmap(emu_stacks, emu_stacks_n * EMU_STACK);
        emu_stacks_n = 1024;
        emu_stacks = (char*)mmap(nullptr, emu_stacks_n * EMU_STACK, PROT_READ | PROT_WRITE,
                                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (emu_stacks == MAP_FAILED) emu_fail("mmap of fiber stacks failed");
        for (size_t t = 0; t < emu_stacks_n; ++t)  // a guard page below each fiber's stack
            mprotect(emu_stacks + t * EMU_STACK, EMU_GUARD, PROT_NONE);
    }
    for (int t = 0; t < nt; ++t) {
        getcontext(&emu_ctx[t]);
        emu_ctx[t].uc_stack.ss_sp = emu_stacks + t * EMU_STACK + EMU_GUARD;
        emu_ctx[t].uc_stack.ss_size = EMU_STACK - EMU_GUARD;
        emu_ctx[t].uc_link = &emu_main;
        makecontext(&emu_ctx[t], (void (*)())emu_entry, 1, t);
    }
    for (;;) {
        bool ran = false;
        for (int k = 0; k < nt; ++k) {
            int t = emu_rev ? nt - 1 - k : k;
            if (emu_state[t] != READY) continue;
            emu_set(t);
            swapcontext(&emu_main, &emu_ctx[t]);
            ran = true;
        }
        if (ran) continue;
        // Every live thread waits. Release the lanes of each warp that wait at a warp
        // operation (together: one batch); lanes of that warp at __syncthreads or exited do
        // not take part.
        bool released = false;
        for (int w = 0; w * 32 < nt; ++w) {
            int lo = w * 32, hi = lo + 32 < nt ? lo + 32 : nt;
            unsigned long long g = emu_gen_next++;
            for (int t = lo; t < hi; ++t)
                if (emu_state[t] == AT_WARP) { emu_state[t] = READY; emu_gen[t] = g; released = true; }
        }
        if (released) continue;
        int live = 0, at_block = 0;
        for (int t = 0; t < nt; ++t) {
            live += emu_state[t] != DONE;
            at_block += emu_state[t] == AT_BLOCK;
        }
        if (!live) return;
        if (at_block != live) emu_fail("deadlock: threads wait at different barriers");
        emu_phase ^= 1;
        emu_block_acc[emu_phase] = 0;
        for (int t = 0; t < nt; ++t) if (emu_state[t] == AT_BLOCK) emu_state[t] = READY;
    }
}
// A fault (an access to a guard page: past the end of an array or of a fiber's stack) prints
// where it happened and exits with status 86.
static void emu_segv(int, siginfo_t* si, void*) {
    char b[256];
    uintptr_t a = (uintptr_t)si->si_addr, lo = (uintptr_t)emu_stacks;
    bool stack = emu_stacks && a >= lo && a < lo + emu_stacks_n * EMU_STACK;
    uintptr_t dyn = (uintptr_t)emu_dyn_base + (EMU_SMEM_MAX + 4095) / 4096 * 4096;
    bool smem = emu_dyn_base && a >= dyn && a < dyn + 4096, host = false;
    if (!emu_in_device)
        for (auto& r : emu_dev_ranges) host |= a >= (uintptr_t)r.p && a < (uintptr_t)r.p + r.n;
    const char* what = stack ? "fiber stack overflow (emulator limit: 124 KiB per thread)"
                       : smem  ? "access past the end of the launch's dynamic shared memory"
                       : host  ? "host code dereferences device memory"
                               : "invalid memory access";
    int n = emu_in_device || !emu_dev_protect
        ? std::snprintf(b, sizeof b, "emulator: %s at address 0x%lx (thread %d of block %u,%u,%u)\n",
                        what, (unsigned long)a, emu_cur, blockIdx.x, blockIdx.y, blockIdx.z)
        : std::snprintf(b, sizeof b, "emulator: %s at address 0x%lx (in host code)\n", what,
                        (unsigned long)a);
    if (write(2, b, n) < 0) _exit(87);
    _exit(86);
}
extern "C" void emu_install_segv_handler() {
    static char alt[1 << 16];
    stack_t ss;
    ss.ss_sp = alt;
    ss.ss_size = sizeof alt;
    ss.ss_flags = 0;
    sigaltstack(&ss, nullptr);
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = emu_segv;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigaction(SIGSEGV, &sa, nullptr);
    sigaction(SIGBUS, &sa, nullptr);
}
template <class F> static void emu_call(void* f) { (*(F*)f)(); }
template <class F>
void emu_launch(dim3 g, dim3 b, F&& body, bool fibers, size_t smem = 0, long long bound = 0) {
    if (g.x == 0 || g.y == 0 || g.z == 0) emu_fail("launch with an empty grid (invalid configuration)");
    if (b.x == 0 || b.y == 0 || b.z == 0) emu_fail("launch with an empty block (invalid configuration)");
    unsigned long long nt = (unsigned long long)b.x * b.y * b.z;
    if (nt > 1024 || b.z > 64) emu_fail("launch with more than 1024 threads per block (invalid configuration)");
    if (g.x > 2147483647u || g.y > 65535 || g.z > 65535) emu_fail("grid too large (invalid configuration)");
    if (bound > 0 && (long long)nt > bound) emu_fail("launch with more threads than the kernel's __launch_bounds__");
    if (smem > 48 * 1024 && !emu_smem_optin) emu_fail("more than 48 KiB dynamic shared memory without cudaFuncSetAttribute");
    if (smem > EMU_SMEM_MAX) emu_fail("too much dynamic shared memory");
    const size_t span = (EMU_SMEM_MAX + 4095) / 4096 * 4096;
    if (!emu_dyn_base) {
        emu_dyn_base = (unsigned char*)mmap(nullptr, span + 4096, PROT_READ | PROT_WRITE,
                                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (emu_dyn_base == MAP_FAILED) emu_fail("mmap of dynamic shared memory failed");
        mprotect(emu_dyn_base + span, 4096, PROT_NONE);
    }
    emu_smem_size = (smem + 15) / 16 * 16;
    emu_dyn_smem = emu_dyn_base + span - emu_smem_size;
    ++emu_launch_id;
    emu_static_smem = 0;
    emu_device_scope device;
    gridDim = g;
    blockDim = b;
    emu_nt = (int)nt;
    auto saved_body = emu_body;
    auto saved_arg = emu_arg;
    emu_body = emu_call<std::remove_reference_t<F>>;
    emu_arg = (void*)&body;
    for (unsigned bz = 0; bz < g.z; ++bz)
        for (unsigned by = 0; by < g.y; ++by)
            for (unsigned bx = 0; bx < g.x; ++bx) {
                if (emu_rev) blockIdx = dim3(g.x - 1 - bx, g.y - 1 - by, g.z - 1 - bz);
                else blockIdx = dim3(bx, by, bz);
                emu_run_block(fibers);
            }
    emu_body = saved_body;
    emu_arg = saved_arg;
    emu_state.clear();
}
// Runtime API on host memory.
typedef int cudaError_t;
typedef void* cudaStream_t;
typedef void* cudaEvent_t;
enum { cudaSuccess = 0, cudaErrorMemoryAllocation = 2 };
enum cudaMemcpyKind { cudaMemcpyHostToHost, cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost,
                      cudaMemcpyDeviceToDevice, cudaMemcpyDefault };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
                         cudaFuncAttributePreferredSharedMemoryCarveout = 9 };
enum cudaDeviceAttr { cudaDevAttrMaxThreadsPerBlock = 1, cudaDevAttrMultiProcessorCount = 16,
                      cudaDevAttrMaxSharedMemoryPerBlockOptin = 97 };
#define cudaStreamDefault 0
#define cudaStreamNonBlocking 1
inline const char* cudaGetErrorString(cudaError_t) { return "emulated error"; }
// cudaMalloc: 16-byte aligned, the end against a guard page, poisoned (fresh memory is garbage).
struct emu_alloc { char* user; char* base; size_t len; };
static std::vector<emu_alloc> emu_allocs;
template <class T> inline cudaError_t cudaMalloc(T** p, size_t n) {
    size_t body = (n + 15) / 16 * 16, len = (body + EMU_GUARD - 1) / EMU_GUARD * EMU_GUARD + EMU_GUARD;
    char* base = (char*)mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) return cudaErrorMemoryAllocation;
    mprotect(base + len - EMU_GUARD, EMU_GUARD, PROT_NONE);
    char* user = base + len - EMU_GUARD - body;
    std::memset(user, 0xFF, body);
    emu_allocs.push_back({user, base, len});
    emu_dev_ranges.push_back({base, len - EMU_GUARD});
    if (emu_dev_protect && !emu_in_device) mprotect(base, len - EMU_GUARD, PROT_NONE);
    *p = (T*)user;
    return cudaSuccess;
}
template <class T> inline cudaError_t cudaMallocAsync(T** p, size_t n, cudaStream_t = 0) { return cudaMalloc(p, n); }
inline cudaError_t cudaFree(void* p) {
    for (size_t i = 0; i < emu_allocs.size(); ++i)
        if (emu_allocs[i].user == p) {
            munmap(emu_allocs[i].base, emu_allocs[i].len);
            for (size_t k = 0; k < emu_dev_ranges.size(); ++k)
                if (emu_dev_ranges[k].p == emu_allocs[i].base) emu_dev_ranges.erase(emu_dev_ranges.begin() + k--);
            emu_allocs.erase(emu_allocs.begin() + i);
            return cudaSuccess;
        }
    return p ? 1 : cudaSuccess;  // cudaErrorInvalidValue
}
inline cudaError_t cudaFreeAsync(void* p, cudaStream_t = 0) { return cudaFree(p); }
inline cudaError_t cudaMemset(void* p, int v, size_t n) { emu_device_scope d; std::memset(p, v, n); return cudaSuccess; }
inline cudaError_t cudaMemsetAsync(void* p, int v, size_t n, cudaStream_t = 0) { return cudaMemset(p, v, n); }
inline cudaError_t cudaMemcpy(void* d, const void* s, size_t n, cudaMemcpyKind) { emu_device_scope x; std::memmove(d, s, n); return cudaSuccess; }
inline cudaError_t cudaMemcpyAsync(void* d, const void* s, size_t n, cudaMemcpyKind k, cudaStream_t = 0) {
    return cudaMemcpy(d, s, n, k);
}
template <class T> inline cudaError_t cudaMemcpyToSymbol(T& sym, const void* s, size_t n, size_t off = 0,
                                                         cudaMemcpyKind = cudaMemcpyHostToDevice) {
    std::memcpy((char*)&sym + off, s, n); return cudaSuccess;
}
template <class T> inline cudaError_t cudaMemcpyFromSymbol(void* d, const T& sym, size_t n, size_t off = 0,
                                                           cudaMemcpyKind = cudaMemcpyDeviceToHost) {
    std::memcpy(d, (const char*)&sym + off, n); return cudaSuccess;
}
template <class T> inline cudaError_t cudaGetSymbolAddress(void** p, T& sym) { *p = (void*)&sym; return cudaSuccess; }
inline cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
inline cudaError_t cudaPeekAtLastError() { return cudaSuccess; }
inline cudaError_t cudaGetDevice(int* d) { *d = 0; return cudaSuccess; }
inline cudaError_t cudaSetDevice(int) { return cudaSuccess; }
inline cudaError_t cudaStreamCreate(cudaStream_t* s) { *s = nullptr; return cudaSuccess; }
inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) { *s = nullptr; return cudaSuccess; }
inline cudaError_t cudaStreamDestroy(cudaStream_t) { return cudaSuccess; }
inline cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr a, int) {
    *v = a == cudaDevAttrMultiProcessorCount ? 132 : a == cudaDevAttrMaxThreadsPerBlock ? 1024 : 232448;
    return cudaSuccess;
}
template <class F> inline cudaError_t cudaFuncSetAttribute(F, cudaFuncAttribute a, int v) {
    if (a == cudaFuncAttributeMaxDynamicSharedMemorySize) {
        if (v > 232448) return 1;
        emu_smem_optin = true;
    }
    return cudaSuccess;
}
template <class F> inline cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* n, F, int block, size_t) {
    *n = 2048 / (block > 0 ? block : 1); if (*n > 32) *n = 32; return cudaSuccess;
}
"""


def _split_top(text: str, sep: str = ",") -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == sep and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    return [*out, cur]


_BOUNDS = re.compile(
    r"__global__\s+(?:void\s+)?__launch_bounds__\s*\(([^;{]*?)\)\s*(?:void\s+)?([A-Za-z_]\w*)\s*\("
)


def launch_bounds(src: str) -> dict[str, str]:
    """Kernel name -> the max-threads expression of its `__launch_bounds__` (non-templates)."""
    out = {}
    for m in _BOUNDS.finditer(src):
        before = src[: m.start()].rstrip()
        if before.endswith(">"):  # a template kernel: the bound may use its parameters
            continue
        out[m.group(2)] = _split_top(m.group(1))[0].strip()
    return out


def rewrite_launches(src: str, threaded: bool) -> str:
    """`k<<<g, b[, s[, st]]>>>(args);` -> `emu_launch(dim3(g), dim3(b), [&] { k(args); }, ...)`"""
    bounds = launch_bounds(src)
    out, pos = "", 0
    for m in re.finditer(r"([A-Za-z_]\w*(?:<[^<>;]*>)?)\s*<<<", src):
        if m.start() < pos:
            continue
        end = src.index(">>>", m.end())
        cfg = _split_top(src[m.end() : end])
        i = src.index("(", end)
        depth, j = 0, i
        while True:
            depth += src[j] == "("
            depth -= src[j] == ")"
            if depth == 0:
                break
            j += 1
        args = src[i + 1 : j]
        flag = "true" if threaded else "false"
        smem = cfg[2].strip() if len(cfg) > 2 and cfg[2].strip() else "0"
        bound = bounds.get(m.group(1), "0")
        out += src[pos : m.start()]
        out += (
            f"emu_launch(dim3({cfg[0]}), dim3({cfg[1]}), [&] {{ {m.group(1)}({args}); }}, "
            f"{flag}, (size_t)({smem}), (long long)({bound}))"
        )
        pos = j + 1
    return out + src[pos:]


_EXTERN_SMEM = re.compile(
    r"extern\s+__shared__\s+((?:__align__\s*\(\s*\d+\s*\)\s*|alignas\s*\(\s*\d+\s*\)\s*)*)"
    r"([A-Za-z_][\w\s:<>,]*?)\s*([A-Za-z_]\w*)\s*\[\s*\]\s*;"
)


_SHARED_DECL = re.compile(r"__shared__\s+([^;{}()]*?)\b([A-Za-z_]\w*)\s*((?:\[[^\]]*\]\s*)*);")


def poison_shared(src: str) -> str:
    """`__shared__ T name[..];` in a function -> that, then `emu_register_shared(&name, ..)`:
    the variable is poisoned (0xFF bytes) when each later block starts, like fresh shared
    memory whose contents are undefined."""
    out, pos = "", 0
    for m in _SHARED_DECL.finditer(src):
        if m.group(1).strip().startswith("extern") or src[: m.start()].rstrip().endswith("extern"):
            continue
        before = src[: m.start()]
        if before.count("{") - before.count("}") <= 0:  # file scope
            continue
        out += src[pos : m.end()] + f" emu_register_shared(&{m.group(2)}, sizeof {m.group(2)});"
        pos = m.end()
    return out + src[pos:]


def rewrite_extern_shared(src: str) -> str:
    """`extern __shared__ T name[];` -> `T* const name = (T*)emu_dyn_smem;` (the launch's
    dynamic shared memory, its end against a guard page); at file scope a macro."""

    def sub(m: re.Match) -> str:
        t, name = m.group(2), m.group(3)
        before = src[: m.start()]
        if before.count("{") - before.count("}") <= 0:  # file scope: a macro
            return f"\n#define {name} (({t}*)emu_dyn_smem)\n"
        return f"{t}* const {name} = ({t}*)emu_dyn_smem;"

    return _EXTERN_SMEM.sub(sub, src)


_FIBER_WORDS = (
    "__syncthreads",
    "__shfl",
    "__syncwarp",
    "__ballot",
    "__any_sync",
    "__all_sync",
    "__reduce_",
    "__activemask",
    "__match",
)


def needs_fibers(src: str) -> bool:
    """Whether the kernels use barriers or warp operations (threads must interleave)."""
    return any(k in src for k in _FIBER_WORDS)


class EmulatorBuildError(RuntimeError):
    """g++ rejected the source against the prelude (an unemulated API, or a real error)."""


BUILD_DIR = Path(os.environ.get("TMPDIR", "/tmp")) / "cudaperf-emu"


def translate(src: str) -> str:
    """The C++ source that g++ compiles for CUDA source `src`."""
    body = poison_shared(rewrite_extern_shared(src))
    return PRELUDE + rewrite_launches(body, needs_fibers(src))


def build(src: str, opt: str = "-O1") -> Path:
    """Compile CUDA source `src` for the emulator; returns the shared library (cached)."""
    code = translate(src)
    key = hashlib.sha256((opt + code).encode()).hexdigest()[:20]
    so = BUILD_DIR / f"{key}.so"
    if so.is_file():
        return so
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    cpp = BUILD_DIR / f"{key}.cpp"
    cpp.write_text(code)
    tmp = BUILD_DIR / f"{key}.{os.getpid()}.so"
    p = subprocess.run(
        ["g++", "-std=c++17", opt, "-shared", "-fPIC", "-w", "-o", str(tmp), str(cpp)],
        capture_output=True,
        text=True,
    )
    if p.returncode != 0:
        raise EmulatorBuildError(p.stderr[-3000:])
    os.replace(tmp, so)
    return so
