// Known answer: __launch_bounds__(1024, 2) caps registers at 32, but 64 values stay live: spills.
#include <cuda_runtime.h>

__global__ void __launch_bounds__(1024, 2) spill_heavy(const float* in, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v[64];
#pragma unroll
    for (int j = 0; j < 64; ++j) v[j] = in[i + j * n];
    float acc = 0.0f;
#pragma unroll
    for (int j = 0; j < 64; ++j) acc += v[j] * v[(j * 37 + 11) % 64] + v[63 - j];
#pragma unroll
    for (int j = 0; j < 64; ++j) out[i + j * n] = v[(j * 29 + 3) % 64] * acc;
}
