// The same shared-memory tiling as the padded version, but with a 32x32 tile: the column-wise
// reads of the tile (stride 32 floats) all fall in one bank, a 32-way bank conflict that
// serialises every warp's shared-memory load. Kept as a contrast for the analyzer.
#define TILE 32
#define BLOCK_ROWS 8

__global__ void transpose_tiled_conflicts(int rows, int cols, const float* __restrict__ in,
                                          float* __restrict__ out) {
    __shared__ float tile[TILE][TILE];
    int x = blockIdx.x * TILE + threadIdx.x;
    int y0 = blockIdx.y * TILE;
    for (int k = threadIdx.y; k < TILE; k += BLOCK_ROWS) {
        int y = y0 + k;
        if (x < cols && y < rows) tile[k][threadIdx.x] = in[(long)y * cols + x];
    }
    __syncthreads();
    int ox = blockIdx.y * TILE + threadIdx.x;
    int oy0 = blockIdx.x * TILE;
    for (int k = threadIdx.y; k < TILE; k += BLOCK_ROWS) {
        int oy = oy0 + k;
        if (ox < rows && oy < cols) out[(long)oy * rows + ox] = tile[threadIdx.x][k];
    }
}

extern "C" void transpose(int rows, int cols, const float* in, float* out) {
    dim3 block(TILE, BLOCK_ROWS);
    dim3 grid((cols + TILE - 1) / TILE, (rows + TILE - 1) / TILE);
    transpose_tiled_conflicts<<<grid, block>>>(rows, cols, in, out);
}
