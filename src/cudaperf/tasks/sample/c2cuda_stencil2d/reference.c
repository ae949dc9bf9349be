/* One Jacobi step of the 5-point stencil on a rows x cols grid stored row-major.
   Interior points become the average of themselves and their four neighbours;
   boundary points are copied unchanged. */
void jacobi2d(int rows, int cols, const float* in, float* out) {
    for (int i = 0; i < rows; ++i) {
        for (int j = 0; j < cols; ++j) {
            long idx = (long)i * cols + j;
            if (i == 0 || j == 0 || i == rows - 1 || j == cols - 1) {
                out[idx] = in[idx];
            } else {
                out[idx] = 0.2f * (in[idx] + in[idx - 1] + in[idx + 1] + in[idx - cols] +
                                   in[idx + cols]);
            }
        }
    }
}
