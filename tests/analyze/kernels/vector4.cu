// Known answer: float4 loads and stores via reinterpret_cast (16 bytes per thread, coalesced).
#include <cuda_runtime.h>

__global__ void scale_float4(const float* __restrict__ in, float* __restrict__ out, int n4) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) {
        float4 v = reinterpret_cast<const float4*>(in)[i];
        v.x *= 2.0f; v.y *= 2.0f; v.z *= 2.0f; v.w *= 2.0f;
        reinterpret_cast<float4*>(out)[i] = v;
    }
}

int main() {
    const int n = 1 << 22;
    float *in, *out;
    cudaMalloc(&in, n * sizeof(float));
    cudaMalloc(&out, n * sizeof(float));
    cudaMemset(in, 0, n * sizeof(float));
    scale_float4<<<(n / 4 + 255) / 256, 256>>>(in, out, n / 4);
    cudaDeviceSynchronize();
    return 0;
}
