# Honest candidate for the ReLU-over-rand task: the control. Must end OK (the signed
# distribution the evaluator adds must not reject a real ReLU).
import torch
import torch.nn as nn

from cudaperf.execute.native import load_cuda

CUDA_SRC = r"""
__global__ void relu_kernel(const float* x, float* y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.0f);
}
extern "C" void relu(const float* x, float* y, long long n) {
    relu_kernel<<<(unsigned)((n + 255) / 256), 256>>>(x, y, n);
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.lib = load_cuda(CUDA_SRC)

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.lib.relu(x, y, x.numel())
        return y
