/* C = A * B for row-major A (M x K), B (K x N) and C (M x N), in single precision.
   The loops run i, k, j so the innermost loop streams rows of B and C; each C[i][j] still
   accumulates its K products in order k = 0 .. K-1. */
void matmul(int M, int N, int K, const float* A, const float* B, float* C) {
    for (int i = 0; i < M; ++i) {
        float* c = C + (long)i * N;
        for (int j = 0; j < N; ++j) {
            c[j] = 0.0f;
        }
        for (int k = 0; k < K; ++k) {
            float a = A[(long)i * K + k];
            const float* b = B + (long)k * N;
            for (int j = 0; j < N; ++j) {
                c[j] += a * b[j];
            }
        }
    }
}
