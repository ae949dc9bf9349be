"""Static arithmetic intensity: the naive/tiled matmul pair and loop trip counts."""

from __future__ import annotations

from pathlib import Path

import pytest

from cudaperf.analyze import AnalyzeConfig, StructuralReport, analyze
from cudaperf.analyze.index import Scope
from cudaperf.analyze.intensity import trip_count
from cudaperf.analyze.parse import parse
from cudaperf.analyze.types import reuse_component

KERNELS = Path(__file__).parent / "kernels"
STATIC = AnalyzeConfig(resources=False)  # tree-sitter only: no nvcc, fast


def reports(name: str, config: AnalyzeConfig = STATIC) -> dict[str, StructuralReport]:
    """Reports by kernel name for one known-answer file."""
    return {r.name: r for r in analyze((KERNELS / name).read_text(), config=config)}


def test_tiled_matmul_has_16x_the_intensity_of_naive():
    r = reports("matmul.cu")
    naive = r["matmul_naive"].features["arithmetic_intensity"]
    tiled = r["matmul_tiled"].features["arithmetic_intensity"]
    assert naive == pytest.approx(0.25, rel=0.02)  # 2 FLOP per 8 bytes, unknown trip n
    assert tiled == pytest.approx(4.0, rel=0.02)  # each loaded element used 16 times
    assert r["matmul_naive"].features["intensity_exact"] == 0


def test_elementwise_intensity_is_exact():
    f = reports("coalesced.cu")["copy_coalesced"].features
    assert (f["flops_per_thread"], f["global_bytes_per_thread"]) == (1, 8)
    assert f["intensity_exact"] == 1


@pytest.mark.parametrize(
    "loop,trips",
    [
        ("for (int i = 0; i < 16; ++i) x;", 16),
        ("for (int i = 0; i <= 16; i += 4) x;", 5),
        ("for (int i = 10; i > 0; --i) x;", 10),
        ("for (int s = 128; s > 0; s >>= 1) x;", 8),
        ("for (int s = 1; s < 32; s *= 2) x;", 5),
        ("for (int i = 0; i < n; ++i) x;", None),
    ],
)
def test_trip_counts(loop, trips):
    root = parse("void f(int n) { " + loop + " }").root_node
    stack, node = [root], None
    while stack:
        n = stack.pop()
        if n.type == "for_statement":
            node = n
            break
        stack.extend(n.children)
    assert trip_count(node, Scope({}, {})) == trips


NAIVE_STENCIL = """
__global__ void st(int nx, int ny, const float* __restrict__ in, float* out) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < 1 || x >= nx - 1 || y < 1 || y >= ny - 1) return;
    int i = y * nx + x;
    out[i] = 0.5f * in[i] + 0.125f * (in[i - 1] + in[i + 1] + in[i - nx] + in[i + nx]);
}
"""

PAIRS = """
__global__ void pairs(int n, const int* idx, const float* src, float* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = src[idx[2 * i]] + src[idx[2 * i + 1]];
}
"""

HALO = """
#define BX 128
#define R 3
__global__ void halo(int n, const float* in, float* out) {
    __shared__ float tile[BX + 2 * R];
    int x0 = blockIdx.x * BX, tx = threadIdx.x;
    for (int xx = tx; xx < BX + 2 * R; xx += BX) tile[xx] = in[x0 + xx];
    __syncthreads();
    out[x0 + tx] = tile[tx] + tile[tx + R] + tile[tx + 2 * R];
}
"""


def test_neighbouring_stencil_loads_count_once():
    # in[i], in[i +- 1], in[i +- nx] hit the same (or a neighbour thread's) cache lines: the
    # thread moves one input and one output float, not five inputs.
    (r,) = analyze(NAIVE_STENCIL, config=STATIC)
    assert r.features["global_bytes_per_thread"] == 8
    assert r.features["neighbour_loads"] == 5  # each input is read by 5 threads


def test_one_threads_adjacent_pair_is_no_reuse():
    # idx[2i] and idx[2i + 1] share a sector (counted once) but no other thread reads them.
    (r,) = analyze(PAIRS, config=STATIC)
    assert r.features["neighbour_loads"] == 0
    assert r.features["global_bytes_per_thread"] == 4 + 2 * 4 + 4  # idx pair, 2 src, out


def test_cooperative_halo_loop_counts_its_mean_trips():
    # 134 elements staged by 128 threads: 134 / 128 loads per thread, not thread 0's 2.
    (r,) = analyze(HALO, config=STATIC)
    assert r.features["global_bytes_per_thread"] == pytest.approx(134 / 128 * 4 + 4)


BOX_WINDOW = """
__global__ void box3(const float* in, float* out, int w, int h) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < 1 || y < 1 || x >= w - 1 || y >= h - 1) return;
    float s = 0.0f;
    for (int dy = -1; dy <= 1; ++dy)
        for (int dx = -1; dx <= 1; ++dx)
            s += in[(y + dy) * w + x + dx];
    out[y * w + x] = s / 9.0f;
}
"""

STRIDED_GATHER_LOOP = """
__global__ void pairs(const int* idx, const float* src, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float s = 0.0f;
    for (int j = 0; j < 2; ++j)
        s += src[idx[2 * i + j]];
    out[i] = s;
}
"""

CLAMPED_TAPS = """
__device__ int clampi(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }
__global__ void blur(const float* in, float* out, int w, int h) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    out[y * w + x] = in[clampi(y - 1, 0, h - 1) * w + clampi(x - 1, 0, w - 1)]
                   + in[y * w + min(x + 1, w - 1)] + in[clampi(y + 1, 0, h - 1) * w + x];
}
"""


def test_window_loop_counts_once_and_earns_neighbour_credit():
    # in[(y + dy) * w + x + dx] over a 3x3 window: the next thread (and row) reads the same
    # pixels, so the nine loads move one float, and the window is nine neighbouring loads.
    (r,) = analyze(BOX_WINDOW, config=STATIC)
    assert r.features["global_bytes_per_thread"] == 8
    assert r.features["neighbour_loads"] == 9
    assert reuse_component(r.features) == 1.0


def test_strided_gather_loop_is_no_window():
    # idx[2i + j], j < 2: the pair is this thread's alone (the next thread starts 2 further).
    (r,) = analyze(STRIDED_GATHER_LOOP, config=STATIC)
    assert r.features["neighbour_loads"] == 0
    assert r.features["global_bytes_per_thread"] == 2 * 4 + 2 * 4 + 4  # idx, src, out


def test_clamped_taps_stay_neighbours_and_coalesced():
    # Clamping a tap's coordinates to the image moves only border threads' addresses.
    (r,) = analyze(CLAMPED_TAPS, config=STATIC)
    assert r.features["neighbour_loads"] == 3
    assert r.features["global_bytes_per_thread"] == 8
    assert r.features["uncoalesced_accesses"] == 0
