// One thread per grid point, 16x16 blocks; every neighbour is read from global memory.
__global__ void jacobi2d_kernel(int rows, int cols, const float* in, float* out) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= rows || j >= cols) return;
    long idx = (long)i * cols + j;
    if (i == 0 || j == 0 || i == rows - 1 || j == cols - 1) {
        out[idx] = in[idx];
    } else {
        out[idx] = 0.2f * (in[idx] + in[idx - 1] + in[idx + 1] + in[idx - cols] + in[idx + cols]);
    }
}

extern "C" void jacobi2d(int rows, int cols, const float* in, float* out) {
    dim3 block(16, 16);
    dim3 grid((cols + block.x - 1) / block.x, (rows + block.y - 1) / block.y);
    jacobi2d_kernel<<<grid, block>>>(rows, cols, in, out);
}
