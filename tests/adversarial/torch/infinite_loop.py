# Fault: the kernel never terminates. Runtime: TIMEOUT, and the worker is replaced.
import torch
import torch.nn as nn

from cudaperf.execute.native import load_cuda

CUDA_SRC = r"""
__global__ void spin_kernel(const float* x, float* y, long long n) {
    volatile int forever = 1;
    while (forever) { }
}
extern "C" void affine_relu(const float* x, float* y, long long n) {
    spin_kernel<<<1, 32>>>(x, y, n);
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.lib = load_cuda(CUDA_SRC)

    def forward(self, x):
        y = torch.empty_like(x)
        self.lib.affine_relu(x, y, x.numel())
        return y
