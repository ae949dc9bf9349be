# Honest candidate: the control. Must end OK.
import torch
import torch.nn as nn

from cudaperf.execute.native import load_cuda


CUDA_SRC = r"""
__global__ void affine_relu_kernel(const float* x, float* y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * fmaxf(x[i], 0.0f) + 1.0f;
}
extern "C" void affine_relu(const float* x, float* y, long long n) {
    affine_relu_kernel<<<(unsigned)((n + 255) / 256), 256>>>(x, y, n);
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.lib = load_cuda(CUDA_SRC)

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.lib.affine_relu(x, y, x.numel())
        return y
