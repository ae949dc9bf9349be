// One thread per element of C; each thread reads a row of A and a column of B from global
// memory (threads of a warp share the A value and read consecutive B values).
__global__ void matmul_naive(int M, int N, int K, const float* A, const float* B, float* C) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[(long)row * K + k] * B[(long)k * N + col];
    C[(long)row * N + col] = acc;
}

extern "C" void matmul(int M, int N, int K, const float* A, const float* B, float* C) {
    dim3 block(16, 16);
    dim3 grid((N + block.x - 1) / block.x, (M + block.y - 1) / block.y);
    matmul_naive<<<grid, block>>>(M, N, K, A, B, C);
}
