// Each 256-thread block loads 256 values into shared memory, halves them with an interleaved
// tree (divergent modulo test), and thread 0 adds the block's partial sum to out[0] with a
// global atomic. out[0] is zeroed first because the harness poisons outputs.
#define BLOCK 256

__global__ void block_sum_atomic(int n, const float* x, float* out) {
    __shared__ float buf[BLOCK];
    int tid = threadIdx.x;
    int i = blockIdx.x * BLOCK + tid;
    buf[tid] = (i < n) ? x[i] : 0.0f;
    __syncthreads();
    for (int s = 1; s < BLOCK; s *= 2) {
        if (tid % (2 * s) == 0) buf[tid] += buf[tid + s];
        __syncthreads();
    }
    if (tid == 0) atomicAdd(out, buf[0]);
}

extern "C" void reduce_sum(int n, const float* x, float* out) {
    cudaMemsetAsync(out, 0, sizeof(float));
    int grid = (n + BLOCK - 1) / BLOCK;
    if (grid < 1) grid = 1;
    block_sum_atomic<<<grid, BLOCK>>>(n, x, out);
}
