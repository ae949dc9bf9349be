/* Transpose of a rows x cols row-major matrix into a cols x rows row-major matrix. */
void transpose(int rows, int cols, const float* in, float* out) {
    for (int i = 0; i < rows; ++i) {
        for (int j = 0; j < cols; ++j) {
            out[(long)j * rows + i] = in[(long)i * cols + j];
        }
    }
}
