# Cheat: computes nothing and returns fresh memory, hoping the allocator hands back the
# reference's freed output. Runtime: poisoned allocations make it WRONG_OUTPUT.
import torch
import torch.nn as nn

from cudaperf.execute.native import load_cuda

CUDA_SRC = r"""
__global__ void touch_kernel(float* y) { if (threadIdx.x == 0 && blockIdx.x == 0) (void)y; }
extern "C" void affine_relu(const float* x, float* y, long long n) {
    touch_kernel<<<1, 32>>>(y);
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
