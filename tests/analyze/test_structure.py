"""Known answers for barriers, atomics, warp shuffles and cooperative groups."""

from __future__ import annotations

from pathlib import Path

from cudaperf.analyze import AnalyzeConfig, StructuralReport, analyze

KERNELS = Path(__file__).parent / "kernels"
STATIC = AnalyzeConfig(resources=False)  # tree-sitter only: no nvcc, fast


def reports(name: str, config: AnalyzeConfig = STATIC) -> dict[str, StructuralReport]:
    """Reports by kernel name for one known-answer file."""
    return {r.name: r for r in analyze((KERNELS / name).read_text(), config=config)}


def test_divergent_barriers_flagged_uniform_ones_not():
    r = reports("barriers.cu")
    div = r["divergent_branch"]
    assert div.features["divergent_barriers"] == 1
    assert [(f.rule, f.line) for f in div.findings] == [("divergent-barrier", 9)]
    ret = r["divergent_return"]
    assert ret.features["divergent_barriers"] == 1
    assert [f.line for f in ret.findings if f.rule == "divergent-barrier"] == [19]
    uni = r["uniform_barriers"]
    assert uni.features["syncthreads"] == 2
    assert uni.features["divergent_barriers"] == 0
    assert not uni.findings


def test_shuffles_in_helper_and_atomic():
    f = reports("reduce_shuffle.cu")["reduce_sum"].features
    assert f["warp_shuffles"] == 1
    assert f["atomics"] == 1
    assert f["syncthreads"] == 0
    assert f["coalesced_fraction"] == 1.0  # grid-stride load


def test_votes_syncwarp_cooperative_groups_and_pragmas():
    code = """
    #include <cooperative_groups.h>
    namespace cg = cooperative_groups;
    __global__ void k(float* a) {
        cg::thread_block b = cg::this_thread_block();
        unsigned m = __ballot_sync(0xffffffff, a[threadIdx.x] > 0);
        __syncwarp();
        #pragma unroll
        for (int i = 0; i < 4; ++i) a[threadIdx.x] += m;
        b.sync();
    }"""
    (r,) = analyze(code, config=STATIC)
    f = r.features
    assert (f["warp_votes"], f["syncwarps"], f["unroll_pragmas"]) == (1, 1, 1)
    assert f["cooperative_groups"] >= 2 and f["syncthreads"] == 1
    assert f["divergent_barriers"] == 0


def test_barrier_in_thread_dependent_loop_is_divergent():
    code = """
    __global__ void k(float* a, int n) {
        for (int i = threadIdx.x; i < n; i += blockDim.x) { a[i] = 0; __syncthreads(); }
    }"""
    (r,) = analyze(code, config=STATIC)
    assert r.features["divergent_barriers"] == 1


def test_tree_reduction_barrier_is_uniform_warp_branch_is_not():
    code = """
    __global__ void red(const float* in, float* out) {
        extern __shared__ float sdata[];
        unsigned tid = threadIdx.x;
        sdata[tid] = in[blockIdx.x * blockDim.x + tid];
        __syncthreads();
        for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
            if (tid < s) sdata[tid] += sdata[tid + s];
            __syncthreads();
        }
        if (tid == 0) out[blockIdx.x] = sdata[0];
    }
    __global__ void bad(float* a) {
        int warp = threadIdx.x >> 5;
        if (warp == 0) { a[threadIdx.x] = 1; __syncthreads(); }
    }"""
    red, bad = analyze(code, config=STATIC)
    assert (red.features["syncthreads"], red.features["divergent_barriers"]) == (2, 0)
    assert bad.features["divergent_barriers"] == 1
