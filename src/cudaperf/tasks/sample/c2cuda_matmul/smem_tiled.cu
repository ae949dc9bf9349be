// Classic shared-memory tiling: a 32x32-thread block computes a 32x32 tile of C, stepping
// through K in 32-wide slabs. Each slab of A and B is loaded once into shared memory
// (coalesced) and reused by 32 threads, cutting global traffic by 32x. Out-of-range
// elements load as zero, so any M, N, K works.
#define TILE 32

__global__ void matmul_tiled(int M, int N, int K, const float* __restrict__ A,
                             const float* __restrict__ B, float* __restrict__ C) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TILE + ty;
    int col = blockIdx.x * TILE + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        int ka = k0 + tx, kb = k0 + ty;
        As[ty][tx] = (row < M && ka < K) ? A[(long)row * K + ka] : 0.0f;
        Bs[ty][tx] = (kb < K && col < N) ? B[(long)kb * N + col] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TILE; ++k) acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (row < M && col < N) C[(long)row * N + col] = acc;
}

extern "C" void matmul(int M, int N, int K, const float* A, const float* B, float* C) {
    dim3 block(TILE, TILE);
    dim3 grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
    matmul_tiled<<<grid, block>>>(M, N, K, A, B, C);
}
