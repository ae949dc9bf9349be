// Known answer: the naive kernel does 2 FLOPs per 8 bytes loaded (0.25 FLOP/byte); the 16x16
// shared-memory tiled kernel reuses each loaded element 16 times (about 4 FLOP/byte).
#include <cuda_runtime.h>
#define T 16

__global__ void matmul_naive(const float* A, const float* B, float* C, int n) {
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    float sum = 0.0f;
    for (int k = 0; k < n; ++k) sum += A[row * n + k] * B[k * n + col];
    C[row * n + col] = sum;
}

__global__ void matmul_tiled(const float* A, const float* B, float* C, int n) {
    __shared__ float As[T][T];
    __shared__ float Bs[T][T];
    int row = blockIdx.y * T + threadIdx.y;
    int col = blockIdx.x * T + threadIdx.x;
    float sum = 0.0f;
    for (int t = 0; t < n / T; ++t) {
        As[threadIdx.y][threadIdx.x] = A[row * n + t * T + threadIdx.x];
        Bs[threadIdx.y][threadIdx.x] = B[(t * T + threadIdx.y) * n + col];
        __syncthreads();
#pragma unroll
        for (int k = 0; k < T; ++k) sum += As[threadIdx.y][k] * Bs[k][threadIdx.x];
        __syncthreads();
    }
    C[row * n + col] = sum;
}

int main() {
    const int n = 1024;
    float *A, *B, *C;
    cudaMalloc(&A, n * n * sizeof(float));
    cudaMalloc(&B, n * n * sizeof(float));
    cudaMalloc(&C, n * n * sizeof(float));
    cudaMemset(A, 0, n * n * sizeof(float));
    cudaMemset(B, 0, n * n * sizeof(float));
    dim3 block(T, T);
    dim3 grid(n / T, n / T);
    matmul_naive<<<grid, block>>>(A, B, C, n);
    matmul_tiled<<<grid, block>>>(A, B, C, n);
    cudaDeviceSynchronize();
    return 0;
}
