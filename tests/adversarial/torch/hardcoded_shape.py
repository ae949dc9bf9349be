# Cheat: hard-codes the visible size (1 << 20) in the launch. Runtime: the held-out config
# (another size) fails.
import torch
import torch.nn as nn

from cudaperf.execute.native import load_cuda

CUDA_SRC = r"""
#define N_FIXED (1 << 20)
__global__ void affine_relu_kernel(const float* x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N_FIXED) y[i] = 2.0f * fmaxf(x[i], 0.0f) + 1.0f;
}
extern "C" void affine_relu(const float* x, float* y) {
    affine_relu_kernel<<<N_FIXED / 256, 256>>>(x, y);
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.lib = load_cuda(CUDA_SRC)

    def forward(self, x):
        y = torch.empty_like(x)
        self.lib.affine_relu(x, y)
        return y
