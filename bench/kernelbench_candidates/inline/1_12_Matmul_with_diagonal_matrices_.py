"""KernelBench level 1 / 12_Matmul_with_diagonal_matrices_.py

diag(A) @ B as a row scaling.

KernelBench candidate form (torch.utils.cpp_extension.load_inline).
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>

#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#define FULL_MASK 0xffffffffu

// Number of SMs of the current device (queried once).
static inline int cp_num_sms() {
    static int sms = 0;
    if (sms == 0) {
        int dev = 0;
        cudaGetDevice(&dev);
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
        if (sms <= 0) sms = 132;
    }
    return sms;
}

// Blocks for `work` items at `block` threads each, capped at `per_sm` blocks per SM
// (the kernels are grid-stride loops, so any cap is correct).
static inline unsigned cp_grid(long long work, int block, int per_sm) {
    long long g = (work + block - 1) / block;
    long long cap = (long long)cp_num_sms() * per_sm;
    if (g > cap) g = cap;
    if (g < 1) g = 1;
    return (unsigned)g;
}

__global__ void __launch_bounds__(256) diag_scale_kernel(const float* __restrict__ a,
                                                         const float* __restrict__ b,
                                                         float* __restrict__ c, long long rows,
                                                         long long cols) {
    for (long long r = blockIdx.y; r < rows; r += gridDim.y) {
        const float s = a[r];
        const float* br = b + r * cols;
        float* cr = c + r * cols;
        for (long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x; j < cols;
             j += (long long)gridDim.x * blockDim.x)
            cr[j] = s * br[j];
    }
}

static void diag_matmul_host(
    const float* a,
    const float* b,
    float* c,
    long long rows,
    long long cols) {
    if (rows <= 0 || cols <= 0) return;
    long long gx = (cols + 255) / 256;
    if (gx > 64) gx = 64;
    long long gy = rows < 65535 ? rows : 65535;
    diag_scale_kernel<<<dim3((unsigned)gx, (unsigned)gy), 256>>>(a, b, c, rows, cols);
}

void diag_matmul(
    torch::Tensor a,
    torch::Tensor b,
    torch::Tensor c,
    int64_t rows,
    int64_t cols) {
    TORCH_CHECK(a.is_cuda() && a.is_contiguous(),
                "a must be a contiguous CUDA tensor");
    TORCH_CHECK(b.is_cuda() && b.is_contiguous(),
                "b must be a contiguous CUDA tensor");
    TORCH_CHECK(c.is_cuda() && c.is_contiguous(),
                "c must be a contiguous CUDA tensor");
    diag_matmul_host(
        a.data_ptr<float>(),
        b.data_ptr<float>(),
        c.data_ptr<float>(),
        (long long)rows,
        (long long)cols);
}
"""

CPP_SRC = r"""
void diag_matmul(torch::Tensor a, torch::Tensor b, torch::Tensor c, int64_t rows, int64_t cols);
"""

_ext = load_inline(
    name="kb_1_12_matmul_with_diagonal_matrices__cp",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["diag_matmul"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.lib = _ext

    def forward(self, A, B):
        A = A.contiguous()
        B = B.contiguous()
        C = torch.empty((A.shape[0], B.shape[1]), dtype=B.dtype, device=B.device)
        self.lib.diag_matmul(A, B, C, B.shape[0], B.shape[1])
        return C
