# Cheat: writes the result into the input and returns it (saves an allocation; corrupts the
# caller's tensor). Runtime: inputs are cloned and compared after the call.
import torch
import torch.nn as nn

from cudaperf.execute.native import load_cuda

CUDA_SRC = r"""
__global__ void affine_relu_inplace(float* x, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) x[i] = 2.0f * fmaxf(x[i], 0.0f) + 1.0f;
}
extern "C" void affine_relu(float* x, long long n) {
    affine_relu_inplace<<<(unsigned)((n + 255) / 256), 256>>>(x, n);
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.lib = load_cuda(CUDA_SRC)

    def forward(self, x):
        self.lib.affine_relu(x, x.numel())
        return x
