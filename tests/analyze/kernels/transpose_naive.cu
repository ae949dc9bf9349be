// Known answer: the read is coalesced, the write is strided by n (transposed).
#include <cuda_runtime.h>

__global__ void transpose_naive(const float* in, float* out, int n) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < n && y < n) out[x * n + y] = in[y * n + x];
}

int main() {
    const int n = 2048;
    float *in, *out;
    cudaMalloc(&in, n * n * sizeof(float));
    cudaMalloc(&out, n * n * sizeof(float));
    cudaMemset(in, 0, n * n * sizeof(float));
    dim3 block(32, 8);
    dim3 grid(n / 32, n / 8);
    transpose_naive<<<grid, block>>>(in, out, n);
    cudaDeviceSynchronize();
    return 0;
}
