"""Config validation, feature documentation, the score."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from pydantic import ValidationError

from cudaperf.analyze import FEATURES, RULES, AnalyzeConfig, analyze, score_features
from cudaperf.analyze.types import score_components
from tests.data_helpers import implementations

KERNELS = Path(__file__).parent / "kernels"


def test_config_errors_say_how_to_fix():
    with pytest.raises(ValidationError, match="use one of .*sm_90"):
        AnalyzeConfig(arch="sm_99")
    with pytest.raises(ValidationError, match="1..1024"):
        AnalyzeConfig(block_size=2048)


def test_every_report_has_exactly_the_documented_features_and_known_rules():
    cfg = AnalyzeConfig(resources=False)
    for f in sorted(KERNELS.glob("*.cu")):
        for r in analyze(f.read_text(), config=cfg):
            assert set(r.features) == set(FEATURES)
            assert 0.0 <= r.score <= 1.0
            assert {x.rule for x in r.findings} <= set(RULES)
            assert [x.line for x in r.findings] == sorted(x.line for x in r.findings)


def test_score_orders_known_pairs():
    cfg = AnalyzeConfig(resources=False)

    def score(name: str, kernel: str) -> float:
        return {r.name: r.score for r in analyze((KERNELS / name).read_text(), config=cfg)}[kernel]

    assert score("coalesced.cu", "copy_coalesced") > score("strided.cu", "copy_strided")
    assert score("transpose_smem.cu", "transpose_padded") > score(
        "transpose_smem.cu", "transpose_unpadded"
    )
    assert score("barriers.cu", "uniform_barriers") > score("barriers.cu", "divergent_branch")
    assert score("matmul.cu", "matmul_tiled") > score("matmul.cu", "matmul_naive")


def test_score_components():
    cfg = AnalyzeConfig()
    w, total = cfg.weights, sum(cfg.weights.model_dump().values())
    base = dict.fromkeys(FEATURES)
    base.update(
        global_accesses=2,
        coalesced_fraction=1.0,
        unknown_accesses=0,
        vector_width_max=16,
        shared_bank_conflict_degree_max=1,
        divergent_barriers=0,
        spill_bytes=0,
        theoretical_occupancy=1.0,
        arithmetic_intensity=1e9,
        shared_staging=1,
    )
    assert score_features(base, cfg) == pytest.approx(1.0)
    assert score_features({**base, "divergent_barriers": 1}, cfg) == pytest.approx(
        1.0 - w.barriers / total
    )
    assert score_features({**base, "coalesced_fraction": 0.0}, cfg) == pytest.approx(
        1.0 - w.coalescing / total
    )
    # a 2-way conflict halves the shared-memory staging credit
    two_way = score_features({**base, "shared_bank_conflict_degree_max": 2}, cfg)
    assert two_way == pytest.approx(1.0 - 0.5 * w.reuse / total)
    # no shared memory at all: no conflict to pay for, but no reuse credit either
    plain = score_features({**base, "shared_staging": 0}, cfg)
    assert plain == pytest.approx(1.0 - w.reuse / total)
    assert two_way > plain
    # register blocking or warp shuffles reuse data as well
    assert score_features(
        {**base, "shared_staging": 0, "register_tile_elems": 16}, cfg
    ) == pytest.approx(1.0)
    assert score_features({**base, "shared_staging": 0, "warp_shuffles": 2}, cfg) == pytest.approx(
        1.0
    )


HIST_NAIVE = """
__global__ void hist_global(int n, const int* data, int* hist) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&hist[data[i]], 1);
}
"""
HIST_PRIVATE = """
__global__ void hist_private(int n, int nbins, const int* data, int* hist) {
    extern __shared__ int local[];
    for (int b = threadIdx.x; b < nbins; b += blockDim.x) local[b] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        atomicAdd(&local[data[i]], 1);
    __syncthreads();
    for (int b = threadIdx.x; b < nbins; b += blockDim.x) atomicAdd(&hist[b], local[b]);
}
"""
SUM_ATOMIC = """
__global__ void sum_all(int n, const float* x, float* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(out, x[i]);
}
__global__ void sum_block(int n, const float* x, float* out) {
    __shared__ float s[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    s[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (int k = 128; k > 0; k >>= 1) {
        if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(out, s[0]);
}
"""


def _by_name(src: str, cfg: AnalyzeConfig) -> dict:
    return {r.name: r for r in analyze(src, config=cfg)}


def test_contended_global_atomics_are_found_and_penalised():
    cfg = AnalyzeConfig(resources=False)
    naive = _by_name(HIST_NAIVE, cfg)["hist_global"]
    private = _by_name(HIST_PRIVATE, cfg)["hist_private"]
    assert naive.features["contended_atomics"] == 1
    assert private.features["contended_atomics"] == 0  # shared atomics; coalesced merge
    assert "contended-atomic" in {f.rule for f in naive.findings}
    assert private.score > naive.score
    sums = _by_name(SUM_ATOMIC, cfg)
    assert sums["sum_all"].features["contended_atomics"] == 1  # one address, every thread
    assert sums["sum_block"].features["contended_atomics"] == 0  # guarded by threadIdx.x == 0
    assert sums["sum_block"].score > sums["sum_all"].score


REGBLOCK = """
#define BK 16
__global__ void mm_regblock(int n, const float* A, const float* B, float* C) {
    __shared__ float As[BK][65];
    __shared__ float Bs[BK][64];
    int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    float acc[4][4] = {};
    for (int k0 = 0; k0 < n; k0 += BK) {
        As[threadIdx.x % BK][threadIdx.x / BK] = A[threadIdx.x + k0];
        Bs[threadIdx.x / 64][threadIdx.x % 64] = B[threadIdx.x + k0];
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; ++kk)
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) acc[i][j] += As[kk][ty + 16 * i] * Bs[kk][tx + 16 * j];
        __syncthreads();
    }
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j)
            C[(blockIdx.x * 64 + ty + 16 * i) * n + tx + 16 * j] = acc[i][j];
}
"""


def test_pragma_between_loop_header_and_body_keeps_the_nesting():
    (r,) = analyze(REGBLOCK, config=AnalyzeConfig(resources=False))
    assert r.features["unroll_pragmas"] == 3
    # per k0 slab: 16*4*4 multiply-adds (2 FLOP each) over 2 loads (8 bytes) -> 64 FLOP/byte
    # (the 16 stores of C add 64 bytes once; 64 slabs assumed for the unknown k0 loop)
    assert r.features["arithmetic_intensity"] == pytest.approx(64 * 512 / (64 * 8 + 64))


def test_register_blocking_and_rare_conflicts_are_not_penalised():
    cfg = AnalyzeConfig(resources=False)
    (r,) = analyze(REGBLOCK, config=cfg)
    f = r.features
    assert f["register_tile_elems"] == 16
    assert f["shared_bank_conflict_degree_max"] == 2  # the transposing store into As
    assert f["shared_bank_conflict_degree_weighted"] < 1.05  # the hot loads are conflict-free
    base = dict.fromkeys(FEATURES)
    base.update(
        global_accesses=2,
        coalesced_fraction=1.0,
        unknown_accesses=0,
        vector_width_max=16,
        shared_bank_conflict_degree_max=1,
        divergent_barriers=0,
        spill_bytes=0,
        theoretical_occupancy=0.25,
        arithmetic_intensity=1e9,
        shared_staging=1,
    )
    total = sum(cfg.weights.model_dump().values())
    low = score_features(base, cfg)
    assert score_features({**base, "register_tile_elems": 16}, cfg) == pytest.approx(1.0)
    assert low == pytest.approx(1.0 - 0.5 * cfg.weights.occupancy / total)
    assert score_features({**base, "contended_atomics": 1}, cfg) == pytest.approx(
        low - 0.5 * cfg.weights.atomics / total
    )


TRANSPOSE_STRIDED = """
__global__ void transpose_naive(int n, const float* in, float* out) {
    int c = blockIdx.x * 32 + threadIdx.x, r = blockIdx.y * 32 + threadIdx.y;
    if (r < n && c < n) out[(long long)r * n + c] = in[(long long)c * n + r];
}
"""

TRANSPOSE_TILED_2WAY = """
__global__ void transpose_tiled(int n, const float* in, float* out) {
    __shared__ float tile[32][32 + 2];  // padded by 2 words: column reads are 2-way
    int c = blockIdx.x * 32 + threadIdx.x, r = blockIdx.y * 32 + threadIdx.y;
    if (r < n && c < n) tile[threadIdx.y][threadIdx.x] = in[(long long)r * n + c];
    __syncthreads();
    c = blockIdx.y * 32 + threadIdx.x, r = blockIdx.x * 32 + threadIdx.y;
    if (r < n && c < n) out[(long long)r * n + c] = tile[threadIdx.x][threadIdx.y];
}
"""


def test_tiled_with_conflict_scores_above_naive_strided():
    cfg = AnalyzeConfig(resources=False)
    (naive,) = analyze(TRANSPOSE_STRIDED, config=cfg)
    (tiled,) = analyze(TRANSPOSE_TILED_2WAY, config=cfg)
    assert tiled.features["shared_staging"] == 1
    assert tiled.features["shared_bank_conflict_degree_max"] == 2
    assert naive.features["shared_staging"] == 0
    assert tiled.score > naive.score


UNUSED_SHARED = """
__global__ void copy(int n, const float* in, float* out) {
    __shared__ float unused[256];
    __shared__ float written[256];
    float dead[16];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    written[threadIdx.x] = in[i];
    __syncthreads();
    if (i < n) out[i] = in[i];
}
"""


def test_unused_shared_and_local_arrays_earn_no_reuse():
    cfg = AnalyzeConfig(resources=False)
    (r,) = analyze(UNUSED_SHARED, config=cfg)
    assert r.features["shared_staging"] == 0  # written but never read
    assert r.features["register_tile_elems"] == 0  # declared, never used
    assert score_components(r.features, cfg)["reuse"] == 0.0


def test_intensity_sees_type_macros_and_cooperative_loops():
    code = """
