# Cheat (against ref_tiny_output): writes zeros, which pass a plain atol check because the
# true outputs are ~1e-6. Runtime: the normwise relative error check fails it.
import torch
import torch.nn as nn

from cudaperf.execute.native import load_cuda

CUDA_SRC = r"""
__global__ void zero_kernel(float* y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = 0.0f;
}
extern "C" void scale(const float* x, float* y, long long n) {
    zero_kernel<<<(unsigned)((n + 255) / 256), 256>>>(y, n);
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.lib = load_cuda(CUDA_SRC)

    def forward(self, x):
        y = torch.empty_like(x)
        self.lib.scale(x, y, x.numel())
        return y
