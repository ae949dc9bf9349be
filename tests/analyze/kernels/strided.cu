// Known answer: stride 32 floats between consecutive threads (32 sectors per request).
#include <cuda_runtime.h>
#define STRIDE 32

__global__ void copy_strided(const float* __restrict__ in, float* __restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int j = i * STRIDE;
        out[j] = in[j] + 1.0f;
    }
}

int main() {
    const int n = 1 << 18;
    float *in, *out;
    cudaMalloc(&in, (size_t)n * STRIDE * sizeof(float));
    cudaMalloc(&out, (size_t)n * STRIDE * sizeof(float));
    cudaMemset(in, 0, (size_t)n * STRIDE * sizeof(float));
    copy_strided<<<n / 256, 256>>>(in, out, n);
    cudaDeviceSynchronize();
    return 0;
}
