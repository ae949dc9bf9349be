// Known answer: warp shuffles in a device helper, one atomicAdd, a grid-stride coalesced load.
#include <cuda_runtime.h>

__device__ __forceinline__ float warp_sum(float v) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
    return v;
}

__global__ void reduce_sum(const float* __restrict__ x, float* __restrict__ total, int n) {
    float acc = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        acc += x[i];
    }
    acc = warp_sum(acc);
    if ((threadIdx.x & 31) == 0) atomicAdd(total, acc);
}

int main() {
    const int n = 1 << 22;
    float *x, *total;
    cudaMalloc(&x, n * sizeof(float));
    cudaMalloc(&total, sizeof(float));
    cudaMemset(x, 0, n * sizeof(float));
    reduce_sum<<<264, 256>>>(x, total, n);
    cudaDeviceSynchronize();
    return 0;
}
