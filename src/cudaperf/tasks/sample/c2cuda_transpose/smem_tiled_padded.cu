// A 32x8-thread block moves a 32x32 tile through shared memory: it reads rows of the input
// (coalesced), then writes rows of the output (coalesced) by reading the tile column-wise.
// The tile is 32x33: the extra column shifts each row by one bank, so the column-wise reads
// hit 32 different banks instead of one.
#define TILE 32
#define BLOCK_ROWS 8

__global__ void transpose_tiled(int rows, int cols, const float* __restrict__ in,
                                float* __restrict__ out) {
    __shared__ float tile[TILE][TILE + 1];
    int x = blockIdx.x * TILE + threadIdx.x;  // input column
    int y0 = blockIdx.y * TILE;               // first input row of the tile
    for (int k = threadIdx.y; k < TILE; k += BLOCK_ROWS) {
        int y = y0 + k;
        if (x < cols && y < rows) tile[k][threadIdx.x] = in[(long)y * cols + x];
    }
    __syncthreads();
    int ox = blockIdx.y * TILE + threadIdx.x;  // output column = input row
    int oy0 = blockIdx.x * TILE;               // first output row = first input column
    for (int k = threadIdx.y; k < TILE; k += BLOCK_ROWS) {
        int oy = oy0 + k;
        if (ox < rows && oy < cols) out[(long)oy * rows + ox] = tile[threadIdx.x][k];
    }
}

extern "C" void transpose(int rows, int cols, const float* in, float* out) {
    dim3 block(TILE, BLOCK_ROWS);
    dim3 grid((cols + TILE - 1) / TILE, (rows + TILE - 1) / TILE);
    transpose_tiled<<<grid, block>>>(rows, cols, in, out);
}
