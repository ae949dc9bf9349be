// Known answer: both kernels coalesced globally; the [32][32] tile has a 32-way bank conflict
// on the transposed read, the [32][33] tile none.
#include <cuda_runtime.h>
#define TILE 32
#define ROWS 8

__global__ void transpose_padded(const float* in, float* out, int n) {
    __shared__ float tile[TILE][TILE + 1];
    int x = blockIdx.x * TILE + threadIdx.x;
    int y = blockIdx.y * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * n + x];
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS) out[(y + j) * n + x] = tile[threadIdx.x][threadIdx.y + j];
}

__global__ void transpose_unpadded(const float* in, float* out, int n) {
    __shared__ float tile[TILE][TILE];
    int x = blockIdx.x * TILE + threadIdx.x;
    int y = blockIdx.y * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * n + x];
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS) out[(y + j) * n + x] = tile[threadIdx.x][threadIdx.y + j];
}

int main() {
    const int n = 2048;
    float *in, *out;
    cudaMalloc(&in, n * n * sizeof(float));
    cudaMalloc(&out, n * n * sizeof(float));
    cudaMemset(in, 0, n * n * sizeof(float));
    dim3 block(TILE, ROWS);
    dim3 grid(n / TILE, n / TILE);
    transpose_padded<<<grid, block>>>(in, out, n);
    transpose_unpadded<<<grid, block>>>(in, out, n);
    cudaDeviceSynchronize();
    return 0;
}
