/* Sum of n single-precision values, accumulated in double precision and stored as a float
   in out[0]. */
void reduce_sum(int n, const float* x, float* out) {
    double acc = 0.0;
    for (int i = 0; i < n; ++i) {
        acc += x[i];
    }
    out[0] = (float)acc;
}
