"""Batched matrix products C[b] = alpha * A[b] B[b] (+ bias), A row-major M x K, B row-major
K x N ("nn") or stored transposed as N x K ("nt"), C row-major M x N. Tasks range from one
large product to thousands of small ones; dtype, alpha, bias and layout vary. All sizes are
arbitrary (tails are handled by bounds checks and zero-filled tiles)."""

from __future__ import annotations

import random

from cudaperf.datagen.base import (
    c_signature,
    c_task,
    cfg,
    family,
    fill,
    impl,
    lit,
    prototype,
    tolerance_for,
)
from cudaperf.tasks.model import TaskKind

_REF = """
/* For every b < batch: C[b] = $what. */
void $entry($params) {
    for (int b = 0; b < batch; ++b) {
        const $t* a = A + (long long)b * M * K;
        const $t* bb = B + (long long)b * K * N;
        $t* c = C + (long long)b * M * N;
        for (int i = 0; i < M; ++i)
            for (int j = 0; j < N; ++j) {
                double acc = 0.0;
                for (int k = 0; k < K; ++k) acc += (double)a[(long long)i * K + k] * (double)$bref;
                c[(long long)i * N + j] = ($t)($alpha * acc)$bias;
            }
    }
}
"""

_HEAD = """
#define T $t
// B element (k, n) of the current matrix: $layout
#define BAT(bb, k, n) $bat
"""

_NAIVE = """
// One thread per output element, threadIdx.x along n; every operand is read from global
// memory for every multiply-add (K loads of A and B per output; weak).
__global__ void gemm_naive($kparams) {
    int n = blockIdx.x * blockDim.x + threadIdx.x, m = blockIdx.y * blockDim.y + threadIdx.y;
    int b = blockIdx.z;
    if (m >= M || n >= N) return;
    const T* a = A + (long long)b * M * K;
    const T* bb = B + (long long)b * K * N;
    T acc = 0;
    for (int k = 0; k < K; ++k) acc += a[(long long)m * K + k] * BAT(bb, k, n);
    C[(long long)b * M * N + (long long)m * N + n] = $alpha * acc$bias;
}

$proto {
    dim3 block($bx, $by);
    dim3 grid((N + $bx - 1) / $bx, (M + $by - 1) / $by, batch);
    if (M > 0 && N > 0 && batch > 0) gemm_naive<<<grid, block>>>($kargs);
}
"""

_TILED = """
// Shared-memory tiling: TS x TS tiles of A and B are loaded cooperatively (coalesced, zero
// outside the matrices), then every thread accumulates its output from shared memory, so
// each operand element is read from global memory M/TS or N/TS times instead of M or N.
#define TS $ts
__global__ void __launch_bounds__(TS * TS) gemm_tiled($kparams) {
    __shared__ T As[TS][TS + 1];
    __shared__ T Bs[TS][TS + 1];
    int tx = threadIdx.x, ty = threadIdx.y, b = blockIdx.z;
    int m0 = blockIdx.y * TS, n0 = blockIdx.x * TS;
    const T* a = A + (long long)b * M * K;
    const T* bb = B + (long long)b * K * N;
    T acc = 0;
    for (int k0 = 0; k0 < K; k0 += TS) {
        int am = m0 + ty, ak = k0 + tx;
        As[ty][tx] = (am < M && ak < K) ? a[(long long)am * K + ak] : (T)0;
$bload
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < TS; ++kk) acc += As[ty][kk] * Bs[kk][tx];
        __syncthreads();
    }
    int m = m0 + ty, n = n0 + tx;
    if (m < M && n < N) C[(long long)b * M * N + (long long)m * N + n] = $alpha * acc$bias;
}

$proto {
    dim3 block(TS, TS);
    dim3 grid((N + TS - 1) / TS, (M + TS - 1) / TS, batch);
    if (M > 0 && N > 0 && batch > 0) gemm_tiled<<<grid, block>>>($kargs);
}
"""

