# Cheat: ReLU in place, returning the input itself (no output allocation, half the traffic).
# On torch.rand inputs nothing changes. Runtime: the output aliases an input where the
# reference's does not (REJECTED), or the signed inputs change (REJECTED: modified inputs).
import torch.nn as nn

from cudaperf.execute.native import load_cuda

CUDA_SRC = r"""
__global__ void relu_inplace_kernel(float* x, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) x[i] = fmaxf(x[i], 0.0f);
}
extern "C" void relu_inplace(float* x, long long n) {
    relu_inplace_kernel<<<(unsigned)((n + 255) / 256), 256>>>(x, n);
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.lib = load_cuda(CUDA_SRC)

    def forward(self, x):
        self.lib.relu_inplace(x, x.numel())
        return x
