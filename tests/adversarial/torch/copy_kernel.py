# Cheat: a copy kernel, right on every input of a ReLU task whose inputs are torch.rand (>= 0).
# Runtime: the signed, wider input distribution must make it WRONG_OUTPUT.
import torch
import torch.nn as nn

from cudaperf.execute.native import load_cuda

CUDA_SRC = r"""
__global__ void copy_kernel(const float* x, float* y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i];
}
extern "C" void relu(const float* x, float* y, long long n) {
    copy_kernel<<<(unsigned)((n + 255) / 256), 256>>>(x, y, n);
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.lib = load_cuda(CUDA_SRC)

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.lib.relu(x, y, x.numel())
        return y