# nn: Bs[ty][tx] = B[k0 + ty][n0 + tx] (coalesced along n).
_BLOAD_NN = """        {
            int bk = k0 + ty, bn = n0 + tx;
            Bs[ty][tx] = (bk < K && bn < N) ? bb[(long long)bk * N + bn] : (T)0;
        }"""
# nt: B is stored N x K; read along k (coalesced) and store transposed (padded: no conflicts).
_BLOAD_NT = """        {
            int bn = n0 + ty, bk = k0 + tx;
            Bs[tx][ty] = (bk < K && bn < N) ? bb[(long long)bn * K + bk] : (T)0;
        }"""

_REG = """
// Register blocking: a block of 16 x 16 threads computes a 64 x 64 tile of C, each thread a
// 4 x 4 sub-block (rows ty + 16 i, columns tx + 16 j, so stores stay coalesced). A and B
// tiles of depth BK = $bk are staged in shared memory; per k step a thread loads 4 + 4 values
// and does 16 multiply-adds from registers.
#define BM 64
#define BN 64
#define BK $bk
__global__ void __launch_bounds__(256) gemm_reg($kparams) {
    __shared__ T As[BK][BM + 1];
    __shared__ T Bs[BK][BN + 1];
    int tx = threadIdx.x & 15, ty = threadIdx.x >> 4, tid = threadIdx.x, b = blockIdx.z;
    int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const T* a = A + (long long)b * M * K;
    const T* bb = B + (long long)b * K * N;
    T acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = 0;
    for (int k0 = 0; k0 < K; k0 += BK) {
        for (int e = tid; e < BM * BK; e += 256) {  // A tile: BK consecutive k per row
            int r = e / BK, kk = e % BK, gm = m0 + r, gk = k0 + kk;
            As[kk][r] = (gm < M && gk < K) ? a[(long long)gm * K + gk] : (T)0;
        }
$bload
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            T av[4], bv[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) av[i] = As[kk][ty + 16 * i];
#pragma unroll
            for (int j = 0; j < 4; ++j) bv[j] = Bs[kk][tx + 16 * j];
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) acc[i][j] += av[i] * bv[j];
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            int m = m0 + ty + 16 * i, n = n0 + tx + 16 * j;
            if (m < M && n < N)
                C[(long long)b * M * N + (long long)m * N + n] = $alpha * acc[i][j]$bias;
        }
}

$proto {
    dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM, batch);
    if (M > 0 && N > 0 && batch > 0) gemm_reg<<<grid, 256>>>($kargs);
}
"""

_RBLOAD_NN = """        for (int e = tid; e < BK * BN; e += 256) {  // B tile: coalesced along n
            int kk = e / BN, c = e % BN, gk = k0 + kk, gn = n0 + c;
            Bs[kk][c] = (gk < K && gn < N) ? bb[(long long)gk * N + gn] : (T)0;
        }"""
_RBLOAD_NT = """        for (int e = tid; e < BK * BN; e += 256) {  // B is N x K: coalesced along k
            int c = e / BK, kk = e % BK, gk = k0 + kk, gn = n0 + c;
            Bs[kk][c] = (gk < K && gn < N) ? bb[(long long)gn * K + gk] : (T)0;
        }"""


