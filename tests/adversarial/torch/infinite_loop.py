# Fault: the kernel never terminates. Runtime: TIMEOUT, and the worker is replaced.
import torch
import torch.nn as nn

from cudaperf.execute.native import load_cuda

CUDA_SRC = r"""
__global__ void spin_kernel(const float* x, float* y, long long n) {
    // clock64() is a volatile read the compiler cannot remove; the condition never turns false.
    // (A plain `while (1) {}` without side effects may be deleted: infinite loops are UB.)
    long long t0 = clock64();
    while (clock64() - t0 >= 0) { }
    y[0] = x[0];
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
