"""KernelBench level 1 / 4_Matrix_vector_multiplication_.py

matrix-vector product.

KernelBench candidate form (torch.utils.cpp_extension.load_inline).
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>

#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#define FULL_MASK 0xffffffffu

// Number of SMs of the current device (queried once).
static inline int cp_num_sms() {
    static int sms = 0;
    if (sms == 0) {
        int dev = 0;
        cudaGetDevice(&dev);
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
        if (sms <= 0) sms = 132;
    }
    return sms;
}

// Blocks for `work` items at `block` threads each, capped at `per_sm` blocks per SM
// (the kernels are grid-stride loops, so any cap is correct).
static inline unsigned cp_grid(long long work, int block, int per_sm) {
    long long g = (work + block - 1) / block;
    long long cap = (long long)cp_num_sms() * per_sm;
    if (g > cap) g = cap;
    if (g < 1) g = 1;
    return (unsigned)g;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}

// Sum over the block (blockDim.x a multiple of 32); every thread gets the result.
// `sh` holds 32 floats; safe to call repeatedly.
__device__ __forceinline__ float block_sum(float v, float* sh) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int nw = (blockDim.x + 31) >> 5;
    v = warp_sum(v);
    if (lane == 0) sh[w] = v;
    __syncthreads();
    if (w == 0) {
        v = lane < nw ? sh[lane] : 0.0f;
        v = warp_sum(v);
        if (lane == 0) sh[0] = v;
    }
    __syncthreads();
    const float r = sh[0];
    __syncthreads();
    return r;
}

__global__ void __launch_bounds__(256) gemv_kernel(const float* __restrict__ A,
                                                   const float* __restrict__ x,
                                                   float* __restrict__ y, long long M,
                                                   long long K, int vec) {
    __shared__ float sh[32];
    for (long long r = blockIdx.x; r < M; r += gridDim.x) {
        const float* a = A + r * K;
        float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
        long long head = 0;
        if (vec) {
            const float4* a4 = (const float4*)a;
            const float4* x4 = (const float4*)x;
            const long long K4 = K / 4;
            for (long long i = threadIdx.x; i < K4; i += blockDim.x) {
                const float4 u = a4[i], w = x4[i];
                s0 = fmaf(u.x, w.x, s0);
                s1 = fmaf(u.y, w.y, s1);
                s2 = fmaf(u.z, w.z, s2);
                s3 = fmaf(u.w, w.w, s3);
            }
            head = K4 * 4;
        }
        for (long long i = head + threadIdx.x; i < K; i += blockDim.x) s0 = fmaf(a[i], x[i], s0);
        const float total = block_sum((s0 + s1) + (s2 + s3), sh);
        if (threadIdx.x == 0) y[r] = total;
    }
}

static void matvec_host(const float* A, const float* x, float* y, long long M, long long K) {
    if (M <= 0) return;
    const int vec = ((K & 3) == 0 && (((uintptr_t)A | (uintptr_t)x) & 15) == 0) ? 1 : 0;
    long long g = M < 65535LL * 16 ? M : 65535LL * 16;
    gemv_kernel<<<(unsigned)g, 256>>>(A, x, y, M, K, vec);
}

void matvec(torch::Tensor A, torch::Tensor x, torch::Tensor y, int64_t M, int64_t K) {
    TORCH_CHECK(A.is_cuda() && A.is_contiguous(),
                "A must be a contiguous CUDA tensor");
    TORCH_CHECK(x.is_cuda() && x.is_contiguous(),
                "x must be a contiguous CUDA tensor");
    TORCH_CHECK(y.is_cuda() && y.is_contiguous(),
                "y must be a contiguous CUDA tensor");
    matvec_host(
        A.data_ptr<float>(),
        x.data_ptr<float>(),
        y.data_ptr<float>(),
        (long long)M,
        (long long)K);
}
"""

CPP_SRC = r"""
void matvec(torch::Tensor A, torch::Tensor x, torch::Tensor y, int64_t M, int64_t K);
"""

_ext = load_inline(
    name="kb_1_4_matrix_vector_multiplication__cp",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["matvec"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.lib = _ext

    def forward(self, A, B):
        A = A.contiguous()
        B = B.contiguous()
        M, K = A.shape
        C = torch.empty((M, 1), dtype=A.dtype, device=A.device)
        self.lib.matvec(A, B, C, M, K)
        return C
