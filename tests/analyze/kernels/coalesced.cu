// Known answer: both accesses coalesced (stride 1 float, 4 sectors per request).
#include <cuda_runtime.h>

__global__ void copy_coalesced(const float* __restrict__ in, float* __restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] * 2.0f;
}

int main() {
    const int n = 1 << 22;
    float *in, *out;
    cudaMalloc(&in, n * sizeof(float));
    cudaMalloc(&out, n * sizeof(float));
    cudaMemset(in, 0, n * sizeof(float));
    copy_coalesced<<<(n + 255) / 256, 256>>>(in, out, n);
    cudaDeviceSynchronize();
    return 0;
}
