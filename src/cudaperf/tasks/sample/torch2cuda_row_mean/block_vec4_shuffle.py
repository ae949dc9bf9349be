"""Block-per-row mean: a 256-thread block reads its row with coalesced float4 loads (scalar
loads when the row length is not a multiple of 4), keeps a private sum per thread, and
reduces with warp shuffles plus a shared array of per-warp sums. Every input byte is read
exactly once, so the kernel runs at memory bandwidth when there are enough rows."""

import torch
import torch.nn as nn

from cudaperf.execute.native import load_cuda

CUDA_SRC = r"""
#define BLOCK 256

__global__ void __launch_bounds__(BLOCK)
row_mean_block(const float* __restrict__ x, float* __restrict__ y, int cols, int vec4) {
    __shared__ float warp_sums[BLOCK / 32];
    const float* xr = x + (long)blockIdx.x * cols;
    float s = 0.0f;
    if (vec4) {
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        for (int j = threadIdx.x; j < cols / 4; j += BLOCK) {
            float4 v = x4[j];
            s += (v.x + v.y) + (v.z + v.w);
        }
    } else {
        for (int j = threadIdx.x; j < cols; j += BLOCK) s += xr[j];
    }
    for (int off = 16; off > 0; off >>= 1) s += __shfl_down_sync(0xffffffffu, s, off);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) warp_sums[warp] = s;
    __syncthreads();
    if (warp == 0) {
        s = (lane < BLOCK / 32) ? warp_sums[lane] : 0.0f;
        for (int off = 16; off > 0; off >>= 1) s += __shfl_down_sync(0xffffffffu, s, off);
        if (lane == 0) y[blockIdx.x] = s / cols;
    }
}

extern "C" void row_mean(const float* x, float* y, int rows, int cols) {
    int vec4 = (cols % 4 == 0) && ((reinterpret_cast<unsigned long long>(x) % 16) == 0);
    if (rows > 0) row_mean_block<<<rows, BLOCK>>>(x, y, cols, vec4);
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.lib = load_cuda(CUDA_SRC)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        y = torch.empty(rows, device=x.device, dtype=x.dtype)
        self.lib.row_mean(x, y, rows, cols)
        return y
