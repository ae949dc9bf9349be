// One thread per element; the launch covers n with 256-thread blocks.
__global__ void saxpy_kernel(int n, float a, const float* x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

extern "C" void saxpy(int n, float a, const float* x, float* y) {
    int block = 256;
    int grid = (n + block - 1) / block;
    saxpy_kernel<<<grid, block>>>(n, a, x, y);
}
