"""KernelBench level 1 / 21_Sigmoid.py

Sigmoid.

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

struct EwOp {
    __device__ __forceinline__ float operator()(float v) const {
        return 1.0f / (1.0f + expf(-v));
    }
};

__global__ void __launch_bounds__(256) ew_vec4_kernel(const float4* __restrict__ x,
                                                      float4* __restrict__ y, long long n4,
                                                      EwOp op) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4; i += stride) {
        float4 v = x[i];
        v.x = op(v.x);
        v.y = op(v.y);
        v.z = op(v.z);
        v.w = op(v.w);
        y[i] = v;
    }
}

__global__ void __launch_bounds__(256) ew_scalar_kernel(const float* __restrict__ x,
                                                        float* __restrict__ y, long long start,
                                                        long long n, EwOp op) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = start + blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += stride)
        y[i] = op(x[i]);
}

static void ew_run(const float* x, float* y, long long n, EwOp op) {
    if (n <= 0) return;
    const int block = 256;
    long long head = 0;
    if ((((uintptr_t)x | (uintptr_t)y) & 15) == 0) {
        const long long n4 = n / 4;
        if (n4 > 0)
            ew_vec4_kernel<<<cp_grid(n4, block, 8), block>>>((const float4*)x, (float4*)y, n4, op);
        head = n4 * 4;
    }
    if (head < n) ew_scalar_kernel<<<cp_grid(n - head, block, 8), block>>>(x, y, head, n, op);
}

static void sigmoid_fwd_host(const float* x, float* y, long long n) {
    EwOp op{};
    ew_run(x, y, n, op);
}

void sigmoid_fwd(torch::Tensor x, torch::Tensor y, int64_t n) {
    TORCH_CHECK(x.is_cuda() && x.is_contiguous(),
                "x must be a contiguous CUDA tensor");
    TORCH_CHECK(y.is_cuda() && y.is_contiguous(),
                "y must be a contiguous CUDA tensor");
    sigmoid_fwd_host(x.data_ptr<float>(), y.data_ptr<float>(), (long long)n);
}
"""

CPP_SRC = r"""
void sigmoid_fwd(torch::Tensor x, torch::Tensor y, int64_t n);
"""

_ext = load_inline(
    name="kb_1_21_sigmoid_cp",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["sigmoid_fwd"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.lib = _ext

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.lib.sigmoid_fwd(x, y, x.numel())
        return y