#define T double
#define TS 32
__global__ void mm(int n, const T* a, const T* b, T* c) {
    __shared__ T As[TS][TS + 1], Bs[TS][TS + 1];
    int tx = threadIdx.x, ty = threadIdx.y;
    T acc = 0;
    for (int k0 = 0; k0 < 1024; k0 += TS) {
        for (int e = tx; e < TS; e += 32) As[ty][e] = a[ty * n + k0 + e];
        Bs[ty][tx] = b[(k0 + ty) * n + tx];
        __syncthreads();
        for (int k = 0; k < TS; ++k) acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    c[ty * n + tx] = acc;
}
"""
    (r,) = analyze(code, config=AnalyzeConfig(resources=False))
    f = r.features
    assert f["intensity_exact"] == 1  # the cooperative e-loop counts thread 0's one trip
    # 32 slabs x 32 multiply-adds (2 FLOP) over 32 x 2 loads + 1 store (the macro element
    # type `T` resolves to double: 8 bytes each in the global traffic)
    assert f["flops_per_thread"] == 32 * 32 * 2
    assert f["global_bytes_per_thread"] == 32 * 2 * 8 + 8


def test_cached_neighbour_reuse_scores_like_shared_staging():
    # A naive stencil's neighbour loads are reuse the caches serve (it outruns the tiled
    # version on an H200), so it earns the same reuse credit as shared-memory staging.
    code = """
__global__ void st(int nx, const float* __restrict__ in, float* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= 1 && i < nx - 1) out[i] = 0.25f * in[i - 1] + 0.5f * in[i] + 0.25f * in[i + 1];
}
"""
    cfg = AnalyzeConfig(resources=False)
    (r,) = analyze(code, config=cfg)
    assert r.features["neighbour_loads"] == 3
    assert score_components(r.features, cfg)["reuse"] == 1.0


def _dumps(reports) -> list[str]:
    return [r.model_dump_json() for r in reports]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (ptxas) on PATH")
def test_ptxas_only_adds_what_without_resources_takes_away(shared_ptxas_cache):
    from cudaperf.analyze import without_resources

    on, off = AnalyzeConfig(), AnalyzeConfig(resources=False)
    changed = 0
    for name, code in implementations():
        full = analyze(code, config=on)
        changed += _dumps(full) != _dumps(analyze(code, config=off))
        assert _dumps(without_resources(full, on)) == _dumps(analyze(code, config=off)), name
    assert changed > 20  # ptxas did add registers, occupancy and findings to these


class _EveryKernel(dict):
    """A ptxas report naming every kernel: many registers, spills, a lot of shared memory."""

    def get(self, name, default=None):
        from cudaperf.analyze.resources import Resources

        return [
            Resources(
                registers=200,
                smem_bytes=40000,
                stack_bytes=32,
                spill_store_bytes=96,
                spill_load_bytes=96,
            )
        ]


def test_without_resources_drops_spills_occupancy_and_their_findings(monkeypatch):
    import cudaperf.analyze.api as api
    from cudaperf.analyze import RESOURCE_FEATURES, RESOURCE_RULES, without_resources

    on, off = AnalyzeConfig(), AnalyzeConfig(resources=False)
    monkeypatch.setattr(api, "ptxas_resources", lambda *a, **k: _EveryKernel())
    code = (KERNELS / "transpose_naive.cu").read_text()
    (full,) = analyze(code, config=on)
    assert {"register-spill", "low-occupancy"} <= {f.rule for f in full.findings}
    assert all(full.features[k] is not None for k in RESOURCE_FEATURES)
    (plain,) = analyze(code, config=off)
    assert full.score != plain.score
    (got,) = without_resources([full], on)
    assert got.model_dump_json() == plain.model_dump_json()
    assert not {f.rule for f in got.findings} & set(RESOURCE_RULES)


def test_reports_are_read_for_another_config_only_when_it_just_turns_ptxas_off():
    from cudaperf.analyze import reports_for_config

    on, off = AnalyzeConfig(), AnalyzeConfig(resources=False)
    reports = analyze((KERNELS / "transpose_naive.cu").read_text(), config=off)
    assert reports_for_config(reports, off, off) == reports
    assert reports_for_config([], on, off) == []
    assert reports_for_config(reports, on, off) is not None
    assert reports_for_config(reports, off, on) is None  # ptxas wanted, never ran
    assert reports_for_config(reports, on, AnalyzeConfig(resources=False, block_size=128)) is None
    assert reports_for_config(reports, on, AnalyzeConfig(resources=False, arch="sm_80")) is None
