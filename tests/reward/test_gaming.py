"""Holes a policy could game in the reward, each with a deliberately gaming candidate."""

from __future__ import annotations

import math

import pytest

from cudaperf.analyze.launches import base_name, credited_kernels, credited_source
from cudaperf.execute.types import Status
from cudaperf.rank.features import code_stats
from cudaperf.reward import RewardConfig, compute_reward
from cudaperf.reward.scorer import RewardScorer
from cudaperf.tasks.io import load_sample

from .helpers import report, result

HONEST = """
__global__ void scale_kernel(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i];
}
extern "C" void scale(const float* x, float* y, int n) {
  scale_kernel<<<(n + 255) / 256, 256>>>(x, y, n);
}
"""

# The same host code plus a fancy kernel that nothing launches (it only decorates the file).
DECOY = """
__global__ void tiled_decoy(const float* x, float* y, int n) {
  __shared__ float tile[256];
  tile[threadIdx.x] = x[blockIdx.x * 256 + threadIdx.x];
  __syncthreads();
  float v = __shfl_down_sync(0xffffffff, tile[threadIdx.x], 1);
  y[blockIdx.x * 256 + threadIdx.x] = v;
}
"""

SERIAL = """
__global__ void scale_kernel(const float* x, float* y, int n) {
  for (int i = 0; i < n; ++i) y[i] = 2.0f * x[i];
}
extern "C" void scale(const float* x, float* y, int n) {
  scale_kernel<<<1, 1>>>(x, y, n);
}
"""


def test_a_no_op_scores_no_higher_than_a_runtime_error():
    cfg = RewardConfig()
    noop = compute_reward(result(Status.WRONG_OUTPUT), [report(1.0)], None, cfg).total
    crash = compute_reward(result(Status.RUNTIME_ERROR), [], None, cfg).total
    assert noop <= crash
    with pytest.raises(ValueError, match="wrong_output=0.0 must be <= runtime_error"):
        RewardConfig(wrong_output=0.0)


def test_a_never_launched_kernel_earns_no_credit():
    gaming = DECOY + HONEST
    assert credited_kernels(gaming, None) == {"scale_kernel"}  # static: host launches
    assert credited_kernels(gaming, ["void scale_kernel(const float*, float*, int)"]) == {
        "scale_kernel"
    }
    assert "tiled_decoy" not in credited_source(gaming, None)
    assert credited_source(HONEST, None) == HONEST  # honest code is left alone
    assert credited_source(gaming, None).count("\n") == gaming.count("\n")


def test_structure_counts_only_kernels_seen_launching():
    reports = [report(1.0).model_copy(update={"name": "tiled_decoy"}), report(0.2)]
    reports[1] = reports[1].model_copy(update={"name": "scale_kernel"})
    ran = result(Status.OK, launched=["_Z12scale_kernelPKfPfi"])
    bd = compute_reward(ran, reports, None, RewardConfig())
    assert bd.structure_score == pytest.approx(0.2)
    unobserved = compute_reward(result(Status.OK), reports, None, RewardConfig())
    assert unobserved.structure_score == pytest.approx(0.6)  # None: today's behaviour


def test_a_serial_port_earns_no_structure_credit():
    assert credited_kernels(SERIAL, None) == set()
    assert credited_kernels(SERIAL, ["scale_kernel"]) == set()
    assert credited_kernels(HONEST, None) == {"scale_kernel"}


def test_profiler_names_map_to_source_names():
    assert base_name("_Z12scale_kernelPKfPfi") == "scale_kernel"
    assert base_name("void scale_kernel<float>(float const*, float*, int)") == "scale_kernel"
    assert base_name("_ZN2ns6kernelEPf") == "kernel"
    assert base_name("scale_kernel") == "scale_kernel"


class _Recorder:
    def __init__(self):
        self.codes: list[str] = []

    def analyzer(self, code):
        self.codes.append(code)
        return []

    def ranker(self, task, code):
        self.codes.append(code)
        return None


def test_scorer_gives_analyzer_and_ranker_only_the_credited_code():
    t = next(t for t in load_sample() if t.kind.value == "c2cuda")
    rec = _Recorder()

    def evaluator(jobs):
        return [result(Status.OK, code=c.code, task_id=tt.id) for tt, c in jobs]

    s = RewardScorer([t], evaluator=evaluator, analyzer=rec.analyzer, ranker=rec.ranker)
    s.score_code(t, [DECOY + HONEST])
    assert rec.codes and all("tiled_decoy" not in c and "scale_kernel" in c for c in rec.codes)


GAMED = """
__global__ void k(float* y, int n) {  // __shared__ __syncthreads() __shfl_down_sync( for (
  /* atomicAdd( __ldg( #pragma unroll
     for ( if ( */
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  const char* s = "__shared__ __syncthreads() for (";
  if (i < n) y[i] = 1.0f;
}
"""
CLEAN = """
__global__ void k(float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  const char* s = "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx";
  if (i < n) y[i] = 1.0f;
}
"""


def test_comments_and_string_literals_do_not_reach_ranker_features():
    assert code_stats(GAMED) == code_stats(CLEAN)


def test_comment_free_code_gives_the_same_statistics_as_before():
    import re

    from cudaperf.rank.features import _FUNCTIONS, _PATTERNS

    for code in (HONEST, SERIAL, DECOY + HONEST):
        old = {n: float(f(code)) for n, f in _FUNCTIONS.items()}
        old |= {n: math.log1p(len(re.findall(rx, code))) for n, rx in _PATTERNS.items()}
        assert code_stats(code) == old  # (literals are masked to the same length)
