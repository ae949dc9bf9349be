"""The tree-sitter front end: kernels, constants, launches, Python candidates, torch stripping."""

from __future__ import annotations

from cudaperf.analyze.parse import (
    extract_cuda,
    find_kernels,
    find_launches,
    parse,
    read_constants,
    strip_torch_host,
)

CU = """
#define TILE 16
constexpr int THREADS = 128;
template <int N>
__global__ void __launch_bounds__(THREADS, 2) tk(float* a) { a[threadIdx.x] = N; }
extern "C" __global__ void ck(float* a) { a[0] = 1; }
namespace ns { static __global__ void nk(const float* __restrict__ a, int n) {} }
__device__ float helper(float x) { return x; }
void host(float* d, int n) {
    dim3 block(TILE, TILE);
    tk<4><<<n / THREADS, THREADS>>>(d);
    ck<<<1, block, 1024>>>(d);
    int threads = 64;
    ns::nk<<<1, threads>>>(d, n);
}
"""


def test_kernels_constants_and_launches():
    root = parse(CU).root_node
    consts = read_constants(root)
    assert consts == {"TILE": 16, "THREADS": 128}
    ks = find_kernels(root, consts)
    assert [k.name for k in ks] == ["tk", "ck", "nk"]
    assert ks[0].launch_bounds == (128, 2)
    assert ks[2].params == {"a": "const float*", "n": "int"}
    launches = {s.kernel: (s.block_threads, s.dynamic_smem) for s in find_launches(root, consts)}
    assert launches == {"tk": (128, 0), "ck": (256, 1024), "nk": (64, 0)}


LOAD_INLINE = '''
import torch
from torch.utils.cpp_extension import load_inline

cuda_src = """
#include <torch/extension.h>
__global__ void add_kernel(const float* a, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + 1.0f;
}
torch::Tensor add(torch::Tensor a) {
    auto out = torch::empty_like(a);
    int n = a.numel();
    add_kernel<<<(n + 255) / 256, 256>>>(a.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""
cpp_src = "torch::Tensor add(torch::Tensor a);"
mod = load_inline(name="m", cpp_sources=cpp_src, cuda_sources=cuda_src, functions=["add"])


class ModelNew(torch.nn.Module):
    def forward(self, a):
        return mod.add(a)
'''


def test_load_inline_candidate_is_extracted_and_stripped():
    text = extract_cuda(LOAD_INLINE)
    assert text.from_python
    assert "add_kernel" in text.code and "cpp_src" not in text.code
    stripped = strip_torch_host(text.code)
    assert "torch::" not in stripped and "#include <torch" not in stripped
    assert "__global__ void add_kernel" in stripped
    assert stripped.count("\n") == text.code.count("\n")  # lines kept
    kernel_line = stripped.splitlines().index(
        "__global__ void add_kernel(const float* a, float* out, int n) {"
    )
    assert LOAD_INLINE.splitlines()[text.candidate_line(kernel_line + 1) - 1].startswith(
        "__global__ void add_kernel"
    )


NATIVE = '''
from cudaperf.execute.native import load_cuda
SRC = r"""
__global__ void k(float* y) { y[threadIdx.x] = 0.0f; }
extern "C" void run(float* y) { k<<<1, 32>>>(y); }
"""
lib = load_cuda(SRC)
'''


def test_native_load_cuda_candidate():
    text = extract_cuda(NATIVE)
    assert text.from_python and "__global__ void k" in text.code
    root = parse(text.code).root_node
    assert [k.name for k in find_kernels(root, {})] == ["k"]
    assert text.candidate_line(2) == 4


def test_plain_cuda_passes_through():
    text = extract_cuda(CU)
    assert not text.from_python and text.code == CU and text.candidate_line(7) == 7
