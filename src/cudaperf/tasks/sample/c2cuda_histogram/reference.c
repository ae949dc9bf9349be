/* Histogram of n integer values into nbins bins: hist[b] counts the values equal to b.
   Values outside [0, nbins) are ignored. */
void histogram(int n, int nbins, const int* data, int* hist) {
    for (int b = 0; b < nbins; ++b) {
        hist[b] = 0;
    }
    for (int i = 0; i < n; ++i) {
        int v = data[i];
        if (v >= 0 && v < nbins) {
            hist[v] += 1;
        }
    }
}
