// One thread per element. Reads along a row are coalesced, but neighbouring threads write
// `rows` floats apart, so every warp store touches 32 different memory segments.
__global__ void transpose_naive(int rows, int cols, const float* in, float* out) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i < rows && j < cols) out[(long)j * rows + i] = in[(long)i * cols + j];
}

extern "C" void transpose(int rows, int cols, const float* in, float* out) {
    dim3 block(32, 8);
    dim3 grid((cols + block.x - 1) / block.x, (rows + block.y - 1) / block.y);
    transpose_naive<<<grid, block>>>(rows, cols, in, out);
}
