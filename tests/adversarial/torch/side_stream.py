# Cheat: does the work on a non-blocking side stream so default-stream timing events miss it.
# Runtime: device-wide synchronisation + wall-clock cross-check must reject it.
import torch
import torch.nn as nn

from cudaperf.execute.native import load_cuda

CUDA_SRC = r"""
#include <cuda_runtime.h>
__global__ void affine_relu_kernel(const float* x, float* y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        for (int k = 0; k < 2000; ++k) v = v * 1.0000001f;  // make the hidden work long
        y[i] = 2.0f * fmaxf(x[i], 0.0f) + 1.0f + 0.0f * v;
    }
}
static cudaStream_t side = nullptr;
extern "C" void affine_relu(const float* x, float* y, long long n) {
    if (!side) cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
    affine_relu_kernel<<<(unsigned)((n + 255) / 256), 256, 0, side>>>(x, y, n);
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
