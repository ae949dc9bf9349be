// float4 loads/stores in a grid-stride loop; the tail (n % 4) is handled by thread 0..3.
__global__ void saxpy_vec4(int n, float a, const float4* __restrict__ x4, float4* __restrict__ y4,
                           const float* __restrict__ x, float* __restrict__ y) {
    int n4 = n / 4;
    int stride = gridDim.x * blockDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        float4 xv = x4[i];
        float4 yv = y4[i];
        yv.x = a * xv.x + yv.x;
        yv.y = a * xv.y + yv.y;
        yv.z = a * xv.z + yv.z;
        yv.w = a * xv.w + yv.w;
        y4[i] = yv;
    }
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < n - n4 * 4) {
        int j = n4 * 4 + t;
        y[j] = a * x[j] + y[j];
    }
}

extern "C" void saxpy(int n, float a, const float* x, float* y) {
    int block = 256;
    int sms = 132;  // H200; a grid of a few waves keeps every SM busy
    int grid = (n / 4 + block - 1) / block;
    if (grid > sms * 8) grid = sms * 8;
    if (grid < 1) grid = 1;
    saxpy_vec4<<<grid, block>>>(n, a, reinterpret_cast<const float4*>(x),
                                reinterpret_cast<float4*>(y), x, y);
}
