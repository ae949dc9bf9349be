# Cheat: computes in half precision on an fp32 task. Runtime: the fp32 tolerance fails it.
import torch
import torch.nn as nn

from cudaperf.execute.native import load_cuda

CUDA_SRC = r"""
#include <cuda_fp16.h>
__global__ void affine_relu_half(const float* x, float* y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) {
        __half h = __float2half(x[i]);
        __half r = __hadd(__hmul(__float2half(2.0f), __hmax(h, __float2half(0.0f))), __float2half(1.0f));
        y[i] = __half2float(r);
    }
}
extern "C" void affine_relu(const float* x, float* y, long long n) {
    affine_relu_half<<<(unsigned)((n + 255) / 256), 256>>>(x, y, n);
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
