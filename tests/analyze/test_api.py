"""`analyze()` around ptxas: a ptxas run that times out (subprocess.TimeoutExpired, which is not
a TimeoutError) costs only the resource features, with a finding that says so; the rest of the
analysis stands."""

from __future__ import annotations

import subprocess

from cudaperf.analyze import analyze
from cudaperf.analyze.types import AnalyzeConfig

CODE = """
__global__ void timeout_probe_kernel(int n, const float* x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}
"""


def test_a_ptxas_timeout_leaves_the_analysis_standing(monkeypatch):
    import cudaperf.analyze.resources as res

    def hang(code, arch, nvcc, timeout_s):  # the nvcc --cubin run, as subprocess.run ends it
        raise subprocess.TimeoutExpired([nvcc, "--cubin"], timeout_s)

    monkeypatch.setattr(res, "_compile", hang)  # only that run: nvcc --version still works
    (r,) = analyze(CODE, config=AnalyzeConfig(ptxas_timeout_s=1.0))
    assert r.features["registers"] is None and r.features["theoretical_occupancy"] is None
    assert any(f.rule == "resources" and "timed out" in f.message for f in r.findings)
    assert r.features["coalesced_fraction"] == 1.0  # the static analysis is all there
