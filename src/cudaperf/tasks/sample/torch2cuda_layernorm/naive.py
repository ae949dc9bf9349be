"""Naive layer norm: one thread per row computes the mean, then the variance, then writes the
normalised row, all with sequential loops over global memory (uncoalesced across threads)."""

import torch
import torch.nn as nn

from cudaperf.execute.native import load_cuda

CUDA_SRC = r"""
__global__ void layernorm_row_per_thread(const float* x, const float* w, const float* b,
                                         float* y, int rows, int cols, float eps) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* xr = x + (long)r * cols;
    float* yr = y + (long)r * cols;
    float sum = 0.0f;
    for (int j = 0; j < cols; ++j) sum += xr[j];
    float mean = sum / cols;
    float sq = 0.0f;
    for (int j = 0; j < cols; ++j) {
        float d = xr[j] - mean;
        sq += d * d;
    }
    float rstd = rsqrtf(sq / cols + eps);
    for (int j = 0; j < cols; ++j) yr[j] = (xr[j] - mean) * rstd * w[j] + b[j];
}

extern "C" void layernorm(const float* x, const float* w, const float* b, float* y, int rows,
                          int cols, float eps) {
    int block = 128;
    layernorm_row_per_thread<<<(rows + block - 1) / block, block>>>(x, w, b, y, rows, cols, eps);
}
"""


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.ln = nn.LayerNorm(dim)
        nn.init.uniform_(self.ln.weight, 0.5, 1.5)
        nn.init.uniform_(self.ln.bias, -0.5, 0.5)
        self.lib = load_cuda(CUDA_SRC)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        rows, cols = x.shape[0], x.shape[-1]
        w, b = self.ln.weight.contiguous(), self.ln.bias.contiguous()
        self.lib.layernorm(x, w, b, y, rows, cols, self.ln.eps)
        return y
