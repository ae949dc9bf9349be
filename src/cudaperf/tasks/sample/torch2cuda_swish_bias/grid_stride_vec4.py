"""Vectorised fused swish + bias: when the row length is a multiple of 4 (and the pointers are
16-byte aligned) each thread handles float4 groups, which never straddle a row, so the bias
is read as a float4 too; a grid-stride loop over a grid of a few waves keeps every SM busy
without launching one thread per element. Other shapes take a scalar grid-stride loop."""

import torch
import torch.nn as nn

from cudaperf.execute.native import load_cuda

CUDA_SRC = r"""
__device__ __forceinline__ float swish(float v) { return v / (1.0f + expf(-v)); }

__global__ void swish_bias_vec4(const float4* __restrict__ x, const float4* __restrict__ bias,
                                float4* __restrict__ y, long long n4, int cols4) {
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        float4 v = x[i];
        float4 b = bias[i % cols4];
        v.x = swish(v.x) + b.x;
        v.y = swish(v.y) + b.y;
        v.z = swish(v.z) + b.z;
        v.w = swish(v.w) + b.w;
        y[i] = v;
    }
}

__global__ void swish_bias_scalar(const float* __restrict__ x, const float* __restrict__ bias,
                                  float* __restrict__ y, long long n, int cols) {
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        y[i] = swish(x[i]) + bias[i % cols];
    }
}

extern "C" void swish_bias(const float* x, const float* bias, float* y, long long n, int cols) {
    const int block = 256, max_grid = 132 * 16;  // H200: 132 SMs
    unsigned long long align = reinterpret_cast<unsigned long long>(x) |
                               reinterpret_cast<unsigned long long>(bias) |
                               reinterpret_cast<unsigned long long>(y);
    if (n <= 0) return;
    if (cols % 4 == 0 && align % 16 == 0) {
        long long n4 = n / 4;
        long long grid = (n4 + block - 1) / block;
        if (grid > max_grid) grid = max_grid;
        swish_bias_vec4<<<(unsigned)grid, block>>>(reinterpret_cast<const float4*>(x),
                                                   reinterpret_cast<const float4*>(bias),
                                                   reinterpret_cast<float4*>(y), n4, cols / 4);
    } else {
        long long grid = (n + block - 1) / block;
        if (grid > max_grid) grid = max_grid;
        swish_bias_scalar<<<(unsigned)grid, block>>>(x, bias, y, n, cols);
    }
}
"""


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(dim) * 0.5)
        self.lib = load_cuda(CUDA_SRC)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        self.lib.swish_bias(x, self.bias.contiguous(), y, x.numel(), x.shape[-1])
        return y
