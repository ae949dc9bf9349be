// Zero the histogram, then one thread per value does an atomicAdd on the global bin. With
// few bins, thousands of threads collide on the same addresses and the atomics serialise.
__global__ void histogram_global(int n, int nbins, const int* data, int* hist) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int v = data[i];
        if (v >= 0 && v < nbins) atomicAdd(&hist[v], 1);
    }
}

extern "C" void histogram(int n, int nbins, const int* data, int* hist) {
    cudaMemsetAsync(hist, 0, (size_t)nbins * sizeof(int));
    int block = 256;
    int grid = (n + block - 1) / block;
    if (grid < 1) grid = 1;
    histogram_global<<<grid, block>>>(n, nbins, data, hist);
}
