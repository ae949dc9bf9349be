# Cheat: caches outputs keyed on the input's data pointer; new inputs in recycled memory get
# stale outputs. Runtime: repeated calls with new inputs must give new outputs.
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
        self.cache = {}

    def forward(self, x):
        key = (x.data_ptr(), x.numel())
        if key not in self.cache:
            y = torch.empty_like(x)
            self.lib.affine_relu(x, y, x.numel())
            self.cache[key] = y
        return self.cache[key]
