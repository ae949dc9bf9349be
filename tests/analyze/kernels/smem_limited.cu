// Known answer: 40 KB of static shared memory per 256-thread block limits sm_90 to 5 blocks/SM
// (233472 / (40960 + 1024 reserved) = 5), i.e. 40 of 64 warps = 0.625 occupancy.
#include <cuda_runtime.h>
#define N 10240

__global__ void smem_heavy(const float* in, float* out) {
    __shared__ float buf[N];
    for (int k = threadIdx.x; k < N; k += blockDim.x) buf[k] = in[blockIdx.x * N + k];
    __syncthreads();
    float acc = 0.0f;
    for (int k = threadIdx.x; k < N; k += blockDim.x) acc += buf[N - 1 - k];
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

int main() {
    float *in, *out;
    cudaMalloc(&in, 132 * N * sizeof(float));
    cudaMalloc(&out, 132 * 256 * sizeof(float));
    cudaMemset(in, 0, 132 * N * sizeof(float));
    smem_heavy<<<132, 256>>>(in, out);
    cudaDeviceSynchronize();
    return 0;
}
