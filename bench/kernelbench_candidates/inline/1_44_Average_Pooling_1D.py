"""KernelBench level 1 / 44_Average_Pooling_1D.py

AvgPool1d (count_include_pad).

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

__global__ void __launch_bounds__(256) avgpool1d_kernel(const float* __restrict__ x,
                                                        float* __restrict__ y, long long planes,
                                                        long long L, long long Lout, int k,
                                                        int stride, int pad) {
    const long long total = planes * Lout;
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < total; t += step) {
        const long long o = t % Lout, pl = t / Lout;
        const float* xp = x + pl * L;
        long long start = o * stride - pad;
        long long end = start + k < L + pad ? start + k : L + pad;
        const float count = (float)(end - start);  // count_include_pad=True
        if (start < 0) start = 0;
        if (end > L) end = L;
        float s = 0.0f;
        for (long long p = start; p < end; ++p) s += xp[p];
        y[t] = s / count;
    }
}

static void avgpool1d_host(
    const float* x,
    float* y,
    long long planes,
    long long L,
    long long Lout,
    int k,
    int stride,
    int pad) {
    if (planes <= 0 || Lout <= 0) return;
    avgpool1d_kernel<<<cp_grid(planes * Lout, 256, 8), 256>>>(
        x, y, planes, L, Lout, k, stride, pad);
}

void avgpool1d(
    torch::Tensor x,
    torch::Tensor y,
    int64_t planes,
    int64_t L,
    int64_t Lout,
    int64_t k,
    int64_t stride,
    int64_t pad) {
    TORCH_CHECK(x.is_cuda() && x.is_contiguous(),
                "x must be a contiguous CUDA tensor");
    TORCH_CHECK(y.is_cuda() && y.is_contiguous(),
                "y must be a contiguous CUDA tensor");
    avgpool1d_host(
        x.data_ptr<float>(),
        y.data_ptr<float>(),
        (long long)planes,
        (long long)L,
        (long long)Lout,
        (int)k,
        (int)stride,
        (int)pad);
}
"""

CPP_SRC = r"""
void avgpool1d(
    torch::Tensor x,
    torch::Tensor y,
    int64_t planes,
    int64_t L,
    int64_t Lout,
    int64_t k,
    int64_t stride,
    int64_t pad);
"""

_ext = load_inline(
    name="kb_1_44_average_pooling_1d_cp",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["avgpool1d"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, kernel_size: int, stride: int = 1, padding: int = 0):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = kernel_size if stride is None else stride
        self.padding = padding
        self.lib = _ext

    def forward(self, x):
        x = x.contiguous()
        L = x.shape[-1]
        planes = x.numel() // L
        k, s, p = self.kernel_size, self.stride, self.padding
        Lout = (L + 2 * p - k) // s + 1
        y = torch.empty(tuple(x.shape[:-1]) + (Lout,), dtype=x.dtype, device=x.device)
        self.lib.avgpool1d(x, y, planes, L, Lout, k, s, p)
        return y
