// Known answer: divergent_* kernels have a barrier not every thread reaches; uniform_* do not.
#include <cuda_runtime.h>

__global__ void divergent_branch(float* a, int n) {
    __shared__ float s[256];
    s[threadIdx.x] = a[blockIdx.x * blockDim.x + threadIdx.x];
    if (threadIdx.x < 128) {
        s[threadIdx.x] += s[threadIdx.x + 128];
        __syncthreads();
    }
    a[blockIdx.x * blockDim.x + threadIdx.x] = s[threadIdx.x];
}

__global__ void divergent_return(float* a, int n) {
    __shared__ float s[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    s[threadIdx.x] = a[i];
    __syncthreads();
    a[i] = s[255 - threadIdx.x];
}

__global__ void uniform_barriers(float* a, int n) {
    __shared__ float s[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    for (int k = 0; k < n; ++k) {
        s[threadIdx.x] = a[i] + k;
        __syncthreads();
    }
    if (blockIdx.x == 0) {
        __syncthreads();
    }
    if (i < n) a[i] = s[threadIdx.x];
}