@family("gemm", TaskKind.C2CUDA, "gemm")
def gemm(rng: random.Random, index: int):
    t = rng.choice(["float", "float", "double"])
    nt = rng.random() < 0.4
    has_bias = rng.random() < 0.5
    alpha = rng.choice([1.0, 0.5, 2.0, 0.25, -1.0, 0.1])
    batched = rng.random() < 0.5
    items = [
        ("batch", "int", "scalar"),
        ("M", "int", "scalar"),
        ("N", "int", "scalar"),
        ("K", "int", "scalar"),
        ("A", t, "in", "batch*M*K"),
        ("B", t, "in", "batch*K*N"),
        ("C", t, "out", "batch*M*N"),
    ]
    if has_bias:
        items.append(("bias", t, "in", "N"))
    sig = c_signature(*items)
    params = ", ".join(p.c_decl() for p in sig)
    kparams = (
        params.replace(f"const {t}* A", f"const {t}* __restrict__ A")
        .replace(f"const {t}* B", f"const {t}* __restrict__ B")
        .replace(f"{t}* C", f"{t}* __restrict__ C")
    )
    kargs = ", ".join(p.name for p in sig)
    bdesc = "B^T (B stored N x K)" if nt else "B (K x N)"
    what = f"{lit(alpha, 'double')} * A {bdesc}" + (" + bias (per column)" if has_bias else "")
    entry = rng.choice(
        ["batched_gemm", "bmm", "gemm_batched", "matmul_batched"]
        if batched
        else ["gemm", "matmul", "sgemm" if t == "float" else "dgemm", "mat_mul"]
    )
    bref = "bb[(long long)j * K + k]" if nt else "bb[(long long)k * N + j]"
    src = fill(
        _REF,
        what=what,
        entry=entry,
        params=params,
        t=t,
        bref=bref,
        alpha=lit(alpha, "double"),
        bias=" + bias[j]" if has_bias else "",
    )
    common = dict(
        t=t,
        alpha=lit(alpha, t),
        bias=" + bias[n]" if has_bias else "",
        kparams=kparams,
        kargs=kargs,
        proto=prototype(entry, sig),
        layout="stored N x K" if nt else "row-major K x N",
        bat="bb[(long long)(n) * K + (k)]" if nt else "bb[(long long)(k) * N + (n)]",
    )
    head = fill(_HEAD, **common)
    bx = rng.choice([16, 32])
    impls = [
        impl(
            "naive",
            head + fill(_NAIVE, bx=bx, by=256 // bx if bx == 16 else 8, **common),
            ["naive", "coalesced" if not nt else "uncoalesced"],
        ),
        impl(
            "smem_tiled",
            head
            + fill(_TILED, ts=rng.choice([16, 32]), bload=_BLOAD_NT if nt else _BLOAD_NN, **common),
            ["smem_tiling", "coalesced"],
        ),
        impl(
            "register_blocked",
            head
            + fill(_REG, bk=rng.choice([8, 16]), bload=_RBLOAD_NT if nt else _RBLOAD_NN, **common),
            ["smem_tiling", "register_blocking", "coalesced", "unrolled"],
        ),
    ]

    def dims(b: int, m: int, n: int, k: int) -> dict[str, int]:
        return {"batch": b, "M": m, "N": n, "K": k}

    if batched:
        s = rng.choice([32, 64, 96, 128])
        sizes = [
            dims(
                rng.randint(2, 5), rng.randrange(5, 40), rng.randrange(5, 40), rng.randrange(3, 40)
            ),
            dims(256, s, s, s),
            dims((1 << 30) // (2 * s**3), s, s + rng.choice([0, 3]), s),
            dims(rng.randrange(100, 400), rng.randrange(20, 100), rng.randrange(20, 100), s + 1),
        ]
    else:
        m, n, k = rng.choice([(1024, 1024, 512), (2048, 512, 512), (512, 2048, 768)])
        sizes = [
            dims(1, rng.randrange(17, 90), rng.randrange(17, 90), rng.randrange(9, 70)),
            dims(1, 512, 512, 256),
            dims(1, m, n, k),
            dims(1, rng.randrange(300, 800), rng.randrange(300, 800), rng.randrange(200, 600)),
        ]
    configs = [
        cfg(name, sz, k + 1, name == "heldout")
        for k, (name, sz) in enumerate(
            zip(("small", "medium", "large", "heldout"), sizes, strict=True)
        )
    ]
    tol = tolerance_for(t, 4 * max(sz["K"] for sz in sizes))
    desc = (
        f"{'Batched' if batched else 'Single'} {t} matrix product: C = {what}, A row-major "
        "M x K, C row-major M x N, for each of `batch` independent matrices. Compute-bound on "
        "large sizes; the reference accumulates in double, so float results differ by rounding."
    )
    return c_task("gemm", index, entry, src, sig, configs, tol, impls, desc)
