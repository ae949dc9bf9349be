"""Block-per-row layer norm. A 256-thread block owns one row: threads read it with coalesced
strided loads, the sum is reduced with warp shuffles and a shared array of per-warp partials,
then the sum of squared deviations from the mean is reduced the same way (two passes, which
is more accurate than E[x^2] - E[x]^2), and a third coalesced pass writes
(x - mean) * rstd * weight + bias. Repeated reads of the row hit L2."""

import torch
import torch.nn as nn

from cudaperf.execute.native import load_cuda

CUDA_SRC = r"""
#define BLOCK 256

// Sum over the block, returned to every thread. blockDim.x == BLOCK, a multiple of 32.
__device__ float block_sum(float v, float* scratch) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = (lane < BLOCK / 32) ? scratch[lane] : 0.0f;
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    __syncthreads();  // scratch may be reused by the next call
    return v;
}

__global__ void __launch_bounds__(BLOCK)
layernorm_block_per_row(const float* __restrict__ x, const float* __restrict__ w,
                        const float* __restrict__ b, float* __restrict__ y, int cols,
                        float eps) {
    __shared__ float scratch[32];
    const float* xr = x + (long)blockIdx.x * cols;
    float* yr = y + (long)blockIdx.x * cols;
    float s = 0.0f;
    for (int j = threadIdx.x; j < cols; j += BLOCK) s += xr[j];
    float mean = block_sum(s, scratch) / cols;
    float sq = 0.0f;
    for (int j = threadIdx.x; j < cols; j += BLOCK) {
        float d = xr[j] - mean;
        sq += d * d;
    }
    float rstd = rsqrtf(block_sum(sq, scratch) / cols + eps);
    for (int j = threadIdx.x; j < cols; j += BLOCK) yr[j] = (xr[j] - mean) * rstd * w[j] + b[j];
}

extern "C" void layernorm(const float* x, const float* w, const float* b, float* y, int rows,
                          int cols, float eps) {
    if (rows > 0) layernorm_block_per_row<<<rows, BLOCK>>>(x, w, b, y, cols, eps);
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
