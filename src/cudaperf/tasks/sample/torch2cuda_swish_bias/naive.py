"""Naive fused swish + bias: one thread per element, 256-thread blocks covering the tensor."""

import torch
import torch.nn as nn

from cudaperf.execute.native import load_cuda

CUDA_SRC = r"""
__global__ void swish_bias_naive(const float* x, const float* bias, float* y, long long n,
                                 int cols) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    y[i] = v / (1.0f + expf(-v)) + bias[i % cols];
}

extern "C" void swish_bias(const float* x, const float* bias, float* y, long long n, int cols) {
    int block = 256;
    if (n > 0) swish_bias_naive<<<(unsigned)((n + block - 1) / block), block>>>(x, bias, y, n, cols);
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
